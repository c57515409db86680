// CPU/CUDA parity, op by op (STYLE.md § 7): the same random inputs on odd
// shapes go through CpuBackend (the reference) and CudaBackend, forward and
// backward, and the outputs must agree to the precision's tolerance. The
// backward cases start every gradient from random values, so they also check
// that gradients accumulate (+=) rather than overwrite. The bf16 mode's
// matmuls and tensor-core attention are judged with bf16 tolerances (tests
// named Bf16…, which scripts/gpu-check runs in a second process). A last
// group checks that the reductions without atomics give bitwise the same
// results when run twice. Every test skips when no GPU is present.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "base/check.h"
#include "engine/backend.h"
#include "engine/bf16.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/optim/newton_schulz.h"
#include "gtest/gtest.h"
#include "kernels/cuda_backend.h"

namespace smallem {
namespace {

// f32 kernels against the f32 reference: rounding-level differences only.
constexpr double kF32Tolerance = 1e-5;
// Attention's backward sums products whose sum cancels (Σ_j dS_j = 0).
constexpr double kAttentionTolerance = 2e-5;
// Matmul inputs rounded to bf16 (8 significant bits), f32 accumulation: the
// error relative to the output's norm is ~2e-3 for random inputs, so 1e-2
// bounds ‖cuda − cpu‖/‖cpu‖. Single elements stray further (up to ~1e-2 of
// (|cpu| + rms) on 700k outputs in a host simulation of the rounding), so the
// elementwise bound is looser: it is there to catch layout bugs, whose
// errors are of the order of the values themselves.
constexpr double kBf16Tolerance = 1e-2;
constexpr double kBf16ElementTolerance = 5e-2;

enum Side { kCpu = 0, kGpu = 1 };

// The same tensor on both backends.
struct Pair {
  Tensor t[2];
  Tensor operator[](Side side) const { return t[side]; }
};

// cos (or sin when `sine`) of the rotary angles m·10000^(−2i/D), a table
// (positions, head_dim/2) as RopeParams takes it.
std::vector<float> RopeTable(int64_t positions, int64_t head_dim, bool sine) {
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
constexpr int64_t kRopeBatch = 2, kRopeTime = 7, kRopeHeads = 3, kRopeHeadDim = 8;
constexpr int64_t kRopeExtra = 5, kRopeOffset = 3, kRopePositions = 16;
const Shape kRopeShape{kRopeBatch, kRopeTime, kRopeHeads * kRopeHeadDim + kRopeExtra};

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
                const Pair& gx) {
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
                       .position_offset = kRopeOffset});
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
  CpuBackend cpu_{4};
  std::unique_ptr<Backend> gpu_;
  CudaBackend* cuda_ = nullptr;
  std::vector<std::pair<Backend*, void*>> allocations_;
};

// ------------------------------------------------------------- backend

TEST_F(OpParityTest, BackendDescribesItsDevice) {
  EXPECT_EQ(gpu_->Name(), "cuda:0");
  EXPECT_FALSE(gpu_->DeviceClass().empty());
  const std::string device_class = gpu_->DeviceClass();
  if (device_class.find("H100") != std::string::npos ||
      device_class.find("H200") != std::string::npos) {
    EXPECT_EQ(gpu_->PeakFlops(), 989e12);
  }
}

TEST_F(OpParityTest, AllocationIsZeroedAndOutOfMemoryIsAStatus) {
  Pair t = Zeros({5, 7, 11});
  for (float v : Read(kGpu, t[kGpu])) EXPECT_EQ(v, 0.0f);
  absl::StatusOr<void*> huge = gpu_->Allocate(size_t{1} << 52);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(huge.status().message().find(std::to_string(size_t{1} << 52)), std::string::npos)
      << huge.status();
  // The failure is not sticky: the backend still works.
  Pair x = Random({3, 4});
  ExpectClose(x, 0, "copy after a failed allocation");
}

TEST_F(OpParityTest, FillAndCopies) {
  Pair f = Random({5, 7, 11});
  Pair ids = I32({37}, RandomIds(37, 1000));
  Both([&](Backend& be, Side s) {
    be.Fill(f[s], 0.25f);
    be.Fill(ids[s], 7.0f);
  });
  ExpectClose(f, 0, "fill f32");
  std::vector<int32_t> host(37);
  gpu_->CopyToHost(host.data(), ids[kGpu].data, ids[kGpu].bytes());
  for (int32_t id : host) EXPECT_EQ(id, 7);

  // Overlapping device copies behave like memmove.
  Pair x = Random({64});
  Both([&](Backend& be, Side s) {
    be.CopyOnDevice(x[s].f32() + 3, x[s].f32(), 40 * sizeof(float));
    be.CopyOnDevice(x[s].f32(), x[s].f32() + 5, 50 * sizeof(float));
  });
  ExpectClose(x, 0, "overlapping CopyOnDevice");
}

// ------------------------------------------- activations stored as bf16

// Both sides round (nearly) the same f32 result to bf16 when an output is
// stored as bf16: they agree, or differ by one bf16 ulp, which is 2^-8 to
// 2^-7 of the value (8 significant bits). Tolerances for bf16 outputs add
// this to the precision's own.
constexpr double kBf16StorageUlp = 1.0 / 128;

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

// ------------------------------------------------------------- matmul

struct MatmulCase {
  int64_t m, n, k, batch;
  bool trans_a, trans_b;
  float alpha, beta;
  // Operand storage, and extra elements between batch items (a strided
  // batch when > 0).
  DType a_type = DType::kF32, b_type = DType::kF32, out_type = DType::kF32;
  int64_t gap = 0;
};

class MatmulParityTest : public ActivationParityTest {
 protected:
  // Runs one batched product on both backends and compares; out starts
  // random so beta ≠ 0 accumulates into something, and the gaps between
  // items must come back untouched.
  void Check(const MatmulCase& c) {
    const int64_t stride_a = c.m * c.k + c.gap, stride_b = c.k * c.n + c.gap;
    const int64_t stride_out = c.m * c.n + c.gap;
    Pair a = RandomStored({c.batch, stride_a}, c.a_type);
    Pair b = RandomStored({c.batch, stride_b}, c.b_type);
    Pair out = RandomStored({c.batch, stride_out}, c.out_type);
    Both([&](Backend& be, Side s) {
      be.Matmul(MatmulParams{.a = a[s], .b = b[s], .out = out[s], .m = c.m, .n = c.n,
                             .k = c.k, .trans_a = c.trans_a, .trans_b = c.trans_b,
                             .batch = c.batch, .stride_a = stride_a,
                             .stride_b = stride_b, .stride_out = stride_out,
                             .alpha = c.alpha, .beta = c.beta});
    });
    const std::string what = "matmul m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) +
                             " k=" + std::to_string(c.k) + " batch=" + std::to_string(c.batch) +
                             " trans_a=" + std::to_string(c.trans_a) +
                             " trans_b=" + std::to_string(c.trans_b) +
                             " beta=" + std::to_string(c.beta) + " types " +
                             DTypeName(c.a_type) + "·" + DTypeName(c.b_type) + "→" +
                             DTypeName(c.out_type) + " gap=" + std::to_string(c.gap);
    ExpectCloseInPrecision(out, kF32Tolerance, what);
  }
};

TEST_F(MatmulParityTest, F32MatchesCpuForEveryTransposeAndBeta) {
  for (bool trans_a : {false, true}) {
    for (bool trans_b : {false, true}) {
      for (float beta : {0.0f, 1.0f, -0.5f}) {
        Check({5, 7, 11, 3, trans_a, trans_b, 0.75f, beta});
        Check({37, 13, 1, 1, trans_a, trans_b, 1.0f, beta});
      }
    }
  }
}

TEST_F(MatmulParityTest, F32MatchesCpuOnLargerOddShapes) {
  Check({129, 65, 257, 2, false, true, 1.0f, 0.0f});
  Check({96, 200, 64, 1, true, false, 1.0f, 1.0f});
}

