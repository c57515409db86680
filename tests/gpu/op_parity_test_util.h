// Test helpers for the CPU/CUDA parity tests of tests/gpu/*_parity_test.cc
//: the same random inputs on odd shapes go through CpuBackend
// (the reference) and CudaBackend, forward and backward, and the outputs must
// agree to the precision's tolerance. The backward cases start every
// gradient from random values, so they also check that gradients accumulate
// (+=) rather than overwrite. The bf16 mode's matmuls and tensor-core
// attention are judged with bf16 tolerances (tests named Bf16…, which
// scripts/gpu-check runs in a second process). Every test skips when no GPU
// is present.
//
// OpParityTest holds a tensor Pair per operand (one per backend) and the
// comparisons; ActivationParityTest adds operands stored as bf16;
// Bf16ActivationOpsTest the bounds of ops on bf16 activations.
#ifndef SMALLEM_TESTS_GPU_OP_PARITY_TEST_UTIL_H_
#define SMALLEM_TESTS_GPU_OP_PARITY_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "base/check.h"
#include "engine/backend.h"
#include "engine/bf16.h"
#include "engine/cpu/cpu_backend.h"
#include "gtest/gtest.h"
#include "kernels/cuda_backend.h"

namespace smallem::testing {

// f32 kernels against the f32 reference: rounding-level differences only.
inline constexpr double kF32Tolerance = 1e-5;
// Attention's backward sums products whose sum cancels (Σ_j dS_j = 0).
inline constexpr double kAttentionTolerance = 2e-5;
// Matmul inputs rounded to bf16 (8 significant bits), f32 accumulation: the
// error relative to the output's norm is ~2e-3 for random inputs, so 1e-2
// bounds ‖cuda − cpu‖/‖cpu‖. Single elements stray further (up to ~1e-2 of
// (|cpu| + rms) on 700k outputs in a host simulation of the rounding), so the
// elementwise bound is looser: it is there to catch layout bugs, whose
// errors are of the order of the values themselves.
inline constexpr double kBf16Tolerance = 1e-2;
inline constexpr double kBf16ElementTolerance = 5e-2;

enum Side { kCpu = 0, kGpu = 1 };

// The same tensor on both backends.
struct Pair {
  Tensor t[2];
  Tensor operator[](Side side) const { return t[side]; }
};

// cos (or sin when `sine`) of the rotary angles m·10000^(−2i/D), a table
// (positions, head_dim/2) as RopeParams takes it.
inline std::vector<float> RopeTable(int64_t positions, int64_t head_dim, bool sine) {
  const int64_t half = head_dim / 2;
  std::vector<float> table(positions * half);
  for (int64_t m = 0; m < positions; ++m) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = m * std::pow(10000.0, -2.0 * i / head_dim);
      table[m * half + i] = static_cast<float>(sine ? std::sin(angle) : std::cos(angle));
    }
  }
  return table;
}

// The rope case of both rope tests: B 2, T 7, three heads of 8 channels
// rotated and 5 passed through, positions offset by 3 in a table of 16.
inline constexpr int64_t kRopeBatch = 2, kRopeTime = 7, kRopeHeads = 3, kRopeHeadDim = 8;
inline constexpr int64_t kRopeExtra = 5, kRopeOffset = 3, kRopePositions = 16;
inline const Shape kRopeShape{kRopeBatch, kRopeTime, kRopeHeads * kRopeHeadDim + kRopeExtra};

class OpParityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Backend>> gpu = CreateCudaBackend(0);
    if (!gpu.ok()) GTEST_SKIP() << "no GPU, CUDA parity skipped: " << gpu.status();
    gpu_ = std::move(*gpu);
    cuda_ = dynamic_cast<CudaBackend*>(gpu_.get());
    ASSERT_NE(cuda_, nullptr);
  }

  void TearDown() override {
    for (auto& [backend, ptr] : allocations_) backend->Free(ptr);
  }

  Backend& backend(Side side) { return side == kCpu ? static_cast<Backend&>(cpu_) : *gpu_; }

  // Runs f(backend, side) on the CPU, then on the GPU.
  template <typename F>
  void Both(F&& f) {
    f(backend(kCpu), kCpu);
    f(backend(kGpu), kGpu);
  }

  // The rope case (kRope…) on both sides: x rotated into out, in_place
  // rotated in place, and the backward of g added into gx.
  void RopeBoth(const Pair& x, const Pair& out, const Pair& in_place, const Pair& g,
                const Pair& gx, bool overwrite = false) {
    const int64_t half = kRopeHeadDim / 2;
    const Pair cos_t = F32({kRopePositions, half}, RopeTable(kRopePositions, kRopeHeadDim, false));
    const Pair sin_t = F32({kRopePositions, half}, RopeTable(kRopePositions, kRopeHeadDim, true));
    Both([&](Backend& be, Side s) {
      const RopeParams p{.x = x[s], .out = out[s], .cos = cos_t[s], .sin = sin_t[s],
                         .time = kRopeTime, .head_dim = kRopeHeadDim,
                         .rotate_channels = kRopeHeads * kRopeHeadDim,
                         .position_offset = kRopeOffset};
      be.RopeForward(p);
      RopeParams q = p;
      q.x = in_place[s];
      q.out = in_place[s];
      be.RopeForward(q);
      be.RopeBackward({.grad_out = g[s], .grad_in = gx[s], .cos = cos_t[s], .sin = sin_t[s],
                       .time = kRopeTime, .head_dim = kRopeHeadDim,
                       .rotate_channels = kRopeHeads * kRopeHeadDim,
                       .position_offset = kRopeOffset, .overwrite = overwrite});
    });
  }

  Pair FromHost(Shape shape, DType dtype, const void* host) {
    Pair pair;
    for (Side side : {kCpu, kGpu}) {
      Tensor t{nullptr, shape, dtype};
      absl::StatusOr<void*> data = backend(side).Allocate(t.bytes());
      CHECK(data.ok()) << data.status();
      t.data = *data;
      allocations_.emplace_back(&backend(side), t.data);
      backend(side).CopyToDevice(t.data, host, t.bytes());
      pair.t[side] = t;
    }
    return pair;
  }

  Pair F32(Shape shape, const std::vector<float>& values) {
    CHECK_EQ(static_cast<int64_t>(values.size()), shape.numel());
    return FromHost(shape, DType::kF32, values.data());
  }

  Pair I32(Shape shape, const std::vector<int32_t>& values) {
    CHECK_EQ(static_cast<int64_t>(values.size()), shape.numel());
    return FromHost(shape, DType::kI32, values.data());
  }

  std::vector<float> Uniform(int64_t count, float lo, float hi) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> values(static_cast<size_t>(count));
    for (float& v : values) v = dist(rng_);
    return values;
  }

  Pair Random(Shape shape, float scale = 1.0f) {
    return F32(shape, Uniform(shape.numel(), -scale, scale));
  }

  Pair Positive(Shape shape, float lo, float hi) {
    return F32(shape, Uniform(shape.numel(), lo, hi));
  }

  Pair Zeros(Shape shape) {
    return F32(shape, std::vector<float>(static_cast<size_t>(shape.numel()), 0.0f));
  }

  std::vector<int32_t> RandomIds(int64_t count, int32_t vocab) {
    std::uniform_int_distribution<int32_t> dist(0, vocab - 1);
    std::vector<int32_t> ids(static_cast<size_t>(count));
    for (int32_t& id : ids) id = dist(rng_);
    return ids;
  }

  std::vector<float> Read(Side side, const Tensor& t) {
    CHECK(t.dtype == DType::kF32);
    std::vector<float> host(static_cast<size_t>(t.numel()));
    backend(side).CopyToHost(host.data(), t.data, t.bytes());
    return host;
  }

  // ‖cuda − cpu‖ ≤ tolerance·‖cpu‖ for an f32 pair.
  void ExpectNormClose(const Pair& pair, double tolerance, const std::string& what) {
    const std::vector<float> want = Read(kCpu, pair[kCpu]);
    const std::vector<float> got = Read(kGpu, pair[kGpu]);
    ASSERT_EQ(want.size(), got.size()) << what;
    double error_sq = 0, want_sq = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      const double d = static_cast<double>(got[i]) - want[i];
      error_sq += d * d;
      want_sq += static_cast<double>(want[i]) * want[i];
    }
    EXPECT_LE(std::sqrt(error_sq / std::max(want_sq, 1e-300)), tolerance)
        << what << ": ‖cuda − cpu‖/‖cpu‖";
  }

  // For bf16 results: ‖cuda − cpu‖ ≤ kBf16Tolerance·‖cpu‖, and every element
  // within kBf16ElementTolerance·(|cpu| + rms(cpu)).
  void ExpectCloseBf16(const Pair& pair, const std::string& what) {
    ExpectNormClose(pair, kBf16Tolerance, what);
    ExpectClose(pair, kBf16ElementTolerance, what);
  }

  // Every element within tolerance·(|want| + rms(want)) of the CPU's.
  void ExpectClose(const Pair& pair, double tolerance, const std::string& what) {
    const std::vector<float> want = Read(kCpu, pair[kCpu]);
    const std::vector<float> got = Read(kGpu, pair[kGpu]);
    ASSERT_EQ(want.size(), got.size()) << what;
    double squares = 0;
    for (float w : want) squares += static_cast<double>(w) * w;
    const double rms = want.empty() ? 0 : std::sqrt(squares / static_cast<double>(want.size()));
    int failures = 0;
    double worst = 0;
    size_t worst_index = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      const double error = std::fabs(static_cast<double>(got[i]) - want[i]);
      const double allowed = tolerance * (std::fabs(want[i]) + rms) + 1e-30;
      if (!(error <= allowed)) {  // NaN fails too
        ++failures;
        if (!(error / allowed <= worst)) {
          worst = error / allowed;
          worst_index = i;
        }
      }
    }
    EXPECT_EQ(failures, 0) << what << ": " << failures << " of " << want.size()
                           << " elements differ; worst at " << worst_index << ": cpu "
                           << want[worst_index] << ", cuda " << got[worst_index]
                           << " (rms " << rms << ", tolerance " << tolerance << ")";
  }

  // The GPU side's bytes, for bitwise comparisons.
  std::vector<uint8_t> Bytes(const Tensor& t) {
    std::vector<uint8_t> host(t.bytes());
    gpu_->CopyToHost(host.data(), t.data, t.bytes());
    return host;
  }

  std::mt19937 rng_{20240611};
