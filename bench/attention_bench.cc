// Attention on the CPU against the engine's own sgemm speed, in one run:
// forward and backward of causal attention on the tiny config's shape
// (B 16, T 128, 4 heads of 32 channels), and the model's largest product
// ((B·T, C)·(C, 3C), the qkv projection) as the sgemm reference. Prints one
// JSON line with the ratio of attention's time to its causal FLOPs at that
// speed: forward Q·Kᵀ and P·V, backward dV, dP, dQ, dK, each over the T(T+1)/2
// causal entries (recomputing P in the backward is counted as overhead),
// and the same with the forward's softmax kept for the backward
// (AttentionParams::probs, "saved_*").
// Best of --rounds rounds, so a neighbour's load on a shared machine shows
// up in the spread, not the best. With --cold 1 every round first evicts the
// caches, so the operands come from memory as a step's activations do.
//
//   smallem_attention_bench [--threads 1 --batch 16 --context 128 --heads 4
//                            --embed 128 --rounds 20 --cold 0]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

#include "bench/cpu_bench.h"
#include "bench/flags.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/random.h"

int main(int argc, char** argv) {
  using namespace smallem;
  using bench::Flag;
  const int threads = static_cast<int>(Flag(argc, argv, "--threads", 1));
  const int64_t B = Flag(argc, argv, "--batch", 16), T = Flag(argc, argv, "--context", 128);
  const int64_t H = Flag(argc, argv, "--heads", 4), C = Flag(argc, argv, "--embed", 128);
  const int rounds = static_cast<int>(Flag(argc, argv, "--rounds", 20));
  const bool cold = Flag(argc, argv, "--cold", 0) != 0;
  const int64_t D = C / H;
  CpuBackend be(bench::CpuOptions(threads));
  Rng rng(1);
  const Tensor qkv = bench::RandomTensor(be, {B, T, 3 * C}, rng, 1.0f);
  const Tensor out = bench::RandomTensor(be, {B, T, C}, rng, 0.0f);
  const Tensor lse = bench::RandomTensor(be, {B, H, T}, rng, 0.0f);
  const Tensor grad_out = bench::RandomTensor(be, {B, T, C}, rng, 1.0f);
  const Tensor grad_qkv = bench::RandomTensor(be, {B, T, 3 * C}, rng, 0.0f);
  const Tensor x = bench::RandomTensor(be, {B * T, C}, rng, 1.0f);
  const Tensor w = bench::RandomTensor(be, {3 * C, C}, rng, 0.02f);
  const Tensor y = bench::RandomTensor(be, {B * T, 3 * C}, rng, 0.0f);

  const Tensor probs = bench::RandomTensor(be, {B, H, T, T}, rng, 0.0f);

  const AttentionParams forward{.qkv = qkv, .out = out, .lse = lse, .batch = B,
                                .time = T, .heads = H, .head_dim = D};
  const AttentionBackwardParams backward{.qkv = qkv, .out = out, .lse = lse,
                                         .grad_out = grad_out, .grad_qkv = grad_qkv,
                                         .batch = B, .time = T, .heads = H, .head_dim = D,
                                         .overwrite = true};  // as training's fresh gradient
  auto best = [&](const std::function<void()>& fn) { return bench::BestSeconds(rounds, cold, fn); };
  const double forward_s = best([&] { be.AttentionForward(forward); });
  const double backward_s = best([&] { be.AttentionBackward(backward); });
  // The same with the softmax kept by the forward for the backward (what
  // training does where CpuBackend::SavesAttentionProbs allows).
  AttentionParams forward_saving = forward;
  forward_saving.probs = probs;
  AttentionBackwardParams backward_saved = backward;
  backward_saved.probs = probs;
  // The forward's rounds leave their P in probs for the backward's.
  const double forward_saving_s = best([&] { be.AttentionForward(forward_saving); });
  const double backward_saved_s = best([&] { be.AttentionBackward(backward_saved); });
  const MatmulParams product{.a = x, .b = w, .out = y, .m = B * T, .n = 3 * C, .k = C,
                             .trans_b = true};
  const double product_s = best([&] { be.Matmul(product); });

  const double sgemm_flops_per_s = 2.0 * B * T * 3 * C * C / product_s;
  const double causal = static_cast<double>(T) * (T + 1) / 2;
  const double attention_flops = 6 * 2.0 * B * H * causal * D;  // 2 forward + 4 backward
  const double at_sgemm_s = attention_flops / sgemm_flops_per_s;
  std::printf("{\"gemm\":\"%s\",\"blas_core\":\"%s\",\"threads\":%d,\"sgemm_gflops\":%.1f,"
              "\"attention_forward_ms\":%.3f,\"attention_backward_ms\":%.3f,\"attention_at_sgemm_ms\":%.3f,"
              "\"attention_over_flops\":%.2f,\"saved_forward_ms\":%.3f,\"saved_backward_ms\":%.3f,"
              "\"saved_over_flops\":%.2f}\n",
              be.GemmLibrary().c_str(), CpuBackend::BlasCore().c_str(), be.threads(),
              sgemm_flops_per_s / 1e9, 1e3 * forward_s, 1e3 * backward_s,
              1e3 * at_sgemm_s, (forward_s + backward_s) / at_sgemm_s, 1e3 * forward_saving_s,
              1e3 * backward_saved_s, (forward_saving_s + backward_saved_s) / at_sgemm_s);
  return 0;
}