TEST_F(MatmulParityTest, Bf16IsCloseToTheF32Reference) {
  cuda_->set_matmul_precision(MatmulPrecision::kBf16);
  for (bool trans_a : {false, true}) {
    for (bool trans_b : {false, true}) {
      Check({5, 7, 11, 3, trans_a, trans_b, 1.0f, 0.0f});
      Check({64, 96, 256, 2, trans_a, trans_b, 1.0f, 1.0f});
    }
  }
  Check({512, 1368, 512, 1, false, true, 1.0f, 0.0f});
}

TEST_F(MatmulParityTest, EmptyInnerDimensionScalesOut) {
  Check({5, 7, 0, 2, false, false, 1.0f, 0.5f});
  Check({5, 7, 0, 1, false, false, 1.0f, 0.0f});
}

// Every mix of f32 and bf16 storage in both precisions: kF32 must compute
// true f32 math on the bf16 values (widened) and round a bf16 out once;
// kBf16 multiplies bf16 operands as they are and writes a bf16 out
// directly. beta = 1 accumulates into a bf16 out; odd shapes fall back to
// f32 in kBf16.
TEST_F(MatmulParityTest, Bf16StorageMatchesCpuInBothPrecisions) {
  constexpr DType f = DType::kF32, h = DType::kBF16;
  const DType mixes[][3] = {{h, h, h}, {f, h, h}, {h, f, f}, {h, h, f}, {f, f, h}};
  for (MatmulPrecision precision : {MatmulPrecision::kF32, MatmulPrecision::kBf16}) {
    cuda_->set_matmul_precision(precision);
    for (const auto& [a, b, out] : mixes) {
      Check({5, 7, 11, 3, false, false, 1.0f, 0.0f, a, b, out});
      Check({5, 7, 11, 3, true, true, 0.75f, 1.0f, a, b, out});
      Check({37, 13, 1, 1, true, false, 1.0f, -0.5f, a, b, out});
      Check({64, 96, 256, 2, false, true, 1.0f, 1.0f, a, b, out, 8});
      Check({128, 64, 96, 3, true, false, 1.0f, 0.0f, a, b, out, 24});
      Check({5, 7, 0, 2, false, false, 1.0f, 0.5f, a, b, out});
    }
  }
}

// A broadcast operand with bf16 storage: b shared (one taller product) and
// a shared (item by item, offsets in bf16 elements).
TEST_F(MatmulParityTest, Bf16StorageBroadcastsAZeroStrideOperand) {
  const int64_t m = 16, n = 24, k = 32, batch = 3;
  for (MatmulPrecision precision : {MatmulPrecision::kF32, MatmulPrecision::kBf16}) {
    cuda_->set_matmul_precision(precision);
    Pair a = RandomStored({batch, m * k}, DType::kBF16);
    Pair w = RandomStored({k, n}, DType::kBF16);
    Pair out_b = RandomStored({batch, m * n}, DType::kBF16);
    Pair a1 = RandomStored({m, k}, DType::kBF16);
    Pair b = RandomStored({batch, k * n}, DType::kBF16);
    Pair out_a = RandomStored({batch, m * n}, DType::kBF16);
    Both([&](Backend& be, Side s) {
      be.Matmul(MatmulParams{.a = a[s], .b = w[s], .out = out_b[s], .m = m, .n = n, .k = k,
                             .batch = batch, .stride_a = m * k, .stride_b = 0,
                             .stride_out = m * n, .beta = 1.0f});
      be.Matmul(MatmulParams{.a = a1[s], .b = b[s], .out = out_a[s], .m = m, .n = n, .k = k,
                             .batch = batch, .stride_a = 0, .stride_b = k * n,
                             .stride_out = m * n});
    });
    ExpectCloseInPrecision(out_b, kF32Tolerance, "bf16 matmul with b broadcast");
    ExpectCloseInPrecision(out_a, kF32Tolerance, "bf16 matmul with a broadcast");
  }
}

TEST_F(OpParityTest, MatmulBroadcastsAZeroStrideOperand) {
  const int64_t m = 5, n = 7, k = 11, batch = 3;
  for (MatmulPrecision precision : {MatmulPrecision::kF32, MatmulPrecision::kBf16}) {
    cuda_->set_matmul_precision(precision);
    // Shared b (folds into one taller product) and shared a (item by item).
    Pair a = Random({batch, m * k});
    Pair w = Random({k, n});
    Pair out_b = Random({batch, m * n});
    Pair a1 = Random({m, k});
    Pair b = Random({batch, k * n});
    Pair out_a = Random({batch, m * n});
    Both([&](Backend& be, Side s) {
      be.Matmul(MatmulParams{.a = a[s], .b = w[s], .out = out_b[s], .m = m, .n = n, .k = k,
                             .batch = batch, .stride_a = m * k, .stride_b = 0,
                             .stride_out = m * n, .beta = 1.0f});
      be.Matmul(MatmulParams{.a = a1[s], .b = b[s], .out = out_a[s], .m = m, .n = n, .k = k,
                             .trans_b = false, .batch = batch, .stride_a = 0,
                             .stride_b = k * n, .stride_out = m * n});
    });
    if (precision == MatmulPrecision::kF32) {
      ExpectClose(out_b, kF32Tolerance, "matmul with b broadcast");
      ExpectClose(out_a, kF32Tolerance, "matmul with a broadcast");
    } else {
      ExpectCloseBf16(out_b, "matmul with b broadcast (bf16)");
      ExpectCloseBf16(out_a, "matmul with a broadcast (bf16)");
    }
  }
}

// -------------------------------------------------------- elementwise

TEST_F(OpParityTest, AddForwardAndBackward) {
  const Shape shape{5, 7, 11};
  Pair a = Random(shape), b = Random(shape), out = Random(shape);
  Pair g = Random(shape), ga = Random(shape), gb = Random(shape), gsame = Random(shape);
  Both([&](Backend& be, Side s) {
    be.Add({.a = a[s], .b = b[s], .out = out[s]});
    be.AddBackward({.grad_out = g[s], .grad_a = ga[s], .grad_b = gb[s]});
    // out = x + x: both gradients land in one buffer.
    be.AddBackward({.grad_out = g[s], .grad_a = gsame[s], .grad_b = gsame[s]});
  });
  ExpectClose(out, kF32Tolerance, "add");
  ExpectClose(ga, kF32Tolerance, "add grad_a");
  ExpectClose(gb, kF32Tolerance, "add grad_b");
  ExpectClose(gsame, kF32Tolerance, "add grad of x + x");
}

TEST_F(OpParityTest, MulForwardAndBackward) {
  const Shape shape{5, 7, 11};
  Pair a = Random(shape), b = Random(shape), out = Random(shape), in_place = Random(shape);
  Pair g = Random(shape), ga = Random(shape), gb = Random(shape), gb_only = Random(shape);
  Both([&](Backend& be, Side s) {
    be.Mul({.a = a[s], .b = b[s], .out = out[s]});
    be.Mul({.a = in_place[s], .b = b[s], .out = in_place[s]});
    be.MulBackward({.a = a[s], .b = b[s], .grad_out = g[s], .grad_a = ga[s], .grad_b = gb[s]});
    be.MulBackward({.a = a[s], .b = b[s], .grad_out = g[s], .grad_b = gb_only[s]});
  });
  ExpectClose(out, kF32Tolerance, "mul");
  ExpectClose(in_place, kF32Tolerance, "mul in place");
  ExpectClose(ga, kF32Tolerance, "mul grad_a");
  ExpectClose(gb, kF32Tolerance, "mul grad_b");
  ExpectClose(gb_only, kF32Tolerance, "mul grad_b alone");
}

