#include "server/analysis/curve_choice.h"

#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/check.h"
#include "server/analysis/distributions.h"
#include "server/analysis/stats.h"
#include "runspec/grid.h"

namespace smallem {
namespace {

constexpr Form kForms[] = {Form::kLogLinear, Form::kPowerLaw, Form::kPlateau,
                           Form::kBrokenPowerLaw};

// |rᵢ|/(σ/√nᵢ) below which a fit with no spare degree of freedom is exact.
constexpr double kExactFitTolerance = 0.1;

double SeedCount(const CurvePoint& p) {
  return static_cast<double>(std::max<size_t>(1, p.seed_losses.size()));
}

// σ pooled over the seeds of every point with two or more and the arms'
// σ (with its df); sets the choice's sigma, sigma_df and sigma_source.
void PoolNoise(const std::vector<CurvePoint>& points, std::optional<double> arms_sigma,
               int arms_df, CurveChoice& c) {
  double sum = 0;
  int df = 0;
  for (const CurvePoint& p : points) {
    if (p.seed_losses.size() < 2 || p.in_arms_noise) continue;
    sum += SampleVariance(p.seed_losses) * static_cast<double>(p.seed_losses.size() - 1);
    df += static_cast<int>(p.seed_losses.size() - 1);
  }
  const bool arms = arms_sigma && arms_df > 0;
  c.sigma_source = df > 0 ? (arms ? "reference seeds and the compared arms" : "reference seeds")
                          : (arms ? "compared arms" : "");
  if (arms) sum += *arms_sigma * *arms_sigma * arms_df, df += arms_df;
  c.sigma_df = df;
  if (df > 0) c.sigma = std::sqrt(sum / df);
}

// `curve`'s model refitted to `points` (the chord when `same_model` is
// false or the refit fails); with `near`, started from that curve's fit.
TimeCurve RefitOrChord(const TimeCurve& curve, bool same_model,
                       const std::vector<CurvePoint>& points, bool near = false) {
  absl::StatusOr<TimeCurve> refit = !same_model ? TimeCurve::Create(points)
                                    : near      ? curve.RefitNear(points)
                                                : curve.Refit(points);
  if (!refit.ok()) refit = TimeCurve::Create(points);
  CHECK(refit.ok()) << refit.status();
  return *std::move(refit);
}

double RmsMiss(const std::vector<LeftOut>& misses) {
  double sum = 0;
  for (const LeftOut& m : misses) sum += m.miss * m.miss;
  return misses.empty() ? 0 : std::sqrt(sum / static_cast<double>(misses.size()));
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

// `rows` vectors of `columns` standard normals (mt19937_64 seeded with
// `seed`, drawn column by column), moment-matched: each row centred, made
// orthogonal to the rows before it (Gram–Schmidt) and scaled to sample
// variance 1 (n − 1 in the denominator), so that their sample covariance is
// exactly the identity. With columns ≤ rows that cannot be: plain normals.
std::vector<std::vector<double>> MomentMatchedNormals(size_t rows, size_t columns,
                                                      uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<double>> z(rows, std::vector<double>(columns));
  for (size_t b = 0; b < columns; ++b) {
    for (size_t i = 0; i < rows; ++i) z[i][b] = StandardNormal(rng);
  }
  if (columns <= rows) return z;
  auto dot = [&](const std::vector<double>& x, const std::vector<double>& y) {
    double sum = 0;
    for (size_t b = 0; b < columns; ++b) sum += x[b] * y[b];
    return sum;
  };
  for (size_t i = 0; i < rows; ++i) {
    const double mean = Mean(z[i]);
    for (double& v : z[i]) v -= mean;
    for (size_t j = 0; j < i; ++j) {
      const double c = dot(z[i], z[j]) / dot(z[j], z[j]);
      for (size_t b = 0; b < columns; ++b) z[i][b] -= c * z[j][b];
    }
    const double scale = std::sqrt(static_cast<double>(columns - 1) / dot(z[i], z[i]));
    for (double& v : z[i]) v *= scale;
  }
  return z;
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

std::vector<LeftOut> LeaveOneOut(const TimeCurve& curve, std::optional<double> sigma) {
  std::vector<LeftOut> out;
  const std::vector<CurvePoint>& pts = curve.points();
  for (size_t i = 1; i + 1 < pts.size(); ++i) {
    std::vector<CurvePoint> others = pts;
    others.erase(others.begin() + static_cast<std::ptrdiff_t>(i));
    LeftOut m{.budget = pts[i].budget, .seconds = pts[i].seconds, .measured = pts[i].loss};
    absl::StatusOr<TimeCurve> refit = curve.Refit(others);
    m.same_model = refit.ok();
    const TimeCurve predictor = refit.ok() ? *std::move(refit) : RefitOrChord(curve, false, others);
    m.predicted = predictor.Interpolate(pts[i].seconds).value;
    m.miss = pts[i].loss - m.predicted;
    if (sigma) {
      double variance = *sigma * *sigma / SeedCount(pts[i]);
      for (size_t j = 0; j < others.size(); ++j) {
        std::vector<CurvePoint> moved = others;
        moved[j].loss += *sigma / std::sqrt(SeedCount(others[j]));
        // A small move: refitted from the others' fit.
        const double delta =
            RefitOrChord(predictor, true, moved, /*near=*/true).Interpolate(pts[i].seconds).value -
            m.predicted;
        variance += delta * delta;
      }
      m.noise_variance = variance;
    }
    out.push_back(m);
  }
  return out;
}

ModelError ModelErrorAt(const CurveChoice& choice, double seconds) {
  const std::vector<CurvePoint>& pts = choice.curve.points();
  const size_t k = pts.size();
  if (k < 3 || choice.left_out.size() != k - 2) return {};
  size_t a = 0;
  while (a + 2 < k && pts[a + 1].seconds <= seconds) ++a;
  double excess = 0;
  int used = 0;
  for (size_t i : {a, a + 1}) {
    if (i < 1 || i + 1 >= k) continue;  // an end: never left out
    const LeftOut& m = choice.left_out[i - 1];
    if (!m.same_model) continue;
    excess += m.miss * m.miss - m.noise_variance.value_or(0);
    ++used;
  }
  if (used == 0) return {};
  return {.variance = std::max(0.0, excess / used), .df = used};
}

absl::StatusOr<CurveChoice> ChooseReferenceCurve(std::vector<CurvePoint> points,
                                                 std::optional<double> arms_sigma,
                                                 int arms_df) {
  absl::StatusOr<TimeCurve> chord = TimeCurve::Create(points);
  if (!chord.ok()) return chord.status();
  CurveChoice c{.curve = *chord};
  PoolNoise(points, arms_sigma, arms_df, c);
  const size_t k = points.size();
  if (k == 2) {
    c.notes.push_back(ChordNote(c.curve));
    return c;
  }
  std::vector<std::string> rejected;
  std::vector<TimeCurve> fitted;  // the forms that fit, rejected for their residuals
  for (Form form : kForms) {
    if (FormParameters(form) >= 4 && k < 5) break;
    absl::StatusOr<TimeCurve> fit = TimeCurve::Build(points, CurveModel::kFit, form);
    if (!fit.ok()) {
      rejected.push_back(absl::StrCat(FormName(form), ": ", fit.status().message()));
      continue;
    }
    fitted.push_back(*fit);
    std::optional<double> misfit;
    if (WithinNoise(*fit, c, &misfit)) {
      c.curve = *std::move(fit);
      c.misfit = misfit;
      if (!c.sigma) {
        c.notes.push_back("The reference noise is not measured (one seed per budget), so the "
                          "fit's residuals were not tested against it.");
      }
      c.left_out = LeaveOneOut(c.curve, c.sigma);
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
    for (const TimeCurve& fit : fitted) candidates.push_back(fit.ThroughPoints());
  }
  size_t best = 0;
  double best_rms = INFINITY;
  std::vector<std::string> scores;
  std::vector<std::vector<LeftOut>> misses;  // per candidate, with their noise
  for (size_t i = 0; i < candidates.size(); ++i) {
    misses.push_back(LeaveOneOut(candidates[i], c.sigma));
    const double rms = RmsMiss(misses.back());
    scores.push_back(absl::StrFormat("%s %.4f", candidates[i].model() == CurveModel::kPchip
                                                    ? "PCHIP"
                                                    : FormName(candidates[i].form()),
                                     rms));
    if (rms < best_rms) best_rms = rms, best = i;
  }
  c.curve = candidates[best];
  c.left_out = std::move(misses[best]);
  c.notes.push_back(absl::StrCat(
      "No form fits the reference points within their noise (", absl::StrJoin(rejected, "; "),
      "), so R(t) is ", c.curve.Describe(),
      candidates.size() > 1
          ? absl::StrCat(": the smallest root-mean-square leave-one-out miss (",
                         absl::StrJoin(scores, ", "), ")")
          : std::string(" (three budgets leave none out of a fit)"),
      "."));
  return c;
}

CurveBootstrap CurveBootstrap::Run(const TimeCurve& curve, std::optional<double> sigma,
                                   double time_cv, int time_df, int resamples, uint64_t seed) {
  CurveBootstrap out;
  if (!sigma || !(*sigma > 0)) return out;
  const std::vector<std::vector<double>> draws =
      MomentMatchedNormals(curve.points().size(), static_cast<size_t>(resamples), seed);
  for (int b = 0; b < resamples; ++b) {
    std::vector<CurvePoint> points = curve.points();
    for (size_t i = 0; i < points.size(); ++i) {
      points[i].loss += *sigma / std::sqrt(SeedCount(points[i])) * draws[i][b];
    }
    absl::StatusOr<TimeCurve> refit = curve.RefitNear(points);
    if (refit.ok()) out.curves_.push_back(*std::move(refit));
  }
  // The points' times: each moved by its standard error in turn.
  out.base_.push_back(curve);
  if (!(time_cv > 0) || time_df <= 0) return out;
  out.time_df_ = time_df;
  for (size_t i = 0; i < curve.points().size(); ++i) {
    std::vector<CurvePoint> points = curve.points();
    points[i].seconds *= 1 + time_cv / std::sqrt(SeedCount(points[i]));
    absl::StatusOr<TimeCurve> refit = curve.RefitNear(points);
    if (refit.ok()) out.time_curves_.push_back(*std::move(refit));
  }
  return out;
}

double CurveBootstrap::SeLoss(double seconds) const {
  if (curves_.size() < 2) return 0;
  std::vector<double> values;
  for (const TimeCurve& c : curves_) values.push_back(c.Interpolate(seconds).value);
  return std::sqrt(SampleVariance(values));
}

double CurveBootstrap::SeTime(double seconds) const {
  if (base_.empty()) return 0;
  const double at = base_[0].Interpolate(seconds).value;
  double sum = 0;
  for (const TimeCurve& c : time_curves_) {
    const double d = c.Interpolate(seconds).value - at;
    sum += d * d;
  }
  return std::sqrt(sum);
}

double CurveBootstrap::Se(double seconds) const {
  return std::hypot(SeLoss(seconds), SeTime(seconds));
}

}  // namespace smallem
