#include "server/analysis/curve_check.h"

#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/check.h"
#include "server/analysis/distributions.h"
#include "server/analysis/stats.h"
#include "server/grid/grid.h"

namespace smallem {
namespace {

// |rᵢ|/(σ/√nᵢ) below which a fit with no spare degree of freedom is exact.
constexpr double kExactFitTolerance = 0.1;

// σ pooled over the seeds of every point with two or more.
void PoolPoints(const std::vector<CurvePoint>& points, std::optional<double>* sigma, int* df) {
  double sum = 0;
  *df = 0;
  for (const CurvePoint& p : points) {
    if (p.seed_losses.size() < 2) continue;
    sum += SampleVariance(p.seed_losses) * static_cast<double>(p.seed_losses.size() - 1);
    *df += static_cast<int>(p.seed_losses.size() - 1);
  }
  if (*df > 0) *sigma = std::sqrt(sum / *df);
}

// Whether `curve`'s form fits its points within the noise; sets *misfit.
bool WithinNoise(const TimeCurve& curve, const CurveChoice& c, std::optional<double>* misfit) {
  if (!c.sigma || !(*c.sigma > 0)) return true;
  const std::vector<double> r = curve.Residuals();
  const int k = static_cast<int>(r.size()), dof = k - FormParameters(curve.form());
  double chi2 = 0, worst = 0;
  for (int i = 0; i < k; ++i) {
    const double n = static_cast<double>(std::max<size_t>(1, curve.points()[i].seed_losses.size()));
    const double z = r[i] / (*c.sigma / std::sqrt(n));
    chi2 += z * z;
    worst = std::max(worst, std::abs(z));
  }
  if (dof >= 1) {
    *misfit = chi2 / dof;
    return *misfit <= FQuantile(1 - kResidualTestLevel, dof, c.sigma_df);
  }
  // As many parameters as points: a form that fits passes through them; one
  // that cannot (its bounds) would bias R at the very points it was given.
  misfit->reset();
  return worst <= kExactFitTolerance;
}

double WorstMiss(const std::vector<LeftOut>& misses) {
  double worst = 0;
  for (const LeftOut& m : misses) worst = std::max(worst, std::abs(m.miss));
  return worst;
}

// The chord's worst bias between two points, for its note.
std::string ChordNote(const TimeCurve& curve) {
  const double l1 = curve.points()[0].loss, l2 = curve.points()[1].loss;
  const double power = l1 > 0 && l2 > 0 ? (std::sqrt(l1) - std::sqrt(l2)) * (std::sqrt(l1) - std::sqrt(l2)) / 2 : 0;
  return absl::StrFormat(
      "With two reference budgets R(t) is the chord in log time, which lies above a convex curve: "
      "at mid-span it overestimates a power law falling to 0 by %.4f nats/byte (a variant "
      "looks better by that much), and any monotone curve by at most %.4f. Add a third budget "
      "between them to fit the curve.",
      power, std::abs(l1 - l2) / 2);
}

}  // namespace

std::vector<LeftOut> LeaveOneOut(const TimeCurve& curve) {
  std::vector<LeftOut> out;
  const std::vector<CurvePoint>& pts = curve.points();
  for (size_t i = 1; i + 1 < pts.size(); ++i) {
    std::vector<CurvePoint> others = pts;
    others.erase(others.begin() + static_cast<std::ptrdiff_t>(i));
    absl::StatusOr<TimeCurve> refit = curve.Refit(others);
    if (!refit.ok()) refit = TimeCurve::Create(others);
    CHECK(refit.ok()) << refit.status();
    const double predicted = refit->Interpolate(pts[i].seconds).value;
    out.push_back({.budget = pts[i].budget, .seconds = pts[i].seconds, .measured = pts[i].loss,
                   .predicted = predicted, .miss = pts[i].loss - predicted});
  }
  return out;
}

absl::StatusOr<CurveChoice> ChooseReferenceCurve(std::vector<CurvePoint> points,
                                                 std::optional<double> fallback_sigma,
                                                 int fallback_df) {
  absl::StatusOr<TimeCurve> chord = TimeCurve::Create(points);
  if (!chord.ok()) return chord.status();
  CurveChoice c{.curve = *chord};
  PoolPoints(points, &c.sigma, &c.sigma_df);
  if (c.sigma) {
    c.sigma_source = "reference seeds";
  } else if (fallback_sigma && fallback_df > 0) {
    c.sigma = fallback_sigma, c.sigma_df = fallback_df, c.sigma_source = "the compared arms";
  }
  const size_t k = points.size();
  if (k == 2) {
    c.notes.push_back(ChordNote(c.curve));
    return c;
  }
  std::vector<std::string> rejected;
  for (Form form : {Form::kPowerLaw, Form::kPlateau}) {
    if (form == Form::kPlateau && k < 5) break;
    absl::StatusOr<TimeCurve> fit = TimeCurve::Build(points, CurveModel::kFit, form);
    if (!fit.ok()) {
      rejected.push_back(absl::StrCat(FormName(form), ": ", fit.status().message()));
      continue;
    }
    std::optional<double> misfit;
    if (WithinNoise(*fit, c, &misfit)) {
      c.curve = *std::move(fit);
      c.misfit = misfit;
      if (!c.sigma) {
        c.notes.push_back("The reference noise is not measured (one seed per budget), so the "
                          "fit's residuals were not tested against it.");
      }
      c.left_out = LeaveOneOut(c.curve);
      return c;
    }
    c.misfit = misfit;
    rejected.push_back(absl::StrFormat(
        "%s: residuals beyond the points' noise (%s)", FormName(form),
        misfit ? absl::StrFormat("χ²/dof = %.1f", *misfit) : std::string("a point off by > t·SE")));
  }
  // No form fits within the noise: the candidate that best predicts budgets
  // it did not see.
  std::vector<TimeCurve> candidates;
  candidates.push_back(*TimeCurve::Build(points, CurveModel::kPchip));
  if (k >= 4) {
    for (Form form : {Form::kPowerLaw, Form::kPlateau}) {
      if (form == Form::kPlateau && k < 5) break;
      absl::StatusOr<TimeCurve> through = TimeCurve::Build(points, CurveModel::kFitThroughPoints, form);
      if (through.ok()) candidates.push_back(*std::move(through));
    }
  }
  size_t best = 0;
  double best_worst = INFINITY;
  std::vector<std::string> scores;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const double worst = WorstMiss(LeaveOneOut(candidates[i]));
    scores.push_back(absl::StrFormat("%s %.4f", candidates[i].model() == CurveModel::kPchip
                                                    ? "PCHIP"
                                                    : FormName(candidates[i].form()),
                                     worst));
    if (worst < best_worst) best_worst = worst, best = i;
  }
  c.curve = candidates[best];
  c.left_out = LeaveOneOut(c.curve);
  c.notes.push_back(absl::StrCat(
      "No form fits the reference points within their noise (", absl::StrJoin(rejected, "; "),
      "), so R(t) is ", c.curve.Describe(),
      candidates.size() > 1
          ? absl::StrCat(": the smallest worst leave-one-out miss (", absl::StrJoin(scores, ", "), ")")
          : std::string(" (three budgets leave none out of a fit)"),
      "."));
  return c;
}

