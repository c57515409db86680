// The products' libraries against each other, in one run: every product
// shape of one training step of a config (forward X·Wᵀ, backward dY·W and
// dYᵀ·X for the qkv, projection, feed-forward and head layers) and
// attention's block shapes, each timed on oneDNN and on OpenBLAS (those the
// build has) through cpu::GemmOn, single-threaded as the ops call it. Prints
// one JSON line per shape (GFLOP/s on each, the library the default rule
// picks), a summary line (the step's products in total on each library and
// on the default rule), and, per library, the heights at which row 0 of a
// product rounds differently from the same row of a taller one
// (docs/benchmarks.md § The products' library). Operands are random; with --cold 1 (the default) every round
// first sweeps a 64 MiB buffer through the caches, so that the operands come
// from memory as a step's activations do (--cold 0: all in cache);
// attention's blocks are timed in cache, as the op runs them. Best of
// --rounds.
//
//   smallem_gemm_bench [--tokens 2048 --embed 128 --vocab 256 --head-dim 32
//                       --context 128 --rounds 30 --cold 1]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/cpu_bench.h"
#include "bench/flags.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/gemm.h"
#include "engine/random.h"

namespace smallem {
namespace {

struct Product {
  const char* what;
  bool trans_a, trans_b;
  int64_t m, n, k;
};

double BestSeconds(int rounds, bool cold, cpu::GemmLibrary library, const Product& s,
                   const std::vector<float>& a, const std::vector<float>& b,
                   std::vector<float>& c) {
  const int64_t lda = s.trans_a ? s.m : s.k, ldb = s.trans_b ? s.k : s.n;
  double best = 1e30;
  for (int r = 0; r <= rounds; ++r) {  // round 0 warms up (oneDNN's JIT)
    if (cold) bench::EvictCaches();
    const auto start = std::chrono::steady_clock::now();
    cpu::GemmOn(library, s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0f, a.data(), lda, b.data(),
                ldb, 0.0f, c.data(), s.n);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r > 0) best = std::min(best, seconds);
  }
  return best;
}

// The heights h < m at which row 0 of op(a)·op(b) over a's first h rows
// rounds differently from the same row of the m-row product: the library
// rounding a row by the product's height.
std::vector<int64_t> HeightsThatChangeRowZero(cpu::GemmLibrary library, int64_t m, int64_t n,
                                              int64_t k, const std::vector<float>& a,
                                              const std::vector<float>& b) {
  std::vector<float> full(static_cast<size_t>(m * n)), part(full.size());
  cpu::GemmOn(library, false, true, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f,
              full.data(), n);
  std::vector<int64_t> differ;
  for (int64_t h : {1, 2, 4, 8, 15, 16, 32, 64}) {
    cpu::GemmOn(library, false, true, h, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f,
                part.data(), n);
    if (!std::equal(part.begin(), part.begin() + n, full.begin())) differ.push_back(h);
  }
  return differ;
}

}  // namespace
}  // namespace smallem