TEST_F(OpParityTest, GeluAndSiluForwardAndBackward) {
  const Shape shape{5, 7, 11};
  Pair x = Random(shape, 6.0f), g = Random(shape);
  Pair gelu = Random(shape), silu = Random(shape);
  Pair gelu_grad = Random(shape), silu_grad = Random(shape);
  Both([&](Backend& be, Side s) {
    be.GeluForward({.in = x[s], .out = gelu[s]});
    be.SiluForward({.in = x[s], .out = silu[s]});
    be.GeluBackward({.in = x[s], .grad_out = g[s], .grad_in = gelu_grad[s]});
    be.SiluBackward({.in = x[s], .grad_out = g[s], .grad_in = silu_grad[s]});
  });
  ExpectClose(gelu, kF32Tolerance, "gelu");
  ExpectClose(silu, kF32Tolerance, "silu");
  ExpectClose(gelu_grad, kF32Tolerance, "gelu backward");
  ExpectClose(silu_grad, kF32Tolerance, "silu backward");
}

TEST_F(OpParityTest, SwiGluForwardAndBackward) {
  const Shape shape{37, 24};
  Pair gate = Random(shape, 5.0f), up = Random(shape), out = Random(shape);
  Pair g = Random(shape), g_gate = Random(shape), g_up = Random(shape);
  Pair g_gate_only = Random(shape);
  Both([&](Backend& be, Side s) {
    be.SwiGluForward({.gate = gate[s], .up = up[s], .out = out[s]});
    be.SwiGluBackward({.gate = gate[s], .up = up[s], .grad_out = g[s], .grad_gate = g_gate[s],
                       .grad_up = g_up[s]});
    be.SwiGluBackward({.gate = gate[s], .up = up[s], .grad_out = g[s],
                       .grad_gate = g_gate_only[s]});
  });
  ExpectClose(out, kF32Tolerance, "swiglu");
  ExpectClose(g_gate, kF32Tolerance, "swiglu grad_gate");
  ExpectClose(g_up, kF32Tolerance, "swiglu grad_up");
  ExpectClose(g_gate_only, kF32Tolerance, "swiglu grad_gate alone");
}

TEST_F(OpParityTest, BiasAddForwardAndBackward) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{37, 11}, {1000, 13}, {3, 515}}) {
    Pair x = Random({rows, cols}), bias = Random({cols});
    Pair g = Random({rows, cols}), g_bias = Random({cols});
    Both([&](Backend& be, Side s) {
      be.BiasAdd({.x = x[s], .bias = bias[s]});
      be.BiasBackward({.grad_out = g[s], .grad_bias = g_bias[s]});
    });
    const std::string shape = std::to_string(rows) + "x" + std::to_string(cols);
    ExpectClose(x, kF32Tolerance, "bias_add " + shape);
    ExpectClose(g_bias, kF32Tolerance, "bias backward " + shape);
  }
}

// --------------------------------------------------------------- norms

TEST_F(OpParityTest, LayerNormForwardAndBackward) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{35, 11}, {70, 515}, {9, 1}}) {
    // An offset mean makes the two-pass variance matter.
    Pair x = F32({rows, cols}, Uniform(rows * cols, 2.0f, 4.0f));
    Pair gain = Random({cols}), bias = Random({cols});
    Pair out = Random({rows, cols}), mean = Random({rows}), rstd = Random({rows});
    Pair g = Random({rows, cols}), gx = Random({rows, cols});
    Pair g_gain = Random({cols}), g_bias = Random({cols});
    Both([&](Backend& be, Side s) {
      be.LayerNormForward({.x = x[s], .gain = gain[s], .bias = bias[s], .out = out[s],
                           .mean = mean[s], .rstd = rstd[s]});
      be.LayerNormBackward({.x = x[s], .gain = gain[s], .mean = mean[s], .rstd = rstd[s],
                            .grad_out = g[s], .grad_x = gx[s], .grad_gain = g_gain[s],
                            .grad_bias = g_bias[s]});
    });
    const std::string shape = std::to_string(rows) + "x" + std::to_string(cols);
    ExpectClose(out, kF32Tolerance, "layer_norm out " + shape);
    ExpectClose(mean, kF32Tolerance, "layer_norm mean " + shape);
    ExpectClose(rstd, kF32Tolerance, "layer_norm rstd " + shape);
    ExpectClose(gx, kF32Tolerance, "layer_norm grad_x " + shape);
    ExpectClose(g_gain, kF32Tolerance, "layer_norm grad_gain " + shape);
    ExpectClose(g_bias, kF32Tolerance, "layer_norm grad_bias " + shape);
  }
}

TEST_F(OpParityTest, RmsNormForwardAndBackward) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{35, 11}, {70, 515}}) {
    Pair x = Random({rows, cols}, 3.0f), gain = Random({cols});
    Pair out = Random({rows, cols}), rstd = Random({rows});
    Pair g = Random({rows, cols}), gx = Random({rows, cols}), g_gain = Random({cols});
    Pair g_gain_only = Random({cols});
    Both([&](Backend& be, Side s) {
      be.RmsNormForward({.x = x[s], .gain = gain[s], .out = out[s], .rstd = rstd[s]});
      be.RmsNormBackward({.x = x[s], .gain = gain[s], .rstd = rstd[s], .grad_out = g[s],
                          .grad_x = gx[s], .grad_gain = g_gain[s]});
      be.RmsNormBackward({.x = x[s], .gain = gain[s], .rstd = rstd[s], .grad_out = g[s],
                          .grad_gain = g_gain_only[s]});
    });
    const std::string shape = std::to_string(rows) + "x" + std::to_string(cols);
    ExpectClose(out, kF32Tolerance, "rms_norm out " + shape);
    ExpectClose(rstd, kF32Tolerance, "rms_norm rstd " + shape);
    ExpectClose(gx, kF32Tolerance, "rms_norm grad_x " + shape);
    ExpectClose(g_gain, kF32Tolerance, "rms_norm grad_gain " + shape);
    ExpectClose(g_gain_only, kF32Tolerance, "rms_norm grad_gain alone " + shape);
  }
}

TEST_F(OpParityTest, NormsWithAResidualAddMatchTheCpu) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{35, 11}, {70, 515}, {9, 1}}) {
    Pair x = F32({rows, cols}, Uniform(rows * cols, 1.0f, 3.0f)), r = Random({rows, cols});
    Pair gain = Random({cols}), bias = Random({cols});
    Pair layer_sum = Random({rows, cols}), layer_out = Random({rows, cols});
    Pair mean = Random({rows}), layer_rstd = Random({rows});
    Pair rms_sum = Random({rows, cols}), rms_out = Random({rows, cols}), rms_rstd = Random({rows});
    // In place: the sum overwrites x (a copy of it, so both cases see one x).
    Pair in_place = F32({rows, cols}, Read(kCpu, x[kCpu])), in_place_out = Random({rows, cols});
    Both([&](Backend& be, Side s) {
      be.LayerNormForward({.x = x[s], .gain = gain[s], .bias = bias[s], .out = layer_out[s],
                           .mean = mean[s], .rstd = layer_rstd[s], .residual = r[s],
                           .sum = layer_sum[s]});
      be.RmsNormForward({.x = x[s], .gain = gain[s], .out = rms_out[s], .rstd = rms_rstd[s],
                         .residual = r[s], .sum = rms_sum[s]});
      be.RmsNormForward({.x = in_place[s], .gain = gain[s], .out = in_place_out[s],
                         .residual = r[s], .sum = in_place[s]});
    });
    const std::string shape = std::to_string(rows) + "x" + std::to_string(cols);
    ExpectClose(layer_sum, 0, "layer_norm sum " + shape);  // one f32 add: exact
    ExpectClose(layer_out, kF32Tolerance, "layer_norm out " + shape);
    ExpectClose(mean, kF32Tolerance, "layer_norm mean " + shape);
    ExpectClose(layer_rstd, kF32Tolerance, "layer_norm rstd " + shape);
    ExpectClose(rms_sum, 0, "rms_norm sum " + shape);
    ExpectClose(rms_out, kF32Tolerance, "rms_norm out " + shape);
    ExpectClose(rms_rstd, kF32Tolerance, "rms_norm rstd " + shape);
    ExpectClose(in_place, 0, "rms_norm sum in place " + shape);
    ExpectClose(in_place_out, kF32Tolerance, "rms_norm out in place " + shape);
  }
}

