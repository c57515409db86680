// The training loss with its head (HeadLoss, engine/autograd/ops.h), forward
// and backward, in the chunks the backend picks (one chunk of every row
// where the head is too large) against the plain composition (the whole
// (N, V) logits, the loss and its gradient in two passes), in one run. Each round
// first evicts the caches, so x and the head come from memory as in a step.
// Prints one JSON line (with --sweep 1, one more before it per chunk size
// from 64 rows up); best of --rounds rounds, the variants alternating.
//
//   smallem_head_loss_bench [--threads 1 --tokens 2048 --embed 128 --vocab 1024 --rounds 30
//                            --sweep 0]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "bench/cpu_bench.h"
#include "bench/flags.h"
#include "engine/arena.h"
#include "engine/autograd/ops.h"
#include "engine/autograd/tape.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/random.h"

int main(int argc, char** argv) {
  using namespace smallem;
  using bench::Flag;
  const int threads = static_cast<int>(Flag(argc, argv, "--threads", 1));
  const int64_t n = Flag(argc, argv, "--tokens", 2048), c = Flag(argc, argv, "--embed", 128);
  const int64_t v = Flag(argc, argv, "--vocab", 1024);
  const int rounds = static_cast<int>(Flag(argc, argv, "--rounds", 30));
  CpuBackend be(bench::CpuOptions(threads));
  Rng rng(1);
  const Tensor x = bench::RandomTensor(be, {n, c}, rng, 1.0f);
  const Tensor table = bench::RandomTensor(be, {v, c}, rng, 0.1f);
  const Tensor grad_x = bench::RandomTensor(be, {n, c}, rng, 0.0f);
  const Tensor grad_table = bench::RandomTensor(be, {v, c}, rng, 0.0f);
  Tensor targets{.data = *be.Allocate(static_cast<size_t>(n) * 4), .shape = {n},
                 .dtype = DType::kI32};
  for (int64_t i = 0; i < n; ++i) targets.i32()[i] = static_cast<int32_t>(rng.Uniform() * v) % v;
  Arena arena(be);
  const int64_t chunk = be.HeadLossChunkRows(n, v, c);
  auto seconds = [&](int64_t chunk_rows) {
    arena.Reset();
    bench::EvictCaches();
    const auto start = std::chrono::steady_clock::now();
    Tape tape(be, arena);
    const Var loss = HeadLoss(tape, tape.Param(x, grad_x), tape.Param(table, grad_table),
                              tape.Input(targets), Tensor{}, chunk_rows);
    tape.Backward(loss);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  // Best of `rounds` for each chunk size, the sizes alternating round by
  // round so that they share the machine's load; round 0 sizes the arena.
  auto best_seconds = [&](const std::vector<int64_t>& sizes) {
    std::vector<double> best(sizes.size(), 1e30);
    for (int r = 0; r <= rounds; ++r) {
      for (size_t i = 0; i < sizes.size(); ++i) {
        const double s = seconds(sizes[i]);
        if (r > 0) best[i] = std::min(best[i], s);
      }
    }
    return best;
  };
  if (Flag(argc, argv, "--sweep", 0) != 0) {  // other chunk sizes, one line each
    std::vector<int64_t> sizes;
    for (int64_t rows = 64; rows < n; rows *= 2) sizes.push_back(rows);
    const std::vector<double> best = best_seconds(sizes);
    for (size_t i = 0; i < sizes.size(); ++i) {
      std::printf("{\"chunk_rows\":%lld,\"ms\":%.3f}\n", static_cast<long long>(sizes[i]),
                  1e3 * best[i]);
    }
  }
  const std::vector<double> best = best_seconds({kPlainHeadLoss, chunk});
  const double plain = best[0], chunked = best[1];
  std::printf(
      "{\"gemm\":\"%s\",\"threads\":%d,\"tokens\":%lld,\"embed\":%lld,\"vocab\":%lld,"
      "\"chunk_rows\":%lld,\"plain_ms\":%.3f,\"chunked_ms\":%.3f,\"plain_over_chunked\":%.3f}\n",
      be.GemmLibrary().c_str(), be.threads(), static_cast<long long>(n),
      static_cast<long long>(c), static_cast<long long>(v), static_cast<long long>(chunk),
      1e3 * plain, 1e3 * chunked, plain / chunked);
  return 0;
}