#if SMALLEM_RACECHECK
  // ThreadSanitizer cannot see OpenMP's synchronization (libgomp is not
  // instrumented), so under racecheck the CPU reference runs on one thread.
  CpuBackend cpu_{1};
#else
  CpuBackend cpu_{4};
#endif
  std::unique_ptr<Backend> gpu_;
  CudaBackend* cuda_ = nullptr;
  std::vector<std::pair<Backend*, void*>> allocations_;
};

// Both sides round (nearly) the same f32 result to bf16 when an output is
// stored as bf16: they agree, or differ by one bf16 ulp, which is 2^-8 to
// 2^-7 of the value (8 significant bits). Tolerances for bf16 outputs add
// this to the precision's own.
inline constexpr double kBf16StorageUlp = 1.0 / 128;

// Parity cases whose activations (engine/backend.h, "Activations") may be
// stored as bf16: the CPU reference and the GPU get the same bf16 values,
// and bf16 results are compared through their f32 widening.
class ActivationParityTest : public OpParityTest {
 protected:
  // `values` stored as `dtype` (f32, or bf16 rounded to nearest even) on
  // both sides.
  Pair Stored(Shape shape, const std::vector<float>& values, DType dtype) {
    if (dtype == DType::kF32) return F32(shape, values);
    CHECK(dtype == DType::kBF16);
    CHECK_EQ(static_cast<int64_t>(values.size()), shape.numel());
    std::vector<uint16_t> bits(values.size());
    for (size_t i = 0; i < values.size(); ++i) bits[i] = FloatToBf16(values[i]);
    return FromHost(shape, DType::kBF16, bits.data());
  }

  Pair RandomStored(Shape shape, DType dtype, float scale = 1.0f) {
    return Stored(shape, Uniform(shape.numel(), -scale, scale), dtype);
  }

