// Calibration of the comparisons by simulation (docs/equal-time.md
// § Calibration): the false-verdict rate on null experiments (true Δ = 0)
// at equal steps and at equal time (at and between reference points, for
// three true curve shapes, 2–10 seeds, 2–6 budgets), and the power at
// true Δ = 2·floor and 4·floor for 2, 3 and 5 seeds. Prints markdown tables.
//
//   build/bench/smallem_calibration_bench [--experiments N] [--seed S]
//       [--filter TEXT] [--seeds S] [--budgets B]
//
// N experiments per row (default 10000, the count). An equal-time
// experiment refits its curve ~220 times (200 bootstrap resamples, the
// leave-one-out checks), each refit of a resample started from the curve's
// own fit (curve_forms.h, RefitFormNear): ~1–20 ms per experiment, the most
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
  return 0;
}

}  // namespace
}  // namespace smallem

int main(int argc, char** argv) { return smallem::Main(argc, argv); }
