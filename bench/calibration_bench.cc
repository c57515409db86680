// Calibration of the comparisons by simulation (docs/equal-time.md
// § Calibration): the false-verdict rate on null experiments (true Δ = 0)
// at equal steps and at equal time (at and between reference points, for
// three true curve shapes, 2–10 seeds, 2–6 budgets), and the power at
// true Δ = 2·floor and 4·floor for 2, 3 and 5 seeds; then sequential seeds
// (looks [3, 5, 10], O'Brien–Fleming and Pocock, without and with futility
// stopping; the documented design, looks [3, 5, 7, 9, 11] with kFutility)
// against the fixed 10-seed design on the same experiments. Prints markdown
// tables; --filter sequential prints the last alone.
//
//   build/bench/smallem_calibration_bench [--experiments N] [--seed S]
//       [--filter TEXT] [--seeds S] [--budgets B]
//
// N experiments per row (default 10000, the count). An equal-time
// experiment refits its curve ~220 times (200 bootstrap resamples, the
// leave-one-out checks), each refit of a resample started from the curve's
// own fit (curve_fit.h, RefitFormNear): ~1–20 ms per experiment, the most
// with five budgets of the plateau curve (docs/equal-time.md § Calibration
// has the run times). --filter runs only the rows whose label contains TEXT;
// --seeds S and --budgets B only those rows (equal-steps rows have budgets 4
// in the config). Every row seeds its own generator, so a subset gives the
// same numbers as the whole table.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/analysis/calibration.h"

