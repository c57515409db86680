// The parametric forms of the equal-time reference curve (docs/equal-time.md
// § The reference curve), fitted by weighted least squares:
//
//   log-linear  L(t) = L_ref − A·ln(t/t_ref)
//   power law   L(t) = L∞ + A·(t/t_ref)^(−α)
//   plateau     L(t) = L∞ + A·((t + t₀)/t_ref)^(−α)
//   broken power law
//               L(t) = A·((1 + (t/t₀)^β)/(1 + (t_ref/t₀)^β))^(−α/β)
//
// with A > 0, L∞ ≥ 0, 0 < α ≤ kMaxAlpha, t₀ ≥ 0, and t_ref the geometric
// mean of the fitted times (so that A is a loss: L(t_ref) − L∞ for the power
// law). The plateau form is flat for t ≪ t₀ — the early plateau of training,
// concave in log time — and a power law for t ≫ t₀. The log-linear form has
// no curvature in log time (the limit α → 0 of the power law, which the
// power law's α ≥ 0.01 only approximates). The broken power law (a
// "smoothly broken" power law, as in Caballero et al., "Broken neural
// scaling laws", 2023, with a flat first segment and L∞ = 0) is flat for
// t ≪ t₀ and A'·t^(−α) for t ≫ t₀, with a knee whose sharpness β ∈ [0.5, 30]
// is free — the plateau form's knee is that of β = 1, too gentle for a
// curve whose slope in log time doubles within one doubling of t.
//
// Method: the log-linear form is a weighted linear regression on ln t. For
// fixed (α, t₀) the other forms' model is linear in (L∞, A), solved exactly
// (L∞ clamped at 0 when it would go negative); α is searched on a log grid
// and refined by golden section, t₀ likewise (0 and a log grid from
// 0.05·t_min to 20·t_max), and the broken power law's β likewise (log grid
// on [0.5, 30]) for each t₀. Deterministic.
//
// A refit to nearby data (RefitFormNear: the bootstrap's resamples, a point
// moved by its standard error) starts from the fit it perturbs instead:
// (ln α, ln t₀, ln β) by Nelder–Mead (server/analysis/nelder_mead.h) from
// the start's values, within the same bounds, (L∞, A) exactly as above. The
// global search costs ~100 (power law), ~7,000 (plateau) and ~80,000
// (broken power law) linear solves; the local one ~50–300.
//
// Thread-safety: pure functions on values.
#ifndef SMALLEM_SERVER_ANALYSIS_CURVE_FIT_H_
#define SMALLEM_SERVER_ANALYSIS_CURVE_FIT_H_

#include <optional>
#include <vector>

namespace smallem {

inline constexpr double kMaxAlpha = 4.0;

enum class Form { kLogLinear, kPowerLaw, kPlateau, kBrokenPowerLaw };
// "log-linear", "power law", "plateau power law", "broken power law".
const char* FormName(Form form);
// Free parameters: 2, 3, 4 and 4.
int FormParameters(Form form);

struct FormFit {
  Form form = Form::kPowerLaw;
  double l_inf = 0;  // nats/byte; the log-linear form's L(t_ref)
  double a = 0;      // nats/byte at t_ref; the log-linear form's fall per unit of ln t
  double alpha = 0;  // 0 for the log-linear form
  double t0 = 0;     // seconds; 0 for the power law
  double beta = 1;   // the broken power law's knee sharpness
  double t_ref = 1;  // seconds
  double weighted_sse = 0;  // Σ wᵢ·(Lᵢ − L(tᵢ))²

  double Value(double t) const;
  double Slope(double t) const;  // dL/dt, nats/byte per second
};

// The best fit of `form` to (ts[i], ls[i]) with weights ws[i] (> 0; e.g.
// 1/variance). nullopt when there are fewer points than parameters, or no
// decreasing fit exists (A ≤ 0 at the optimum: the loss does not fall).
// REQUIRES: equal sizes, times > 0.
std::optional<FormFit> FitForm(Form form, const std::vector<double>& ts,
                               const std::vector<double>& ls, const std::vector<double>& ws);

// The fit of `start.form` to (ts, ls, ws) nearest `start` (a fit of the
// same form to data close to these): a local minimum from start's
// nonlinear parameters, not a global search. A plateau fit with t₀ = 0
// stays a power law in t. nullopt as FitForm.
std::optional<FormFit> RefitFormNear(const FormFit& start, const std::vector<double>& ts,
                                     const std::vector<double>& ls,
                                     const std::vector<double>& ws);

}  // namespace smallem

#endif  // SMALLEM_SERVER_ANALYSIS_CURVE_FIT_H_