// ---------------------------------------------------------------- rope

TEST_F(OpParityTest, RopeForwardInPlaceAndBackward) {
  Pair x = Random(kRopeShape), out = Random(kRopeShape), in_place = Random(kRopeShape);
  Pair g = Random(kRopeShape), gx = Random(kRopeShape);
  RopeBoth(x, out, in_place, g, gx);
  ExpectClose(out, kF32Tolerance, "rope");
  ExpectClose(in_place, kF32Tolerance, "rope in place");
  ExpectClose(gx, kF32Tolerance, "rope backward");
}

// ------------------------------------------- bf16 activation storage

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
constexpr double kBf16StorageTolerance = 1e-2;

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
constexpr StorageMix kElementwiseMixes[] = {
    {DType::kBF16, DType::kBF16}, {DType::kBF16, DType::kF32}, {DType::kF32, DType::kBF16}};

TEST_F(Bf16ActivationOpsTest, AddAndMulMatchTheCpu) {
  const Shape shape{5, 7, 11};
  for (const StorageMix& mix : kElementwiseMixes) {
    Pair a = RandomStored(shape, mix.in), b = RandomStored(shape, mix.in), g = RandomStored(shape, mix.in);
    Pair sum = RandomStored(shape, mix.out), product = RandomStored(shape, mix.out);
    Pair ga = RandomStored(shape, mix.out), gb = RandomStored(shape, mix.out);
    Pair gsame = RandomStored(shape, mix.out), ma = RandomStored(shape, mix.out);
    Pair mb = RandomStored(shape, mix.out);
    Both([&](Backend& be, Side s) {
      be.Add({.a = a[s], .b = b[s], .out = sum[s]});
      be.AddBackward({.grad_out = g[s], .grad_a = ga[s], .grad_b = gb[s]});
      be.AddBackward({.grad_out = g[s], .grad_a = gsame[s], .grad_b = gsame[s]});
      be.Mul({.a = a[s], .b = b[s], .out = product[s]});
      be.MulBackward({.a = a[s], .b = b[s], .grad_out = g[s], .grad_a = ma[s], .grad_b = mb[s]});
    });
    const std::string what = mix.Name();
    ExpectCloseAct(sum, "add, " + what);
    ExpectCloseAct(ga, "add grad_a, " + what);
    ExpectCloseAct(gb, "add grad_b, " + what);
    ExpectCloseAct(gsame, "add grad of x + x, " + what);
    ExpectCloseAct(product, "mul, " + what);
    ExpectCloseAct(ma, "mul grad_a, " + what);
    ExpectCloseAct(mb, "mul grad_b, " + what);
  }
  // In place, all bf16: out = a · b into a.
  Pair a = RandomStored(shape, kBf16), b = RandomStored(shape, kBf16);
  Both([&](Backend& be, Side s) { be.Mul({.a = a[s], .b = b[s], .out = a[s]}); });
  ExpectCloseAct(a, "mul in place");
}

TEST_F(Bf16ActivationOpsTest, ActivationFunctionsMatchTheCpu) {
  const Shape shape{37, 24};
  for (const StorageMix& mix : kElementwiseMixes) {
    Pair x = RandomStored(shape, mix.in, 6.0f), up = RandomStored(shape, mix.in);
    Pair g = RandomStored(shape, mix.in);
    Pair gelu = RandomStored(shape, mix.out), silu = RandomStored(shape, mix.out);
    Pair swiglu = RandomStored(shape, mix.out);
    Pair gelu_grad = RandomStored(shape, mix.out), silu_grad = RandomStored(shape, mix.out);
    Pair g_gate = RandomStored(shape, mix.out), g_up = RandomStored(shape, mix.out);
    Both([&](Backend& be, Side s) {
      be.GeluForward({.in = x[s], .out = gelu[s]});
      be.SiluForward({.in = x[s], .out = silu[s]});
      be.SwiGluForward({.gate = x[s], .up = up[s], .out = swiglu[s]});
      be.GeluBackward({.in = x[s], .grad_out = g[s], .grad_in = gelu_grad[s]});
      be.SiluBackward({.in = x[s], .grad_out = g[s], .grad_in = silu_grad[s]});
      be.SwiGluBackward({.gate = x[s], .up = up[s], .grad_out = g[s], .grad_gate = g_gate[s],
                         .grad_up = g_up[s]});
    });
    const std::string what = mix.Name();
    ExpectCloseAct(gelu, "gelu, " + what);
    ExpectCloseAct(silu, "silu, " + what);
    ExpectCloseAct(swiglu, "swiglu, " + what);
    ExpectCloseAct(gelu_grad, "gelu backward, " + what);
    ExpectCloseAct(silu_grad, "silu backward, " + what);
    ExpectCloseAct(g_gate, "swiglu grad_gate, " + what);
    ExpectCloseAct(g_up, "swiglu grad_up, " + what);
  }
}

TEST_F(Bf16ActivationOpsTest, BiasAddMatchesTheCpu) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{37, 11}, {1000, 13}, {3, 515}}) {
    Pair x = RandomStored({rows, cols}, kBf16), bias = Random({cols});
    Pair g = RandomStored({rows, cols}, kBf16), g_bias = Random({cols});
    Both([&](Backend& be, Side s) {
      be.BiasAdd({.x = x[s], .bias = bias[s]});
      be.BiasBackward({.grad_out = g[s], .grad_bias = g_bias[s]});
    });
    const std::string shape = std::to_string(rows) + "x" + std::to_string(cols);
    ExpectCloseAct(x, "bias_add " + shape);
    ExpectCloseAct(g_bias, "bias backward " + shape);
  }
}

// The dtypes of a norm case: forward x, residual, sum and out; backward x,
// grad_out and grad_x.
struct NormMix {
  DType x, residual, sum, out;
  DType backward_x, grad_out, grad_x;
  std::string Name() const {
    return std::string("x ") + DTypeName(x) + ", residual " + DTypeName(residual) + ", sum " +
           DTypeName(sum) + ", out " + DTypeName(out) + "; backward x " +
           DTypeName(backward_x) + ", grad_out " + DTypeName(grad_out) + ", grad_x " +
           DTypeName(grad_x);
  }
};
// All bf16, then the model's mix: the residual stream (x, sum) in f32, the
// branch's output (residual) and the norm's output in bf16; backward from a
// bf16 gradient into the f32 stream's gradient.
constexpr NormMix kNormMixes[] = {
    {DType::kBF16, DType::kBF16, DType::kBF16, DType::kBF16, DType::kBF16, DType::kBF16,
     DType::kBF16},
    {DType::kF32, DType::kBF16, DType::kF32, DType::kBF16, DType::kF32, DType::kBF16,
     DType::kF32}};