namespace smallem {
namespace {

// Rows whose label contains this are run (all when empty).
std::string g_filter;
int g_seeds = 0, g_budgets = 0;  // only these (0: all)

void Row(const char* label, const SimulationConfig& c) {
  if (!g_filter.empty() && std::string(label).find(g_filter) == std::string::npos) return;
  if ((g_seeds != 0 && c.seeds != g_seeds) || (g_budgets != 0 && c.budgets != g_budgets)) return;
  const SimulationResult r = Simulate(c);
  const double p = r.VerdictRate();
  const double se = std::sqrt(p * (1 - p) / std::max(1, r.experiments));
  std::printf("| %s | %d | %d | %d | %.4f | %.2f %% ± %.2f |\n", label, c.seeds,
              c.equal_time ? c.budgets : 0, r.experiments, c.true_delta, 100 * p, 100 * se);
  std::fflush(stdout);
}

// Sequential seeds (docs/equal-time.md § Sequential seeds) at equal steps:
// the false verdicts over all looks, false equivalence at |Δ| = floor, and
// on a mixture of effects the power and the runs spent, side by side with
// the fixed 10-seed design on the same experiments (`fixed`, when given:
// runs saved, and the power's difference).
SequentialResult SequentialRow(const std::string& label, const SequentialConfig& c,
                               const SequentialResult* fixed = nullptr) {
  const std::string filtered = std::string("sequential, ") + label;
  if (!g_filter.empty() && filtered.find(g_filter) == std::string::npos) return {};
  const SequentialResult r = SimulateSequential(c);
  auto rate = [&](int count, int of) {
    const double p = of == 0 ? 0 : static_cast<double>(count) / of;
    return std::make_pair(100 * p, 100 * std::sqrt(p * (1 - p) / std::max(1, of)));
  };
  std::string looks;
  for (int n : c.looks) looks += (looks.empty() ? "" : ", ") + std::to_string(n);
  std::string design = absl::StrFormat("[%s] %s", looks, BoundaryShapeName(c.shape));
  if (c.futility.below > 0) {
    absl::StrAppendFormat(&design, ", futility below %g from look %d", c.futility.below,
                          c.futility.from_look);
  }
  const auto [false_rate, false_se] = rate(r.better + r.worse, r.experiments);
  const auto [eq_rate, eq_se] = rate(r.equivalent, r.experiments);
  std::string power = "—", against = "—";
  if (r.non_null > 0) {
    const auto [p, p_se] = rate(r.found, r.non_null);
    power = absl::StrFormat("%.1f %% ± %.1f", p, p_se);
    if (fixed != nullptr && fixed->experiments == r.experiments) {
      against = absl::StrFormat("%+.1f %% runs, %+.1f points",
                                100 * (static_cast<double>(r.runs) / fixed->runs - 1),
                                100 * (r.Power() - fixed->Power()));
    }
  }
  std::printf("| %s | %s | %d | %.2f %% ± %.2f | %.2f %% ± %.2f | %s | %.2f ± %.2f | %s |\n",
              label.c_str(), design.c_str(), r.experiments, false_rate, false_se, eq_rate, eq_se,
              power.c_str(), r.RunsPerExperiment(), r.RunsSe(), against.c_str());
  std::fflush(stdout);
  return r;
}

void SequentialRows(int experiments, uint64_t seed, double sigma, double floor) {
  std::printf("\n| sequential, equal steps | looks | experiments | better or worse | "
              "equivalent | power (non-null) | runs per experiment | against the fixed design |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|\n");
  const SequentialConfig base{.experiments = experiments, .sigma = sigma, .floor = floor,
                              .seed = seed};
  SequentialConfig fixed_config = base;
  fixed_config.looks = {10};
  fixed_config.mixture = true;
  // Run first so that the mixture rows can say how they compare.
  const SequentialResult fixed = SequentialRow("mixture, fixed design", fixed_config);
  for (BoundaryShape shape : {BoundaryShape::kOBrienFleming, BoundaryShape::kPocock}) {
    SequentialConfig design = base;
    design.shape = shape;
    SequentialRow("null (Δ = 0)", design);
    if (shape == BoundaryShape::kOBrienFleming) {
      SequentialConfig naive = design;
      naive.corrected = false;
      SequentialRow("null (Δ = 0), every look at 5 %, uncorrected", naive);
    }
    SequentialConfig at_floor = design;
    at_floor.true_delta = floor;
    SequentialRow("Δ = floor", at_floor);
    SequentialConfig mixture = design;
    mixture.mixture = true;
    SequentialRow("mixture: half null, half 0.5–4 σ", mixture, &fixed);
    // Futility from the first look (the earlier rule) and from the second.
    for (const FutilityRule rule : {FutilityRule{.below = 0.05, .from_look = 1},
                                    FutilityRule{.below = 0.1, .from_look = 1},
                                    FutilityRule{.below = 0.1, .from_look = 2}}) {
      if (shape == BoundaryShape::kPocock && rule.below != 0.1) continue;
      SequentialConfig futile = mixture;
      futile.futility = rule;
      SequentialRow("mixture", futile, &fixed);
    }
  }
  // The documented design (server/analysis/sequential.h, kFutility): five
  // looks up to 11 seeds, futility from the second.
  SequentialConfig chosen = base;
  chosen.looks = {3, 5, 7, 9, 11};
  for (const FutilityRule rule : {FutilityRule{}, kFutility}) {
    chosen.futility = rule;
    chosen.mixture = false;
    chosen.true_delta = 0;
    SequentialRow("null (Δ = 0)", chosen);
    chosen.true_delta = floor;
    SequentialRow("Δ = floor", chosen);
    chosen.true_delta = -floor;
    SequentialRow("Δ = −floor", chosen);
    chosen.mixture = true;
    SequentialRow("mixture: half null, half 0.5–4 σ", chosen, &fixed);
  }
  // Four looks capped at the fixed design's 10 seeds, the same rule.
  SequentialConfig capped = base;
  capped.looks = {3, 5, 7, 10};
  capped.mixture = true;
  capped.futility = kFutility;
  SequentialRow("mixture: half null, half 0.5–4 σ", capped, &fixed);
  SequentialConfig small = base;
  small.mixture = true;
  small.sigma = floor / 2;
  small.looks = {10};
  const SequentialResult small_fixed = SequentialRow("mixture, σ = floor/2, fixed design", small);
  small.looks = {3, 5, 10};
  SequentialRow("mixture, σ = floor/2", small, &small_fixed);
  small.looks = {3, 5, 7, 9, 11};
  small.futility = kFutility;
  SequentialRow("mixture, σ = floor/2", small, &small_fixed);
}

int Main(int argc, char** argv) {
  int experiments = 10000;
  uint64_t seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--experiments") == 0) experiments = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--seed") == 0) seed = std::strtoull(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--filter") == 0) g_filter = argv[i + 1];
    if (std::strcmp(argv[i], "--seeds") == 0) g_seeds = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--budgets") == 0) g_budgets = std::atoi(argv[i + 1]);
  }
  const double floor = 0.002, sigma = 0.003;
  std::printf("σ = %.4f nats/byte per seed, floor = %.4f, training-time cv 2 %%, seed %llu\n\n",
              sigma, floor, static_cast<unsigned long long>(seed));
  std::printf("| comparison | seeds | budgets | experiments | true Δ | verdict rate ± SE |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  SimulationConfig base{.experiments = experiments, .sigma = sigma, .floor = floor, .seed = seed};
  for (int seeds : {2, 3, 5, 10}) {
    SimulationConfig c = base;
    c.seeds = seeds;
    Row("null, equal steps", c);
  }
  for (TrueCurve curve : {TrueCurve::kPowerLaw, TrueCurve::kPlateau, TrueCurve::kLogLinear}) {
    for (VariantTime where : {VariantTime::kAtPoint, VariantTime::kBetween}) {
      for (int budgets : {3, 5}) {
        for (int seeds : {2, 3, 5}) {
          SimulationConfig c = base;
          c.equal_time = true;
          c.curve = curve;
          c.where = where;
          c.budgets = budgets;
          c.seeds = seeds;
          const std::string label =
              std::string("null, equal time, ") + TrueCurveName(curve) +
              (where == VariantTime::kAtPoint ? ", at a point" : ", between points");
          Row(label.c_str(), c);
        }
      }
    }
  }
  for (double multiple : {2.0, 4.0}) {
    for (int seeds : {2, 3, 5}) {
      SimulationConfig c = base;
      c.seeds = seeds;
      c.true_delta = -multiple * floor;
      Row(multiple == 2 ? "power, equal steps, Δ = 2·floor" : "power, equal steps, Δ = 4·floor",
          c);
    }
    for (int seeds : {2, 3, 5}) {
      SimulationConfig c = base;
      c.equal_time = true;
      c.budgets = 4;
      c.seeds = seeds;
      c.true_delta = -multiple * floor;
      Row(multiple == 2 ? "power, equal time (power law, between), Δ = 2·floor"
                        : "power, equal time (power law, between), Δ = 4·floor",
          c);
    }
  }
  SequentialRows(experiments, seed, sigma, floor);
  return 0;
}

}  // namespace
}  // namespace smallem

int main(int argc, char** argv) { return smallem::Main(argc, argv); }