CurveBootstrap CurveBootstrap::Run(const TimeCurve& curve, int resamples, uint64_t seed) {
  CurveBootstrap out;
  size_t n = 0;
  for (const CurvePoint& p : curve.points()) n = std::max(n, p.seed_losses.size());
  if (n < 2) return out;
  out.inflation_ = std::sqrt(static_cast<double>(n) / static_cast<double>(n - 1));
  std::mt19937_64 rng(seed);
  for (int b = 0; b < resamples; ++b) {
    std::vector<CurvePoint> points = curve.points();
    for (CurvePoint& p : points) {
      const size_t m = p.seed_losses.size();
      if (m < 2) continue;
      double loss = 0, seconds = 0;
      for (size_t j = 0; j < m; ++j) {
        // rng() % m: fully specified by the standard (unlike
        // std::uniform_int_distribution), its bias below m/2⁶⁴.
        const size_t pick = static_cast<size_t>(rng() % m);
        loss += p.seed_losses[pick];
        seconds += pick < p.seed_seconds.size() ? p.seed_seconds[pick] : p.seconds;
      }
      p.loss = loss / static_cast<double>(m);
      p.seconds = seconds / static_cast<double>(m);
    }
    absl::StatusOr<TimeCurve> refit = curve.Refit(points);
    if (refit.ok()) out.curves_.push_back(*std::move(refit));
  }
  return out;
}

double CurveBootstrap::Se(double seconds) const {
  if (curves_.size() < 2) return 0;
  std::vector<double> values;
  for (const TimeCurve& c : curves_) values.push_back(c.Interpolate(seconds).value);
  return std::sqrt(SampleVariance(values)) * inflation_;
}

}  // namespace smallem