TEST_F(Bf16ActivationOpsTest, NormsMatchTheCpu) {
  for (const NormMix& mix : kNormMixes) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{35, 11}, {70, 515}, {9, 1}}) {
      const Shape shape{rows, cols};
      // An offset mean makes the two-pass variance matter.
      Pair x = Stored(shape, Uniform(rows * cols, 1.0f, 3.0f), mix.x);
      Pair r = RandomStored(shape, mix.residual), gain = Random({cols}), bias = Random({cols});
      Pair layer_sum = RandomStored(shape, mix.sum), layer_out = RandomStored(shape, mix.out);
      Pair rms_sum = RandomStored(shape, mix.sum), rms_out = RandomStored(shape, mix.out);
      Pair plain_out = RandomStored(shape, mix.out), layer_plain_out = RandomStored(shape, mix.out);
      Pair plain_mean = Random({rows}), plain_rstd = Random({rows});
      Pair mean = Random({rows}), layer_rstd = Random({rows}), rms_rstd = Random({rows});
      // In place, as the model runs it: the sum overwrites x (a copy of it).
      Pair in_place = CopyStored(x), in_place_out = RandomStored(shape, mix.out);
      Pair bx = Stored(shape, Uniform(rows * cols, 1.0f, 3.0f), mix.backward_x);
      Pair g = RandomStored(shape, mix.grad_out);
      Pair layer_gx = RandomStored(shape, mix.grad_x), rms_gx = RandomStored(shape, mix.grad_x);
      Pair layer_g_gain = Random({cols}), layer_g_bias = Random({cols});
      Pair rms_g_gain = Random({cols}), b_out = RandomStored(shape, mix.out);
      Pair b_mean = Random({rows}), b_layer_rstd = Random({rows}), b_rms_rstd = Random({rows});
      Both([&](Backend& be, Side s) {
        be.LayerNormForward({.x = x[s], .gain = gain[s], .bias = bias[s], .out = layer_out[s],
                             .mean = mean[s], .rstd = layer_rstd[s], .residual = r[s],
                             .sum = layer_sum[s]});
        be.RmsNormForward({.x = x[s], .gain = gain[s], .out = rms_out[s], .rstd = rms_rstd[s],
                           .residual = r[s], .sum = rms_sum[s]});
        be.RmsNormForward({.x = x[s], .gain = gain[s], .out = plain_out[s]});
        be.LayerNormForward({.x = x[s], .gain = gain[s], .bias = bias[s],
                             .out = layer_plain_out[s], .mean = plain_mean[s],
                             .rstd = plain_rstd[s]});
        be.RmsNormForward({.x = in_place[s], .gain = gain[s], .out = in_place_out[s],
                           .residual = r[s], .sum = in_place[s]});
        // The backwards, with each side's own forward statistics of bx.
        be.LayerNormForward({.x = bx[s], .gain = gain[s], .out = b_out[s], .mean = b_mean[s],
                             .rstd = b_layer_rstd[s]});
        be.LayerNormBackward({.x = bx[s], .gain = gain[s], .mean = b_mean[s],
                              .rstd = b_layer_rstd[s], .grad_out = g[s], .grad_x = layer_gx[s],
                              .grad_gain = layer_g_gain[s], .grad_bias = layer_g_bias[s]});
        be.RmsNormForward({.x = bx[s], .gain = gain[s], .out = b_out[s], .rstd = b_rms_rstd[s]});
        be.RmsNormBackward({.x = bx[s], .gain = gain[s], .rstd = b_rms_rstd[s],
                            .grad_out = g[s], .grad_x = rms_gx[s], .grad_gain = rms_g_gain[s]});
      });
      const std::string what = std::to_string(rows) + "x" + std::to_string(cols) + ", " +
                               mix.Name();
      ExpectCloseAct(layer_sum, "layer_norm sum " + what);
      ExpectCloseAct(rms_sum, "rms_norm sum " + what);
      ExpectCloseAct(plain_out, "rms_norm out without a residual " + what);
      ExpectCloseAct(layer_plain_out, "layer_norm out without a residual " + what);
      ExpectCloseAct(plain_mean, "layer_norm mean without a residual " + what);
      ExpectCloseAct(plain_rstd, "layer_norm rstd without a residual " + what);
      ExpectCloseAct(in_place, "rms_norm sum in place " + what);
      ExpectCloseAct(in_place_out, "rms_norm out in place " + what);
      ExpectCloseAct(layer_out, "layer_norm out " + what);
      ExpectCloseAct(mean, "layer_norm mean " + what);
      ExpectCloseAct(layer_rstd, "layer_norm rstd " + what);
      ExpectCloseAct(rms_out, "rms_norm out " + what);
      ExpectCloseAct(rms_rstd, "rms_norm rstd " + what);
      ExpectCloseAct(layer_gx, "layer_norm grad_x " + what);
      ExpectCloseAct(layer_g_gain, "layer_norm grad_gain " + what);
      ExpectCloseAct(layer_g_bias, "layer_norm grad_bias " + what);
      ExpectCloseAct(rms_gx, "rms_norm grad_x " + what);
      ExpectCloseAct(rms_g_gain, "rms_norm grad_gain " + what);
    }
  }
}

// The loss's backward in the speed mode: the gradient of f32 logits written
// (or added) as bf16.
TEST_F(Bf16ActivationOpsTest, CrossEntropyWritesABf16Gradient) {
  const int64_t rows = 7, vocab = 1031;
  Pair logits = Random({rows, vocab}, 4.0f);
  Pair targets = I32({rows}, RandomIds(rows, static_cast<int32_t>(vocab)));
  Pair losses = Zeros({rows}), lse = Zeros({rows}), g = Random({rows});
  Both([&](Backend& be, Side s) {
    be.CrossEntropyForward({.logits = logits[s], .targets = targets[s], .losses = losses[s],
                            .lse = lse[s]});
  });
  const Pair ref_lse = F32({rows}, Read(kCpu, lse[kCpu]));
  for (bool overwrite : {true, false}) {
    Pair grad = RandomStored({rows, vocab}, kBf16);
    Both([&](Backend& be, Side s) {
      be.CrossEntropyBackward({.logits = logits[s], .targets = targets[s], .lse = ref_lse[s],
                               .grad_losses = g[s], .grad_logits = grad[s],
                               .overwrite = overwrite});
    });
    ExpectCloseAct(grad, overwrite ? "cross_entropy backward, written" : "cross_entropy backward");
  }
}

TEST_F(Bf16ActivationOpsTest, RopeMatchesTheCpu) {
  for (const StorageMix& mix : kElementwiseMixes) {
    Pair x = RandomStored(kRopeShape, mix.in), out = RandomStored(kRopeShape, mix.out);
    Pair in_place = RandomStored(kRopeShape, kBf16);
    Pair g = RandomStored(kRopeShape, mix.in), gx = RandomStored(kRopeShape, mix.out);
    RopeBoth(x, out, in_place, g, gx);
    const std::string what = mix.Name();
    ExpectCloseAct(out, "rope, " + what);
    ExpectCloseAct(in_place, "rope in place, bf16");
    ExpectCloseAct(gx, "rope backward, " + what);
  }
}

// ----------------------------------------------------------- attention