int main(int argc, char** argv) {
  using namespace smallem;
  using bench::Flag;
  const int64_t N = Flag(argc, argv, "--tokens", 2048), C = Flag(argc, argv, "--embed", 128);
  const int64_t V = Flag(argc, argv, "--vocab", 256), D = Flag(argc, argv, "--head-dim", 32);
  const int64_t T = Flag(argc, argv, "--context", 128);
  const int rounds = static_cast<int>(Flag(argc, argv, "--rounds", 30));
  const bool cold = Flag(argc, argv, "--cold", 1) != 0;
  // SMALLEM_GEMM names one library to measure; the backend chooses
  // OpenBLAS's kernels.
  const CpuBackend::Options options = bench::CpuOptions(1);
  CpuBackend be(options);

  const std::vector<cpu::GemmLibrary> libraries = cpu::GemmLibrariesInUse(options.gemm);

  std::vector<Product> shapes;
  struct Layer { const char* what; int64_t out, in; };
  for (const Layer& l : {Layer{"qkv", 3 * C, C}, Layer{"proj", C, C}, Layer{"fc", 4 * C, C},
                         Layer{"fc2", C, 4 * C}, Layer{"head", V, C}}) {
    shapes.push_back({l.what, false, true, N, l.out, l.in});   // Y = X·Wᵀ
    shapes.push_back({l.what, false, false, N, l.in, l.out});  // dX = dY·W
    shapes.push_back({l.what, true, false, l.out, l.in, N});   // dW = dYᵀ·X
  }
  // Attention's largest blocks (engine/cpu/attention.cc): scores, P·V, and
  // the backward's query-major tiles.
  shapes.push_back({"attention", false, false, 32, T, D});
  shapes.push_back({"attention", false, false, 32, D, T});
  shapes.push_back({"attention", true, false, 32, D, T});
  shapes.push_back({"attention", false, false, T, 32, D});

  Rng rng(1);
  std::vector<double> step_seconds(libraries.size(), 0.0);
  double rule_seconds = 0;
  for (const Product& s : shapes) {
    std::vector<float> a(static_cast<size_t>(s.m * s.k)), b(static_cast<size_t>(s.k * s.n)),
        c(static_cast<size_t>(s.m * s.n));
    for (float& x : a) x = static_cast<float>(rng.Normal());
    for (float& x : b) x = static_cast<float>(rng.Normal());
    const double flops = 2.0 * s.m * s.n * s.k;
    std::printf("{\"shape\":\"%s %c%c %lldx%lldx%lld\"", s.what, s.trans_a ? 'T' : 'N',
                s.trans_b ? 'T' : 'N', static_cast<long long>(s.m), static_cast<long long>(s.n),
                static_cast<long long>(s.k));
    const cpu::GemmLibrary rule = cpu::GemmLibraryFor(cpu::GemmChoice(), s.trans_a, s.m, s.n, s.k);
    const bool in_step = std::string(s.what) != "attention";
    for (size_t i = 0; i < libraries.size(); ++i) {
      // Attention's blocks are in cache in the op (the pair's rows), always.
      const double seconds = BestSeconds(rounds, cold && in_step, libraries[i], s, a, b, c);
      if (in_step) step_seconds[i] += seconds;
      if (in_step && libraries[i] == rule) rule_seconds += seconds;
      std::printf(",\"%s_gflops\":%.1f", cpu::GemmLibraryName(libraries[i]), flops / seconds / 1e9);
    }
    std::printf(",\"default\":\"%s\"}\n", cpu::GemmLibraryName(rule));
  }
  std::printf("{\"summary\":\"the step's %zu linear-layer products\"", shapes.size() - 4);
  for (size_t i = 0; i < libraries.size(); ++i) {
    std::printf(",\"%s_ms\":%.3f", cpu::GemmLibraryName(libraries[i]), 1e3 * step_seconds[i]);
  }
  std::printf(",\"default_ms\":%.3f}\n", 1e3 * rule_seconds);

  // Whether a row's result depends on the product's height (X·Wᵀ at the
  // qkv layer's width), on each library forced for every height.
  std::vector<float> a(static_cast<size_t>(256 * C)), w(static_cast<size_t>(3 * C * C));
  for (float& x : a) x = static_cast<float>(rng.Normal());
  for (float& x : w) x = static_cast<float>(rng.Normal());
  for (cpu::GemmLibrary library : libraries) {
    std::printf("{\"row_zero_differs_at_heights\":\"%s NT 256x%lldx%lld\",\"heights\":[",
                cpu::GemmLibraryName(library), static_cast<long long>(3 * C),
                static_cast<long long>(C));
    const std::vector<int64_t> differ = HeightsThatChangeRowZero(library, 256, 3 * C, C, a, w);
    for (size_t i = 0; i < differ.size(); ++i) {
      std::printf("%s%lld", i == 0 ? "" : ",", static_cast<long long>(differ[i]));
    }
    std::printf("]}\n");
  }
  return 0;
}