  // One side's values as f32, whatever the tensor's type.
  std::vector<float> ReadStored(Side side, const Tensor& t) {
    if (t.dtype == DType::kF32) return Read(side, t);
    CHECK(t.dtype == DType::kBF16);
    std::vector<uint16_t> bits(static_cast<size_t>(t.numel()));
    backend(side).CopyToHost(bits.data(), t.data, t.bytes());
    std::vector<float> values(bits.size());
    for (size_t i = 0; i < bits.size(); ++i) values[i] = Bf16ToFloat(bits[i]);
    return values;
  }

  // An f32 copy of both sides of `pair`, for the comparisons (the pair
  // itself when it is f32).
  Pair Widened(const Pair& pair) {
    if (pair[kCpu].dtype == DType::kF32) return pair;
    Pair wide = F32(pair[kCpu].shape, ReadStored(kCpu, pair[kCpu]));
    const std::vector<float> gpu = ReadStored(kGpu, pair[kGpu]);
    gpu_->CopyToDevice(wide[kGpu].data, gpu.data(), wide[kGpu].bytes());
    return wide;
  }

  // A result of the current matmul precision, as ExpectClose with
  // `f32_tolerance` in kF32 and as ExpectCloseBf16 in kBf16, each one bf16
  // ulp looser when the result is stored as bf16.
  void ExpectCloseInPrecision(const Pair& pair, double f32_tolerance, const std::string& what) {
    const double ulp = pair[kCpu].dtype == DType::kBF16 ? kBf16StorageUlp : 0.0;
    const Pair wide = Widened(pair);
    if (cuda_->matmul_precision() == MatmulPrecision::kBf16) {
      ExpectNormClose(wide, kBf16Tolerance + ulp, what + " (bf16 precision)");
      ExpectClose(wide, kBf16ElementTolerance + ulp, what + " (bf16 precision)");
    } else {
      ExpectClose(wide, f32_tolerance + ulp, what);
    }
  }
};

// [act] operands stored as bf16 (engine/backend.h, "Activations"): the CUDA
// kernels against the CPU reference given the same bf16 tensors, for the
// elementwise ops, bias, norms and rope. Both sides read the same values,
// compute the same f32 math (in a slightly different order) and round once
// on store, so an element agrees exactly unless the two f32 results straddle
// a rounding boundary; then they differ by one bf16 ulp, at most 2^-7 of the
// value (8 significant bits). Row statistics (norms) and f32 outputs differ
// at f32 level only. Hence kBf16StorageTolerance, norm-wise
// (‖cuda − cpu‖ ≤ 1e-2·‖cpu‖) and per element (within
// 1e-2·(|cpu| + rms(cpu)), the rms term for values that cancel). A wrong
// index or dtype misses by the order of the values themselves.
inline constexpr double kBf16StorageTolerance = 1e-2;

class Bf16ActivationOpsTest : public ActivationParityTest {
 protected:
  static constexpr DType kBf16 = DType::kBF16;

  // A copy of `pair` (the CPU side's values) for an in-place case.
  Pair CopyStored(const Pair& pair) {
    const Tensor& t = pair[kCpu];
    return Stored(t.shape, ReadStored(kCpu, t), t.dtype);
  }

  // Both bounds of kBf16StorageTolerance (above) for an f32 or bf16 result.
  void ExpectCloseAct(const Pair& pair, const std::string& what) {
    const std::string name = what + " (" + DTypeName(pair[kGpu].dtype) + ")";
    const Pair wide = Widened(pair);
    ExpectNormClose(wide, kBf16StorageTolerance, name);
    ExpectClose(wide, kBf16StorageTolerance, name);
  }
};

// The dtypes of one case: the inputs (forward inputs and grad_out) and the
// outputs (forward outputs and accumulated gradients).
struct StorageMix {
  DType in, out;
  std::string Name() const {
    return std::string("in ") + DTypeName(in) + ", out " + DTypeName(out);
  }
};
// All bf16, then bf16 read into f32, then f32 rounded into bf16.
inline constexpr StorageMix kElementwiseMixes[] = {
    {DType::kBF16, DType::kBF16}, {DType::kBF16, DType::kF32}, {DType::kF32, DType::kBF16}};

}  // namespace smallem::testing

#endif  // SMALLEM_TESTS_GPU_OP_PARITY_TEST_UTIL_H_