// Attention forward and backward on both backends, for head size
// GetParam(), in either matmul precision and with the activations (qkv,
// out, grad_out, grad_qkv) stored as f32 or bf16. Both backwards read the
// CPU's forward results, so that they are judged on identical inputs;
// gradients start from random values, so += is checked too.
//
// Tolerances: kF32 (attention.cu) matches to rounding (f32 1e-5, grad_qkv
// 2e-5 since its sums cancel: Σ_j dS_j = 0); kBf16 (attention_bf16.cu, the
// tensor cores) as the bf16 matmuls (ExpectCloseBf16), with the gradient's
// increments compared when it is f32. A bf16-stored result adds one bf16
// ulp (kBf16StorageUlp) on both; a bf16 grad_qkv is compared as stored
// (start + increment, rounded), since its increment alone carries the
// rounding of the start.
class AttentionParityTest : public ActivationParityTest,
                            public ::testing::WithParamInterface<int64_t> {
 protected:
  void Check(MatmulPrecision precision, DType act) {
    const int64_t head_dim = GetParam();
    cuda_->set_matmul_precision(precision);
    const bool bf16_math = precision == MatmulPrecision::kBf16;
    for (auto [batch, time, heads] : {std::tuple<int64_t, int64_t, int64_t>{2, 37, 3},
                                      {1, 70, 2}, {3, 1, 1}, {1, 130, 1}}) {
      const int64_t c = heads * head_dim;
      Pair qkv = RandomStored({batch, time, 3 * c}, act);
      Pair out = RandomStored({batch, time, c}, act), lse = Random({batch, heads, time});
      const std::vector<float> start = Uniform(batch * time * 3 * c, -1, 1);
      Pair g = RandomStored({batch, time, c}, act);
      Pair g_qkv = Stored({batch, time, 3 * c}, start, act);
      Both([&](Backend& be, Side s) {
        be.AttentionForward({.qkv = qkv[s], .out = out[s], .lse = lse[s], .batch = batch,
                             .time = time, .heads = heads, .head_dim = head_dim});
      });
      Pair ref_out = Stored({batch, time, c}, ReadStored(kCpu, out[kCpu]), act);
      Pair ref_lse = F32({batch, heads, time}, Read(kCpu, lse[kCpu]));
      Both([&](Backend& be, Side s) {
        be.AttentionBackward({.qkv = qkv[s], .out = ref_out[s], .lse = ref_lse[s],
                              .grad_out = g[s], .grad_qkv = g_qkv[s], .batch = batch,
                              .time = time, .heads = heads, .head_dim = head_dim});
      });
      const std::string what = std::string(bf16_math ? "bf16" : "f32") + " attention (" +
                               DTypeName(act) + " activations) B=" + std::to_string(batch) +
                               " T=" + std::to_string(time) + " H=" + std::to_string(heads) +
                               " D=" + std::to_string(head_dim);
      ExpectCloseInPrecision(out, kF32Tolerance, what + " out");
      if (bf16_math && act == DType::kF32) {
        // Increments: what the backward added to the random start.
        std::vector<float> cpu_inc = Read(kCpu, g_qkv[kCpu]), gpu_inc = Read(kGpu, g_qkv[kGpu]);
        for (size_t i = 0; i < start.size(); ++i) {
          cpu_inc[i] -= start[i];
          gpu_inc[i] -= start[i];
        }
        Pair increments = F32({batch, time, 3 * c}, cpu_inc);
        gpu_->CopyToDevice(increments[kGpu].data, gpu_inc.data(), increments[kGpu].bytes());
        ExpectCloseBf16(increments, what + " grad_qkv increments");
      } else {
        ExpectCloseInPrecision(g_qkv, kAttentionTolerance, what + " grad_qkv");
      }
      // lse is f32 on both sides.
      if (!bf16_math) {
        ExpectClose(lse, kF32Tolerance, what + " lse");
        continue;
      }
      // With bf16 math lse carries the scores' absolute error (bf16 q·k),
      // which is relative to |q||k|, not to lse: with T = 1, lse is one
      // score and may be near 0.
      const std::vector<float> want = Read(kCpu, lse[kCpu]), got = Read(kGpu, lse[kGpu]);
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_LE(std::fabs(got[i] - want[i]), kBf16Tolerance * (1.0f + std::fabs(want[i])))
            << what << " lse at " << i << ": cpu " << want[i] << ", cuda " << got[i];
      }
    }
  }
};

TEST_P(AttentionParityTest, ForwardAndBackwardMatchCpu) {
  Check(MatmulPrecision::kF32, DType::kF32);
}

TEST_P(AttentionParityTest, Bf16StorageMatchesCpu) {
  Check(MatmulPrecision::kF32, DType::kBF16);
}

// "D64": the head size, in the test's name.
std::string HeadSizeName(const ::testing::TestParamInfo<int64_t>& info) {
  return "D" + std::to_string(info.param);
}

INSTANTIATE_TEST_SUITE_P(HeadSizes, AttentionParityTest, ::testing::Values(32, 64, 128),
                         HeadSizeName);

// The tensor-core attention of the bf16 mode (kernels/attention_bf16.cu).
class Bf16AttentionParityTest : public AttentionParityTest {};

TEST_P(Bf16AttentionParityTest, ForwardAndBackwardAreCloseToTheCpu) {
  Check(MatmulPrecision::kBf16, DType::kF32);
}

TEST_P(Bf16AttentionParityTest, Bf16StorageIsCloseToTheCpu) {
  Check(MatmulPrecision::kBf16, DType::kBF16);
}

INSTANTIATE_TEST_SUITE_P(HeadSizes, Bf16AttentionParityTest, ::testing::Values(32, 64, 128),
                         HeadSizeName);

// ------------------------------------------------- embedding and loss

TEST_F(OpParityTest, EmbeddingForwardAndBackward) {
  const int64_t vocab = 11, cols = 7, count = 37;
  Pair ids = I32({count}, RandomIds(count, vocab));  // many repeats
  Pair table = Random({vocab, cols}), out = Random({count, cols});
  Pair g = Random({count, cols}), g_table = Random({vocab, cols});
  Both([&](Backend& be, Side s) {
    be.EmbeddingForward({.ids = ids[s], .table = table[s], .out = out[s]});
    be.EmbeddingBackward({.ids = ids[s], .grad_out = g[s], .grad_table = g_table[s]});
  });
  ExpectClose(out, kF32Tolerance, "embedding");
  ExpectClose(g_table, kF32Tolerance, "embedding backward");

  // More tokens than one segment of the backward kernel, wider rows.
  const int64_t big_vocab = 300, big_cols = 300, big_count = 3000;
  Pair big_ids = I32({big_count}, RandomIds(big_count, big_vocab));
  Pair big_g = Random({big_count, big_cols}), big_table_g = Random({big_vocab, big_cols});
  Both([&](Backend& be, Side s) {
    be.EmbeddingBackward({.ids = big_ids[s], .grad_out = big_g[s],
                          .grad_table = big_table_g[s]});
  });
  ExpectClose(big_table_g, kF32Tolerance, "embedding backward, 3000 tokens");
}

TEST_F(OpParityTest, CrossEntropyForwardAndBackward) {
  for (auto [rows, vocab, scale] : {std::tuple<int64_t, int64_t, float>{7, 1031, 1.0f},
                                    {5, 11, 30.0f}, {3, 5000, 8.0f}}) {
    Pair logits = Random({rows, vocab}, scale);
    Pair targets = I32({rows}, RandomIds(rows, static_cast<int32_t>(vocab)));
    Pair losses = Random({rows}), lse = Random({rows});
    Pair g = Random({rows}), g_logits = Random({rows, vocab});
    Both([&](Backend& be, Side s) {
      be.CrossEntropyForward({.logits = logits[s], .targets = targets[s], .losses = losses[s],
                              .lse = lse[s]});
    });
    const std::string shape = std::to_string(rows) + "x" + std::to_string(vocab);
    ExpectClose(losses, kF32Tolerance, "cross_entropy losses " + shape);
    ExpectClose(lse, kF32Tolerance, "cross_entropy lse " + shape);
    Pair ref_lse = F32({rows}, Read(kCpu, lse[kCpu]));
    Both([&](Backend& be, Side s) {
      be.CrossEntropyBackward({.logits = logits[s], .targets = targets[s], .lse = ref_lse[s],
                               .grad_losses = g[s], .grad_logits = g_logits[s]});
    });
    ExpectClose(g_logits, kF32Tolerance, "cross_entropy backward " + shape);
    // The loss's in-place backward: the logits overwritten with their
    // gradient, which the accumulation into zeros gives too.
    Pair zeros = Zeros({rows, vocab});
    Both([&](Backend& be, Side s) {
      be.CrossEntropyBackward({.logits = logits[s], .targets = targets[s], .lse = ref_lse[s],
                               .grad_losses = g[s], .grad_logits = zeros[s]});
      be.CrossEntropyBackward({.logits = logits[s], .targets = targets[s], .lse = ref_lse[s],
                               .grad_losses = g[s], .grad_logits = logits[s],
                               .overwrite = true});
    });
    ExpectClose(logits, kF32Tolerance, "cross_entropy backward in place " + shape);
    // Equal values (a −0 overwritten is +0 accumulated, hence not bytes).
    EXPECT_EQ(Read(kGpu, logits[kGpu]), Read(kGpu, zeros[kGpu])) << "in place, " << shape;
  }
}

// ---------------------------------------------------------- reductions

