// smallem_chaos_bench: the chaos test at full size (bench/chaos.h,
// docs/reliability.md). Prints its figures and exits 0 when every check
// passed, 1 otherwise.
//
// Usage: smallem_chaos_bench BUILD_DIR [kills=12] [seed=1] [workers=3]
//                            [variants=5] [seeds=4] [steps=4000]
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "bench/chaos.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s BUILD_DIR [kills=12] [seed=1] [workers=3] [variants=5] "
                         "[seeds=4] [steps=4000]\n", argv[0]);
    return 2;
  }
  smallem::ChaosOptions o;
  o.bin_dir = argv[1];
  auto arg = [&](int i, long long fallback) { return argc > i ? std::atoll(argv[i]) : fallback; };
  o.kills = static_cast<int>(arg(2, 12));
  o.seed = static_cast<uint64_t>(arg(3, 1));
  o.workers = static_cast<int>(arg(4, 3));
  o.variants = static_cast<int>(arg(5, 5));
  o.seeds = static_cast<int>(arg(6, 4));
  o.steps = arg(7, 4000);
  o.verbose = true;
  char pattern[] = "/tmp/smallem_chaos_XXXXXX";
  if (mkdtemp(pattern) == nullptr) return 1;
  o.work_dir = pattern;
  absl::StatusOr<smallem::ChaosReport> r = smallem::RunChaos(o);
  if (!r.ok()) {
    std::fprintf(stderr, "chaos: %s (kept %s)\n", std::string(r.status().message()).c_str(),
                 pattern);
    return 1;
  }
  const bool ok = r->results == r->runs && r->succeeded == r->runs && r->integrity_ok &&
                  r->resumed_runs > 0 && r->compared_equal;
  std::printf("runs %d · results %d · succeeded %d · attempts %d\n", r->runs, r->results,
              r->succeeded, r->attempts);
  std::printf("kill -9: %d workers, %d coordinator\n", r->worker_kills, r->coordinator_kills);
  std::printf("resumed runs %d (%lld resumes) · run %lld resumed = clean run: %s\n",
              r->resumed_runs, static_cast<long long>(r->total_resumes),
              static_cast<long long>(r->compared_run), r->compared_equal ? "yes" : "NO");
  std::printf("PRAGMA integrity_check: %s · wall %.1f s\n", r->integrity_ok ? "ok" : "FAILED",
              r->wall_seconds);
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  std::error_code ec;
  if (ok) std::filesystem::remove_all(pattern, ec);
  return ok ? 0 : 1;
}
