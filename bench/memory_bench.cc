// What one core moves to and from memory (a cold copy: bytes read plus
// bytes written per second), and what the step's elementwise math
// costs per element, hot (in L1/L2) and cold (a step's 4 MiB activation
// read from memory): the two floors of the ops that are not products
// (docs/benchmarks.md § What the rest of the step costs); and the fused
// bias + GELU op around that math, from memory. Prints two JSON lines;
// best of --rounds rounds, so a neighbour's load shows in the spread.
//
//   smallem_memory_bench [--mib 4 --rounds 20]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

#include "bench/cpu_bench.h"
#include "bench/flags.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/vector_math.h"

int main(int argc, char** argv) {
  using smallem::bench::BestSeconds;
  using smallem::bench::Flag;
  const int64_t n = Flag(argc, argv, "--mib", 4) << 18;  // floats
  const int rounds = static_cast<int>(Flag(argc, argv, "--rounds", 20));
  constexpr int64_t kHot = 1 << 14;  // 64 KiB: stays in L2
  std::vector<float> x(n), y(n), g(n, 0.5f);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 1000) * 0.008f - 4.0f;
  volatile float sink = 0;
  const double bytes = static_cast<double>(n) * sizeof(float);
  const double copy_s = BestSeconds(rounds, true, [&] {
    std::memcpy(y.data(), x.data(), static_cast<size_t>(bytes));
  });
  namespace cpu = smallem::cpu;
  auto per_element = [&](int64_t count, bool cold, const std::function<void(int64_t)>& fn) {
    return 1e9 * BestSeconds(rounds, cold, [&] { fn(count); }) / static_cast<double>(count);
  };
  auto forward = [&](int64_t m) { cpu::GeluForward(x.data(), y.data(), m); };
  auto backward = [&](int64_t m) { cpu::GeluBackward(x.data(), g.data(), y.data(), m); };
  auto exp = [&](int64_t m) { sink = cpu::ExpShiftedSum(x.data(), 1.0f, y.data(), m); };
  // The fused op around the same math (engine/cpu/bias_gelu.cc): rows of
  // 512, the bias added, the backward writing x's gradient and summing the
  // bias's.
  smallem::CpuBackend be(smallem::bench::CpuOptions(1));
  const int64_t cols = 512, rows = n / cols;
  auto tensor = [&](std::vector<float>& v, int64_t r) {
    return smallem::Tensor{.data = v.data(), .shape = {r, cols}};
  };
  std::vector<float> bias(cols, 0.1f), grad_bias(cols);
  auto op_forward = [&](int64_t m) {
    be.BiasGeluForward({.x = tensor(x, m / cols), .bias = tensor(bias, 1).Reshaped({cols}),
                        .out = tensor(y, m / cols)});
  };
  auto op_backward = [&](int64_t m) {
    be.BiasGeluBackward({.x = tensor(x, m / cols), .bias = tensor(bias, 1).Reshaped({cols}),
                         .grad_out = tensor(g, m / cols), .grad_x = tensor(y, m / cols),
                         .grad_bias = tensor(grad_bias, 1).Reshaped({cols}), .overwrite = true});
  };
  std::printf(
      "{\"bias_gelu_forward_cold_ns\":%.3f,\"bias_gelu_backward_cold_ns\":%.3f}\n",
      per_element(rows * cols, true, op_forward), per_element(rows * cols, true, op_backward));
  std::printf(
      "{\"vector_math\":\"%s\",\"mib\":%lld,\"cold_copy_gbs\":%.1f,"
      "\"exp_hot_ns\":%.3f,\"gelu_forward_hot_ns\":%.3f,\"gelu_forward_cold_ns\":%.3f,"
      "\"gelu_backward_hot_ns\":%.3f,\"gelu_backward_cold_ns\":%.3f}\n",
      cpu::VectorMathName(), static_cast<long long>(n >> 18), 2 * bytes / copy_s / 1e9,
      per_element(kHot, false, exp), per_element(kHot, false, forward),
      per_element(n, true, forward), per_element(kHot, false, backward),
      per_element(n, true, backward));
  return 0;
}