TEST_F(OpParityTest, SumAndSumSquares) {
  for (int64_t count : {int64_t{1}, int64_t{385}, int64_t{1000003}}) {
    Pair in = Positive({count}, 0.0f, 1.0f);
    Pair sum = Random({1}), squares = Random({1}), accumulated = Random({1});
    Both([&](Backend& be, Side s) {
      be.Sum({.in = in[s], .out = sum[s]});
      be.SumSquares({.in = in[s], .out = squares[s]});
      be.SumSquares({.in = in[s], .out = accumulated[s], .accumulate = true});
    });
    const std::string n = std::to_string(count);
    ExpectClose(sum, kF32Tolerance, "sum of " + n);
    ExpectClose(squares, kF32Tolerance, "sum of squares of " + n);
    ExpectClose(accumulated, kF32Tolerance, "accumulated sum of squares of " + n);
  }
}

TEST_F(OpParityTest, AdamWWithAndWithoutClipping) {
  const Shape shape{5, 7, 11};
  // max_grad_norm 0.5 against a norm of 2: clipping scales by 0.25.
  for (float max_grad_norm : {0.0f, 0.5f, 10.0f}) {
    Pair param = Random(shape), grad = Random(shape);
    Pair m = Random(shape, 0.1f), v = Positive(shape, 0.0f, 0.01f);
    Pair norm_sq = F32({1}, {4.0f});
    Both([&](Backend& be, Side s) {
      for (int64_t step = 3; step <= 4; ++step) {
        be.AdamW({.param = param[s], .grad = grad[s], .m = m[s], .v = v[s],
                  .grad_norm_sq = norm_sq[s], .lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f,
                  .eps = 1e-8f, .weight_decay = 0.1f, .max_grad_norm = max_grad_norm,
                  .step = step});
      }
    });
    const std::string what = "adamw max_grad_norm=" + std::to_string(max_grad_norm);
    ExpectClose(param, kF32Tolerance, what + " param");
    ExpectClose(m, kF32Tolerance, what + " m");
    ExpectClose(v, kF32Tolerance, what + " v");
  }
}

TEST_F(OpParityTest, AdamWReadsItsStepScalarsOnTheDevice) {
  const Shape shape{5, 7, 11};
  Pair param = Random(shape), grad = Random(shape);
  Pair m = Random(shape, 0.1f), v = Positive(shape, 0.0f, 0.01f);
  Pair norm_sq = F32({1}, {4.0f});
  // The GPU's argument path, on copies of the same state.
  Pair param2 = F32(shape, Read(kGpu, param[kGpu])), m2 = F32(shape, Read(kGpu, m[kGpu]));
  Pair v2 = F32(shape, Read(kGpu, v[kGpu]));
  for (int64_t step = 1; step <= 3; ++step) {
    const AdamWStepScalars scalars = MakeAdamWStepScalars(1e-2f, 0.9f, 0.95f, step);
    Pair device_scalars = F32({3}, {scalars.lr, scalars.correction1, scalars.correction2});
    Both([&](Backend& be, Side s) {
      be.AdamW({.param = param[s], .grad = grad[s], .m = m[s], .v = v[s],
                .grad_norm_sq = norm_sq[s], .scalars = device_scalars[s], .beta1 = 0.9f,
                .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f, .max_grad_norm = 0.5f});
    });
    gpu_->AdamW({.param = param2[kGpu], .grad = grad[kGpu], .m = m2[kGpu], .v = v2[kGpu],
                 .grad_norm_sq = norm_sq[kGpu], .lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f,
                 .eps = 1e-8f, .weight_decay = 0.1f, .max_grad_norm = 0.5f, .step = step});
  }
  ExpectClose(param, kF32Tolerance, "adamw from device scalars: param");
  ExpectClose(m, kF32Tolerance, "adamw from device scalars: m");
  ExpectClose(v, kF32Tolerance, "adamw from device scalars: v");
  EXPECT_TRUE(Bytes(param[kGpu]) == Bytes(param2[kGpu]))
      << "device scalars and arguments must give the same bits";
  EXPECT_TRUE(Bytes(v[kGpu]) == Bytes(v2[kGpu]));
}

// ------------------------------------------------- optimizer row ops

TEST_F(OpParityTest, RowSumSquaresMatchesTheCpu) {
  struct Case {
    Shape shape;
    float alpha, beta;
  };
  // (35, 11), one element, rows longer than a block's stride, many rows,
  // a vector (one row), accumulation into out.
  for (const Case& c : {Case{{5, 7, 11}, 1.0f, 0.0f}, Case{{1, 1}, 1.0f, 0.0f},
                        Case{{3, 100003}, 0.5f, 0.95f}, Case{{4096, 257}, 1.0f, 0.0f},
                        Case{{37}, -2.0f, 1.0f}, Case{{7, 300}, 0.05f / 300, 0.95f}}) {
    Pair in = Random(c.shape);
    Pair out = Positive({c.shape.rows()}, 0.5f, 1.0f);
    Both([&](Backend& be, Side s) {
      be.RowSumSquares({.in = in[s], .out = out[s], .alpha = c.alpha, .beta = c.beta});
    });
    ExpectClose(out, kF32Tolerance, "row_sum_squares " + c.shape.ToString() +
                                        " alpha=" + std::to_string(c.alpha) +
                                        " beta=" + std::to_string(c.beta));
  }
  // beta = 0 never reads out, even when it holds NaN.
  Pair in = Random({5, 9});
  Pair out = F32({5}, std::vector<float>(5, NAN));
  Both([&](Backend& be, Side s) { be.RowSumSquares({.in = in[s], .out = out[s]}); });
  ExpectClose(out, kF32Tolerance, "row_sum_squares over NaN");
}

TEST_F(OpParityTest, RowScaleMatchesTheCpu) {
  for (const Shape& shape : {Shape{5, 7, 11}, Shape{1, 1}, Shape{3, 100003}, Shape{513, 3}}) {
    const int64_t rows = shape.rows();
    Pair in = Random(shape);
    Pair numer = Positive({rows}, 0.0f, 4.0f), denom = Positive({rows}, 0.1f, 3.0f);
    Pair scale = F32({1}, {-0.0371f});
    Pair plain = Random(shape), both = Random(shape), scaled = Random(shape);
    Pair in_place = F32(shape, Read(kCpu, in[kCpu]));
    Both([&](Backend& be, Side s) {
      be.RowScale({.in = in[s], .out = plain[s], .alpha = 0.75f});
      be.RowScale({.in = in[s], .out = both[s], .numer = numer[s], .denom = denom[s],
                   .alpha = 1.5f, .eps = 1e-3f});
      be.RowScale({.in = in[s], .out = scaled[s], .denom = denom[s], .scale = scale[s],
                   .alpha = 0.5f});
      be.RowScale({.in = in_place[s], .out = in_place[s], .numer = numer[s], .alpha = 2.0f});
    });
    const std::string what = "row_scale " + shape.ToString();
    ExpectClose(plain, kF32Tolerance, what + " by alpha");
    ExpectClose(both, kF32Tolerance, what + " with numer, denom and eps");
    ExpectClose(scaled, kF32Tolerance, what + " with a device scale");
    ExpectClose(in_place, kF32Tolerance, what + " in place");
  }
  // Zero rows stay zero: a zero statistic gives a factor 0, not 0/0; a
  // negative numerator counts as 0.
  Pair zero = Zeros({4, 6}), stat = F32({4}, {0.0f, 0.0f, 1.0f, 4.0f});
  Pair numer = F32({4}, {1.0f, -1.0f, 1.0f, 1.0f});
  Pair out = Random({4, 6});
  Both([&](Backend& be, Side s) {
    be.RowScale({.in = zero[s], .out = out[s], .numer = numer[s], .denom = stat[s]});
  });
  for (float value : Read(kGpu, out[kGpu])) EXPECT_EQ(value, 0.0f);
}

