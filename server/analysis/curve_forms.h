// The parametric forms of the equal-time reference curve (docs/equal-time.md
// § The reference curve), fitted by weighted least squares:
//
//   power law   L(t) = L∞ + A·(t/t_ref)^(−α)
//   plateau     L(t) = L∞ + A·((t + t₀)/t_ref)^(−α)
//
// with L∞ ≥ 0, A > 0, 0 < α ≤ kMaxAlpha, t₀ ≥ 0, and t_ref the geometric
// mean of the fitted times (so that A is a loss: L(t_ref) − L∞ for the power
// law). The plateau form is flat for t ≪ t₀ — the early plateau of training,
// concave in log time — and a power law for t ≫ t₀.
//
// Method: for fixed (α, t₀) the model is linear in (L∞, A), solved exactly
// (L∞ clamped at 0 when it would go negative); α is searched on a log grid
// and refined by golden section, t₀ likewise (0 and a log grid from
// 0.05·t_min to 20·t_max). Deterministic.
//
// Thread-safety: pure functions on values.
#ifndef SMALLEM_SERVER_ANALYSIS_CURVE_FORMS_H_
#define SMALLEM_SERVER_ANALYSIS_CURVE_FORMS_H_

#include <optional>
#include <vector>

namespace smallem {

inline constexpr double kMaxAlpha = 4.0;

enum class Form { kPowerLaw, kPlateau };
// "power law", "plateau power law".
const char* FormName(Form form);
// Free parameters: 3 and 4.
int FormParameters(Form form);

struct FormFit {
  Form form = Form::kPowerLaw;
  double l_inf = 0;  // nats/byte
  double a = 0;      // nats/byte at t_ref
  double alpha = 0;
  double t0 = 0;     // seconds; 0 for the power law
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

}  // namespace smallem

#endif  // SMALLEM_SERVER_ANALYSIS_CURVE_FORMS_H_