TEST_F(OpParityTest, GatherSequencesMatchesTheCpu) {
  const int64_t count = 1001, rows = 7, time = 37;
  Pair tokens = I32({count}, RandomIds(count, 8192));
  std::vector<int32_t> starts = RandomIds(rows, static_cast<int32_t>(count - time - 1));
  starts[0] = 0;
  starts[1] = static_cast<int32_t>(count - time - 1);  // the last possible start
  Pair device_starts = I32({rows}, starts);
  Pair inputs = I32({rows * time}, std::vector<int32_t>(rows * time, -1));
  Pair targets = I32({rows * time}, std::vector<int32_t>(rows * time, -1));
  Both([&](Backend& be, Side s) {
    be.GatherSequences({.tokens = tokens[s], .starts = device_starts[s], .inputs = inputs[s],
                        .targets = targets[s], .time = time});
  });
  for (const Pair* p : {&inputs, &targets}) {
    std::vector<int32_t> gpu(rows * time);
    gpu_->CopyToHost(gpu.data(), (*p)[kGpu].data, (*p)[kGpu].bytes());
    const int32_t* cpu = (*p)[kCpu].i32();
    EXPECT_TRUE(std::equal(gpu.begin(), gpu.end(), cpu))
        << (p == &inputs ? "inputs" : "targets") << " differ";
  }
}

TEST_F(OpParityTest, StackedOrthogonalizationIsOneBatchedProductPerStep) {
  // Three matrices of one shape, wide and tall: each Newton–Schulz
  // iteration is three Matmul calls for the whole stack, each one strided
  // batched cuBLASLt product (MatmulParams.batch = 3), whatever the stack
  // size; the result matches the CPU's.
  const NewtonSchulzSchedule& schedule = ShortNewtonSchulzSchedule();
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{24, 40}, {40, 24}}) {
    const int64_t n = 3;
    Pair x = Random({n, rows, cols});
    Pair workspace = Zeros({NewtonSchulzWorkspaceFloats(n, rows, cols)});
    const int64_t launches = cuda_->matmul_launches();
    Both([&](Backend& be, Side s) {
      Orthogonalize(be, x[s], schedule,
                    CarveNewtonSchulzWorkspace(workspace[s].f32(), n, rows, cols));
    });
    EXPECT_EQ(cuda_->matmul_launches() - launches, 3 * static_cast<int64_t>(schedule.size()))
        << rows << "x" << cols;
    // Four polynomial steps amplify rounding differences a little.
    ExpectClose(x, 1e-4, "stacked orthogonalization " + std::to_string(rows) + "x" +
                             std::to_string(cols));
  }
}

// --------------------------------------------------------- determinism

// Runs `op` twice into zeroed outputs and expects bitwise equal results.
class DeterminismTest : public OpParityTest {
 protected:
  template <typename F>
  void ExpectRepeatable(const std::vector<Tensor>& outputs, F&& op, const std::string& what) {
    std::vector<std::vector<uint8_t>> first;
    for (int run = 0; run < 2; ++run) {
      for (const Tensor& t : outputs) gpu_->Fill(t, 0.0f);
      op();
      for (size_t i = 0; i < outputs.size(); ++i) {
        std::vector<uint8_t> bytes = Bytes(outputs[i]);
        if (run == 0) {
          first.push_back(std::move(bytes));
        } else {
          EXPECT_TRUE(bytes == first[i]) << what << ": output " << i << " changed between runs";
        }
      }
    }
  }
};

TEST_F(DeterminismTest, AttentionBackwardIsBitwiseRepeatable) {
  const int64_t batch = 2, time = 200, heads = 3, head_dim = 64, c = heads * head_dim;
  Pair qkv = Random({batch, time, 3 * c});
  Pair out = Zeros({batch, time, c}), lse = Zeros({batch, heads, time});
  Pair g = Random({batch, time, c}), g_qkv = Zeros({batch, time, 3 * c});
  gpu_->AttentionForward({.qkv = qkv[kGpu], .out = out[kGpu], .lse = lse[kGpu],
                          .batch = batch, .time = time, .heads = heads, .head_dim = head_dim});
  ExpectRepeatable({g_qkv[kGpu]}, [&] {
    gpu_->AttentionBackward({.qkv = qkv[kGpu], .out = out[kGpu], .lse = lse[kGpu],
                             .grad_out = g[kGpu], .grad_qkv = g_qkv[kGpu], .batch = batch,
                             .time = time, .heads = heads, .head_dim = head_dim});
  }, "attention backward");
}

TEST_F(DeterminismTest, Bf16AttentionIsBitwiseRepeatable) {
  cuda_->set_matmul_precision(MatmulPrecision::kBf16);
  const int64_t batch = 2, time = 200, heads = 3, head_dim = 64, c = heads * head_dim;
  Pair qkv = Random({batch, time, 3 * c});
  Pair out = Zeros({batch, time, c}), lse = Zeros({batch, heads, time});
  Pair g = Random({batch, time, c}), g_qkv = Zeros({batch, time, 3 * c});
  ExpectRepeatable({out[kGpu], lse[kGpu], g_qkv[kGpu]}, [&] {
    gpu_->AttentionForward({.qkv = qkv[kGpu], .out = out[kGpu], .lse = lse[kGpu],
                            .batch = batch, .time = time, .heads = heads,
                            .head_dim = head_dim});
    gpu_->AttentionBackward({.qkv = qkv[kGpu], .out = out[kGpu], .lse = lse[kGpu],
                             .grad_out = g[kGpu], .grad_qkv = g_qkv[kGpu], .batch = batch,
                             .time = time, .heads = heads, .head_dim = head_dim});
  }, "bf16 attention forward and backward");
}

TEST_F(DeterminismTest, EmbeddingBackwardIsBitwiseRepeatable) {
  const int64_t vocab = 50, cols = 96, count = 5000;
  Pair ids = I32({count}, RandomIds(count, vocab));  // ~100 repeats of each id
  Pair g = Random({count, cols}), g_table = Zeros({vocab, cols});
  ExpectRepeatable({g_table[kGpu]}, [&] {
    gpu_->EmbeddingBackward({.ids = ids[kGpu], .grad_out = g[kGpu],
                             .grad_table = g_table[kGpu]});
  }, "embedding backward");
}

TEST_F(DeterminismTest, ReductionsAreBitwiseRepeatable) {
  const int64_t rows = 4096, cols = 257;
  Pair x = Random({rows, cols}), gain = Random({cols}), g = Random({rows, cols});
  Pair mean = Zeros({rows}), rstd = Zeros({rows}), out = Zeros({rows, cols});
  Pair sum = Zeros({1}), squares = Zeros({1}), g_bias = Zeros({cols});
  Pair g_gain = Zeros({cols}), g_norm_bias = Zeros({cols}), gx = Zeros({rows, cols});
  gpu_->LayerNormForward({.x = x[kGpu], .gain = gain[kGpu], .out = out[kGpu],
                          .mean = mean[kGpu], .rstd = rstd[kGpu]});
  ExpectRepeatable({sum[kGpu], squares[kGpu], g_bias[kGpu], g_gain[kGpu], g_norm_bias[kGpu],
                    gx[kGpu]}, [&] {
    gpu_->Sum({.in = x[kGpu], .out = sum[kGpu]});
    gpu_->SumSquares({.in = x[kGpu], .out = squares[kGpu]});
    gpu_->BiasBackward({.grad_out = g[kGpu], .grad_bias = g_bias[kGpu]});
    gpu_->LayerNormBackward({.x = x[kGpu], .gain = gain[kGpu], .mean = mean[kGpu],
                             .rstd = rstd[kGpu], .grad_out = g[kGpu], .grad_x = gx[kGpu],
                             .grad_gain = g_gain[kGpu], .grad_bias = g_norm_bias[kGpu]});
  }, "sum, sum of squares, bias and layer-norm gradients");
}

TEST_F(DeterminismTest, RowSumSquaresIsBitwiseRepeatable) {
  Pair x = Random({5, 100003}), y = Random({4096, 257});
  Pair a = Zeros({5}), b = Zeros({4096});
  ExpectRepeatable({a[kGpu], b[kGpu]}, [&] {
    gpu_->RowSumSquares({.in = x[kGpu], .out = a[kGpu]});
    gpu_->RowSumSquares({.in = y[kGpu], .out = b[kGpu]});
  }, "row sums of squares");
}

}  // namespace
}  // namespace smallem
