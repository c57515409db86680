// Forward results of every CPU op against plain, obviously-correct loops in
// double, on small odd shapes and on shapes big enough to take the threaded
// paths. Gradients are checked in op_gradient_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "engine/cpu/blas_core.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/exp.h"
#include "engine/cpu/gemm.h"
#include "engine/cpu/sqrt.h"
#include "tests/engine/cpu_op_test_util.h"
#include "tests/engine/test_cpu_backend.h"

namespace smallem {
namespace {

using testing::CpuOpTest;
using testing::ExpectClose;

TEST_F(CpuOpTest, AllocateReturnsZeroedAlignedMemory) {
  for (size_t bytes : {size_t{1}, size_t{100}, size_t{4096}, size_t{1} << 20}) {
    absl::StatusOr<void*> ptr = backend_.Allocate(bytes);
    ASSERT_TRUE(ptr.ok());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(*ptr) % 64, 0u);
    const auto* bytes_ptr = static_cast<const unsigned char*>(*ptr);
    for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(bytes_ptr[i], 0) << i;
    backend_.Free(*ptr);
  }
}

TEST_F(CpuOpTest, PeakMemoryIsTheHighWaterMarkOfLiveBytes) {
  CpuBackend backend(TestCpuOptions(2));
  void* a = *backend.Allocate(1000);
  void* b = *backend.Allocate(3000);
  EXPECT_EQ(backend.PeakMemoryBytes(), 4000u);
  backend.Free(b);
  void* c = *backend.Allocate(2000);
  EXPECT_EQ(backend.PeakMemoryBytes(), 4000u);
  void* d = *backend.Allocate(5000);
  EXPECT_EQ(backend.PeakMemoryBytes(), 8000u);
  for (void* ptr : {a, c, d}) backend.Free(ptr);
  backend.Free(nullptr);
}

TEST_F(CpuOpTest, DeviceClassNamesTheThreadCount) {
  EXPECT_EQ(backend_.Name(), "cpu");
  EXPECT_EQ(backend_.threads(), 2);
  EXPECT_EQ(backend_.DeviceClass().rfind("cpu-2t", 0), 0u) << backend_.DeviceClass();
  EXPECT_GE(CpuBackend().threads(), 1);
}

// The head's gradient Gᵀ·X at a large vocabulary goes to OpenBLAS only on
// its AVX-512 kernels; on its AVX2 ones oneDNN is faster (matmul.cc).
TEST_F(CpuOpTest, TallTransposedProductsGoToOpenBlasOnlyOnItsAvx512Kernels) {
  const cpu::GemmChoice rule;
  if (cpu::GemmLibrariesInUse(rule).size() < 2) {
    GTEST_SKIP() << "the rule needs both oneDNN and OpenBLAS in the build";
  }
  const bool avx512 = cpu::BlasCoreIsAvx512();
  EXPECT_EQ(cpu::GemmLibraryFor(rule, true, cpu::kTallTransposed, 128, 2048),
            avx512 ? cpu::GemmLibrary::kOpenBlas : cpu::GemmLibrary::kOneDnn)
      << CpuBackend::BlasCore();
  EXPECT_EQ(cpu::GemmLibraryFor(rule, true, cpu::kTallTransposed / 2, 128, 2048),
            cpu::GemmLibrary::kOneDnn);
  EXPECT_EQ(cpu::GemmLibraryFor(rule, false, cpu::kTallTransposed, 128, 2048),
            cpu::GemmLibrary::kOneDnn);
}

TEST_F(CpuOpTest, FillAndCopiesMoveExactBytes) {
  Tensor t = Zeros({3, 7});
  backend_.Fill(t, 2.5f);
  for (float x : Values(t)) EXPECT_EQ(x, 2.5f);
  Tensor ids = Zeros({4}, DType::kI32);
  backend_.Fill(ids, 7);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(ids.i32()[i], 7);

  std::vector<float> host(21), back(21);
  for (int i = 0; i < 21; ++i) host[i] = static_cast<float>(i) * 0.5f;
  backend_.CopyToDevice(t.data, host.data(), t.bytes());
  Tensor u = Zeros({3, 7});
  backend_.CopyOnDevice(u.data, t.data, t.bytes());
  backend_.CopyToHost(back.data(), u.data, u.bytes());
  EXPECT_EQ(back, host);
}

TEST_F(CpuOpTest, ExpAndSqrtMatchTheLibrary) {
  for (float x = -100.0f; x <= 88.0f; x += 0.01234f) {
    const double expected = std::exp(static_cast<double>(x));
    ASSERT_NEAR(cpu::Exp(x), expected, 3e-7 * expected + 1e-37) << x;
  }
  EXPECT_EQ(cpu::Exp(-1000.0f), 0.0f);
  EXPECT_EQ(cpu::Exp(0.0f), 1.0f);
  for (float x : {0.0f, 1e-30f, 1e-8f, 0.25f, 1.0f, 2.0f, 3.3e7f, 1e30f}) {
    EXPECT_NEAR(cpu::Sqrt(x), std::sqrt(x), 2.5e-7 * std::sqrt(x)) << x;
  }
}

// out[i] = alpha·op(a[i])·op(b[i]) + beta·out[i] in double.
std::vector<double> NaiveMatmul(const MatmulParams& p, const std::vector<float>& out0) {
  std::vector<double> out(out0.begin(), out0.end());
  for (int64_t i = 0; i < p.batch; ++i) {
    const float* a = p.a.f32() + i * p.stride_a;
    const float* b = p.b.f32() + i * p.stride_b;
    for (int64_t r = 0; r < p.m; ++r) {
      for (int64_t c = 0; c < p.n; ++c) {
        double sum = 0;
        for (int64_t k = 0; k < p.k; ++k) {
          const double av = p.trans_a ? a[k * p.m + r] : a[r * p.k + k];
          const double bv = p.trans_b ? b[c * p.k + k] : b[k * p.n + c];
          sum += av * bv;
        }
        double& o = out[i * p.stride_out + r * p.n + c];
        o = p.alpha * sum + (p.beta == 0 ? 0.0 : p.beta * o);
      }
    }
  }
  return out;
}

class MatmulTest : public CpuOpTest,
                   public ::testing::WithParamInterface<std::tuple<bool, bool>> {
 protected:
  void Check(int64_t m, int64_t n, int64_t k, int64_t batch, int64_t stride_a,
             int64_t stride_b, float alpha, float beta) {
    MatmulParams p;
    std::tie(p.trans_a, p.trans_b) = GetParam();
    p.m = m, p.n = n, p.k = k, p.batch = batch;
    p.stride_a = stride_a, p.stride_b = stride_b, p.stride_out = m * n;
    p.alpha = alpha, p.beta = beta;
    p.a = Random({(batch - 1) * stride_a + m * k});
    p.b = Random({(batch - 1) * stride_b + k * n});
    p.out = Random({batch, m, n});
    const std::vector<double> expected = NaiveMatmul(p, Values(p.out));
    backend_.Matmul(p);
    ExpectClose(expected, p.out, 1e-5, 1e-5 * k);
  }
};

TEST_P(MatmulTest, SingleProductMatchesNaive) { Check(5, 7, 11, 1, 0, 0, 1.0f, 0.0f); }

TEST_P(MatmulTest, AlphaScalesAndBetaAccumulates) {
  Check(5, 7, 11, 1, 0, 0, 0.7f, 0.3f);
  Check(5, 7, 11, 1, 0, 0, -1.5f, 1.0f);
}

TEST_P(MatmulTest, BatchWithPaddedStridesAndBroadcast) {
  Check(5, 7, 11, 3, 5 * 11 + 2, 0, 1.0f, 0.0f);  // b broadcast
  Check(5, 7, 11, 3, 0, 7 * 11 + 3, 0.5f, 0.5f);  // a broadcast
}

TEST_P(MatmulTest, LargeProductsSplitAcrossThreads) {
  Check(301, 67, 53, 1, 0, 0, 1.0f, 0.0f);   // split along rows
  Check(19, 301, 61, 1, 0, 0, 1.0f, 0.25f);  // split along columns
  Check(64, 64, 40, 5, 64 * 40, 64 * 40, 1.0f, 0.0f);
}

INSTANTIATE_TEST_SUITE_P(AllTransposes, MatmulTest,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()));

TEST_F(CpuOpTest, MatmulWithEmptyInnerDimensionScalesByBeta) {
  MatmulParams p;
  p.m = 3, p.n = 4, p.k = 0, p.beta = 0.5f;
  p.a = Zeros({1}), p.b = Zeros({1}), p.out = Random({3, 4});
  std::vector<double> expected;
  for (float x : Values(p.out)) expected.push_back(0.5 * x);
  backend_.Matmul(p);
  ExpectClose(expected, p.out);
}

TEST_F(CpuOpTest, AddAndMulAreElementwiseAndMayAlias) {
  for (int64_t n : {int64_t{35}, int64_t{20011}}) {
    Tensor a = Random({n}), b = Random({n}), out = Zeros({n});
    std::vector<double> sum, product;
    for (int64_t i = 0; i < n; ++i) {
      sum.push_back(double{a.f32()[i]} + b.f32()[i]);
      product.push_back(double{a.f32()[i]} * b.f32()[i]);
    }
    backend_.Add({a, b, out});
    ExpectClose(sum, out);
    backend_.Mul({a, b, out});
    ExpectClose(product, out);
    backend_.Add({a, b, a});  // in place
    ExpectClose(sum, a);
  }
}

double NaiveGelu(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
double NaiveSilu(double x) { return x / (1 + std::exp(-x)); }

TEST_F(CpuOpTest, GeluIsTheTanhApproximation) {
  for (int64_t n : {int64_t{35}, int64_t{20011}}) {
    Tensor in = Random({n}, -6, 6), out = Zeros({n});
    in.f32()[0] = 0, in.f32()[1] = -30, in.f32()[2] = 30, in.f32()[3] = 1e-4f;
    std::vector<double> expected;
    for (float x : Values(in)) expected.push_back(NaiveGelu(x));
    backend_.GeluForward({in, out});
    ExpectClose(expected, out, 1e-5, 1e-7);
  }
}

TEST_F(CpuOpTest, SiluAndSwiGluMatchNaive) {
  for (int64_t n : {int64_t{35}, int64_t{20011}}) {
    Tensor gate = Random({n}, -8, 8), up = Random({n}), out = Zeros({n});
    gate.f32()[0] = -100, gate.f32()[1] = 100, gate.f32()[2] = 0;
    std::vector<double> silu, swiglu;
    for (int64_t i = 0; i < n; ++i) {
      silu.push_back(NaiveSilu(gate.f32()[i]));
      swiglu.push_back(NaiveSilu(gate.f32()[i]) * up.f32()[i]);
    }
    backend_.SiluForward({gate, out});
    ExpectClose(silu, out, 1e-5, 1e-7);
    backend_.SwiGluForward({gate, up, out});
    ExpectClose(swiglu, out, 1e-5, 1e-7);
  }
}

// SwiGLU's backward with overwrite writes both gradients and reads neither:
// on gradients full of NaN it gives the bits of adding into zeros.
TEST_F(CpuOpTest, SwiGluBackwardOverwriteWritesBothGradients) {
  for (int64_t n : {int64_t{35}, int64_t{20011}}) {
    Tensor gate = Random({n}, -8, 8), up = Random({n}), g = Random({n});
    Tensor add_gate = Zeros({n}), add_up = Zeros({n});
    Tensor write_gate = Zeros({n}), write_up = Zeros({n});
    backend_.Fill(write_gate, std::numeric_limits<float>::quiet_NaN());
    backend_.Fill(write_up, std::numeric_limits<float>::quiet_NaN());
    backend_.SwiGluBackward({.gate = gate, .up = up, .grad_out = g, .grad_gate = add_gate,
                             .grad_up = add_up});
    backend_.SwiGluBackward({.gate = gate, .up = up, .grad_out = g, .grad_gate = write_gate,
                             .grad_up = write_up, .overwrite = true});
    EXPECT_EQ(Values(write_gate), Values(add_gate)) << n;
    EXPECT_EQ(Values(write_up), Values(add_up)) << n;
  }
}

TEST_F(CpuOpTest, BiasAddAndBiasBackwardBroadcastOverRows) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{5, 7}, {67, 257}}) {
    Tensor x = Random({rows, cols}), bias = Random({cols});
    Tensor grad_bias = Random({cols});
    std::vector<double> added, bias_grad;
    for (int64_t c = 0; c < cols; ++c) {
      double column = grad_bias.f32()[c];
      for (int64_t r = 0; r < rows; ++r) column += x.f32()[r * cols + c];
      bias_grad.push_back(column);
    }
    for (int64_t i = 0; i < rows * cols; ++i) {
      added.push_back(double{x.f32()[i]} + bias.f32()[i % cols]);
    }
    backend_.BiasBackward({x, grad_bias});  // before x changes
    backend_.BiasAdd({x, bias});
    ExpectClose(added, x);
    ExpectClose(bias_grad, grad_bias, 1e-5, 1e-5);
  }
}

TEST_F(CpuOpTest, LayerNormMatchesNaiveAndSavesMeanAndRstd) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{5, 7}, {67, 257}}) {
    for (bool with_bias : {true, false}) {
      NormParams p;
      p.x = Random({rows, cols}, -2, 3);
      p.gain = Random({cols}), p.bias = with_bias ? Random({cols}) : Tensor{};
      p.out = Zeros({rows, cols}), p.mean = Zeros({rows}), p.rstd = Zeros({rows});
      std::vector<double> out, mean, rstd;
      for (int64_t r = 0; r < rows; ++r) {
        const float* x = p.x.f32() + r * cols;
        double mu = 0, var = 0;
        for (int64_t c = 0; c < cols; ++c) mu += x[c] / double(cols);
        for (int64_t c = 0; c < cols; ++c) var += (x[c] - mu) * (x[c] - mu) / cols;
        const double rs = 1 / std::sqrt(var + 1e-5);
        for (int64_t c = 0; c < cols; ++c) {
          out.push_back((x[c] - mu) * rs * p.gain.f32()[c] +
                        (with_bias ? p.bias.f32()[c] : 0.0));
        }
        mean.push_back(mu);
        rstd.push_back(rs);
      }
      backend_.LayerNormForward(p);
      ExpectClose(out, p.out, 1e-5, 1e-5);
      ExpectClose(mean, p.mean, 1e-5, 1e-6);
      ExpectClose(rstd, p.rstd, 1e-5);
    }
  }
}

TEST_F(CpuOpTest, RmsNormMatchesNaiveAndSavesRstd) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{5, 7}, {67, 257}}) {
    NormParams p;
    p.x = Random({rows, cols}, -2, 3), p.gain = Random({cols});
    p.out = Zeros({rows, cols}), p.rstd = Zeros({rows});
    std::vector<double> out, rstd;
    for (int64_t r = 0; r < rows; ++r) {
      const float* x = p.x.f32() + r * cols;
      double squares = 0;
      for (int64_t c = 0; c < cols; ++c) squares += double{x[c]} * x[c];
      const double rs = 1 / std::sqrt(squares / cols + 1e-5);
      for (int64_t c = 0; c < cols; ++c) out.push_back(x[c] * rs * p.gain.f32()[c]);
      rstd.push_back(rs);
    }
    backend_.RmsNormForward(p);
    ExpectClose(out, p.out, 1e-5, 1e-5);
    ExpectClose(rstd, p.rstd, 1e-5);
  }
}

// The fused residual add must not change a bit of what Add then the norm
// compute (the model's results depend on it), in place or not.
TEST_F(CpuOpTest, NormWithResidualEqualsAddThenNormBitForBit) {
  auto same_bits = [](const Tensor& want, const Tensor& got, const std::string& what) {
    ASSERT_EQ(want.numel(), got.numel()) << what;
    EXPECT_EQ(std::memcmp(want.data, got.data, want.bytes()), 0) << what;
  };
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{5, 7}, {67, 257}, {300, 129}}) {
    for (bool layer : {true, false}) {
      for (bool in_place : {false, true}) {
        const std::string what = std::string(layer ? "layer_norm " : "rms_norm ") +
                                 std::to_string(rows) + "x" + std::to_string(cols) +
                                 (in_place ? " in place" : "");
        Tensor x = Random({rows, cols}, -2, 3), residual = Random({rows, cols});
        Tensor gain = Random({cols}), bias = layer ? Random({cols}) : Tensor{};
        // Separate: sum = Add(x, residual), then the norm of sum.
        Tensor sum = Zeros({rows, cols});
        backend_.Add({.a = x, .b = residual, .out = sum});
        NormParams separate{.x = sum, .gain = gain, .bias = bias, .out = Zeros({rows, cols}),
                            .mean = layer ? Zeros({rows}) : Tensor{}, .rstd = Zeros({rows})};
        // Fused, writing the sum over a copy of x when in place.
        Tensor fused_x = FromValues({rows, cols}, Values(x));
        NormParams fused{.x = fused_x, .gain = gain, .bias = bias, .out = Zeros({rows, cols}),
                         .mean = layer ? Zeros({rows}) : Tensor{}, .rstd = Zeros({rows}),
                         .residual = residual,
                         .sum = in_place ? fused_x : Zeros({rows, cols})};
        if (layer) {
          backend_.LayerNormForward(separate);
          backend_.LayerNormForward(fused);
        } else {
          backend_.RmsNormForward(separate);
          backend_.RmsNormForward(fused);
        }
        same_bits(sum, fused.sum, what + ": sum");
        same_bits(separate.out, fused.out, what + ": out");
        same_bits(separate.rstd, fused.rstd, what + ": rstd");
        if (layer) same_bits(separate.mean, fused.mean, what + ": mean");
      }
    }
  }
}

// cos/sin tables (positions, D/2) as the model builds them on the host.
void FillRopeTables(Tensor cos, Tensor sin, int64_t head_dim) {
  const int64_t half = head_dim / 2;
  for (int64_t m = 0; m < cos.shape[0]; ++m) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = m * std::pow(10000.0, -2.0 * i / head_dim);
      cos.f32()[m * half + i] = static_cast<float>(std::cos(angle));
      sin.f32()[m * half + i] = static_cast<float>(std::sin(angle));
    }
  }
}

TEST_F(CpuOpTest, RopeRotatesAdjacentPairsAndPassesTheRestThrough) {
  // B = 2, T = 5, two heads of D = 6 rotated, 3 channels passed through.
  const int64_t b = 2, t = 5, d = 6, width = 15, offset = 3;
  RopeParams p;
  p.x = Random({b, t, width}), p.out = Zeros({b, t, width});
  p.cos = Zeros({t + offset, d / 2}), p.sin = Zeros({t + offset, d / 2});
  FillRopeTables(p.cos, p.sin, d);
  p.time = t, p.head_dim = d, p.rotate_channels = 2 * d, p.position_offset = offset;
  std::vector<double> expected;
  for (int64_t row = 0; row < b * t; ++row) {
    const double m = row % t + offset;
    const float* x = p.x.f32() + row * width;
    for (int64_t c = 0; c < width; ++c) {
      if (c >= p.rotate_channels) {
        expected.push_back(x[c]);
        continue;
      }
      const int64_t i = (c % d) / 2;
      const double angle = m * std::pow(10000.0, -2.0 * i / d);
      const double x0 = x[c - c % 2], x1 = x[c - c % 2 + 1];
      expected.push_back(c % 2 == 0 ? x0 * std::cos(angle) - x1 * std::sin(angle)
                                    : x0 * std::sin(angle) + x1 * std::cos(angle));
    }
  }
  backend_.RopeForward(p);
  ExpectClose(expected, p.out, 1e-5, 1e-6);
  p.out = p.x;  // in place gives the same numbers
  backend_.RopeForward(p);
  ExpectClose(expected, p.x, 1e-5, 1e-6);
}

TEST_F(CpuOpTest, RopeBackwardUndoesTheForwardRotation) {
  const int64_t b = 3, t = 50, d = 8, width = 136;
  RopeParams p;
  p.x = Random({b, t, width}), p.out = Zeros({b, t, width});
  p.cos = Zeros({t, d / 2}), p.sin = Zeros({t, d / 2});
  FillRopeTables(p.cos, p.sin, d);
  p.time = t, p.head_dim = d, p.rotate_channels = 128;
  backend_.RopeForward(p);
  // A rotation is orthogonal: rotating back (into zeros) returns x.
  Tensor back = Zeros({b, t, width});
  backend_.RopeBackward({p.out, back, p.cos, p.sin, t, d, 128, 0});
  std::vector<double> expected(p.x.f32(), p.x.f32() + p.x.numel());
  ExpectClose(expected, back, 1e-5, 1e-6);
  // Overwriting a gradient full of NaN gives the bits of adding into zeros.
  Tensor written = Zeros({b, t, width});
  backend_.Fill(written, std::numeric_limits<float>::quiet_NaN());
  backend_.RopeBackward({.grad_out = p.out, .grad_in = written, .cos = p.cos, .sin = p.sin,
                         .time = t, .head_dim = d, .rotate_channels = 128, .overwrite = true});
  EXPECT_EQ(Values(written), Values(back));
}

// Naive causal attention in double: out (B, T, C) and lse (B, H, T).
void NaiveAttention(const Tensor& qkv, int64_t b_size, int64_t t_size, int64_t heads,
                    int64_t d, std::vector<double>* out, std::vector<double>* lse) {
  const int64_t c = heads * d;
  out->assign(b_size * t_size * c, 0.0);
  lse->assign(b_size * heads * t_size, 0.0);
  const float* x = qkv.f32();
  for (int64_t b = 0; b < b_size; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t t = 0; t < t_size; ++t) {
        const float* q = x + (b * t_size + t) * 3 * c + h * d;
        std::vector<double> scores(t + 1);
        double max = -1e300;
        for (int64_t j = 0; j <= t; ++j) {
          const float* k = x + (b * t_size + j) * 3 * c + c + h * d;
          double dot = 0;
          for (int64_t i = 0; i < d; ++i) dot += double{q[i]} * k[i];
          scores[j] = dot / std::sqrt(double(d));
          max = std::max(max, scores[j]);
        }
        double sum = 0;
        for (double s : scores) sum += std::exp(s - max);
        (*lse)[(b * heads + h) * t_size + t] = max + std::log(sum);
        for (int64_t j = 0; j <= t; ++j) {
          const float* v = x + (b * t_size + j) * 3 * c + 2 * c + h * d;
          const double prob = std::exp(scores[j] - max) / sum;
          for (int64_t i = 0; i < d; ++i) {
            (*out)[(b * t_size + t) * c + h * d + i] += prob * v[i];
          }
        }
      }
    }
  }
}

// (B, T, H, D): small odd shapes, then T across several query blocks. On
// AVX-512 the register tiles (engine/cpu/attention_tiles.cc) take 16
// queries a block: T = 33 and D = 24 leave ragged blocks and padded rows,
// T = 33 is too short for them to keep the softmax and T = 256 splits their
// backward into chunks.
constexpr std::tuple<int64_t, int64_t, int64_t, int64_t> kAttentionShapes[] = {
    {2, 5, 3, 4}, {1, 150, 2, 8}, {2, 128, 4, 32}, {1, 33, 2, 24}, {1, 256, 1, 32}};

TEST_F(CpuOpTest, AttentionMatchesNaiveSoftmaxAttention) {
  for (auto [b, t, h, d] : kAttentionShapes) {
    AttentionParams p;
    p.qkv = Random({b, t, 3 * h * d}, -2, 2);
    p.out = Zeros({b, t, h * d}), p.lse = Zeros({b, h, t});
    p.batch = b, p.time = t, p.heads = h, p.head_dim = d;
    std::vector<double> out, lse;
    NaiveAttention(p.qkv, b, t, h, d, &out, &lse);
    backend_.AttentionForward(p);
    ExpectClose(out, p.out, 1e-5, 2e-6);
    ExpectClose(lse, p.lse, 1e-5, 1e-6);
  }
}

// The softmax kept for the backward (AttentionParams::probs) changes
// nothing but the work: the forward's output and lse are the same bits, and
// the backward's gradients those of recomputing it, within rounding.
TEST_F(CpuOpTest, AttentionSavedSoftmaxGivesTheRecomputedResults) {
  for (auto [b, t, h, d] : kAttentionShapes) {
    const int64_t c = h * d;
    AttentionParams p;
    p.qkv = Random({b, t, 3 * c}, -2, 2);
    p.out = Zeros({b, t, c}), p.lse = Zeros({b, h, t});
    p.batch = b, p.time = t, p.heads = h, p.head_dim = d;
    backend_.AttentionForward(p);
    const std::vector<float> out = Values(p.out), lse = Values(p.lse);
    AttentionParams saving = p;
    saving.out = Zeros({b, t, c}), saving.lse = Zeros({b, h, t});
    saving.probs = Random({b, h, t, t});  // stale values must not leak
    backend_.AttentionForward(saving);
    EXPECT_EQ(Values(saving.out), out);
    EXPECT_EQ(Values(saving.lse), lse);

    AttentionBackwardParams back{.qkv = p.qkv, .out = p.out, .lse = p.lse,
                                 .grad_out = Random({b, t, c}), .grad_qkv = Zeros({b, t, 3 * c}),
                                 .batch = b, .time = t, .heads = h, .head_dim = d};
    backend_.AttentionBackward(back);
    AttentionBackwardParams from_saved = back;
    from_saved.probs = saving.probs;
    from_saved.grad_qkv = Zeros({b, t, 3 * c});
    backend_.AttentionBackward(from_saved);
    const std::vector<float> recomputed = Values(back.grad_qkv);
    std::vector<double> expected(recomputed.begin(), recomputed.end());
    ExpectClose(expected, from_saved.grad_qkv, 1e-5, 1e-6);
  }
}

// The backward's overwrite mode writes every element of grad_qkv and reads
// none: on a gradient full of NaN it gives the same bits as adding into
// zeros, with the softmax recomputed or kept.
TEST_F(CpuOpTest, AttentionBackwardOverwriteWritesEveryGradient) {
  for (auto [b, t, h, d] : kAttentionShapes) {
    const int64_t c = h * d;
    AttentionParams p{.qkv = Random({b, t, 3 * c}, -2, 2), .out = Zeros({b, t, c}),
                      .lse = Zeros({b, h, t}), .probs = Zeros({b, h, t, t}), .batch = b,
                      .time = t, .heads = h, .head_dim = d};
    backend_.AttentionForward(p);
    for (const bool saved : {false, true}) {
      AttentionBackwardParams add{.qkv = p.qkv, .out = p.out, .lse = p.lse,
                                  .probs = saved ? p.probs : Tensor{},
                                  .grad_out = Random({b, t, c}), .grad_qkv = Zeros({b, t, 3 * c}),
                                  .batch = b, .time = t, .heads = h, .head_dim = d};
      backend_.AttentionBackward(add);
      AttentionBackwardParams write = add;
      write.grad_qkv = Zeros({b, t, 3 * c});
      backend_.Fill(write.grad_qkv, std::numeric_limits<float>::quiet_NaN());
      write.overwrite = true;
      backend_.AttentionBackward(write);
      EXPECT_EQ(Values(write.grad_qkv), Values(add.grad_qkv))
          << "B=" << b << " T=" << t << " H=" << h << " D=" << d
          << (saved ? " kept" : " recomputed");
    }
  }
}

TEST_F(CpuOpTest, AttentionIgnoresFuturePositions) {
  const int64_t b = 2, t = 70, h = 3, d = 4, c = h * d;
  AttentionParams p;
  p.qkv = Random({b, t, 3 * c}), p.out = Zeros({b, t, c}), p.lse = Zeros({b, h, t});
  p.batch = b, p.time = t, p.heads = h, p.head_dim = d;
  backend_.AttentionForward(p);
  const std::vector<float> before = Values(p.out);
  const int64_t changed = 66;  // in the second query block
  for (int64_t row = 0; row < b; ++row) {
    float* x = p.qkv.f32() + (row * t + changed) * 3 * c;
    for (int64_t i = 0; i < 3 * c; ++i) x[i] += 1.0f;
  }
  backend_.AttentionForward(p);
  const std::vector<float> after = Values(p.out);
  for (int64_t row = 0; row < b; ++row) {
    for (int64_t tt = 0; tt < t; ++tt) {
      const bool same = std::memcmp(&before[(row * t + tt) * c], &after[(row * t + tt) * c],
                                    c * sizeof(float)) == 0;
      EXPECT_EQ(same, tt < changed) << "batch " << row << " position " << tt;
    }
  }
}

TEST_F(CpuOpTest, EmbeddingGathersRows) {
  const int64_t vocab = 11, cols = 7, n = 9;
  Tensor table = Random({vocab, cols}), ids = Ids({n}, vocab), out = Zeros({n, cols});
  backend_.EmbeddingForward({ids, table, out});
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < cols; ++c) {
      EXPECT_EQ(out.f32()[i * cols + c], table.f32()[ids.i32()[i] * cols + c]);
    }
  }
}

TEST_F(CpuOpTest, EmbeddingBackwardIsDeterministicWithRepeatedIds) {
  const int64_t vocab = 13, cols = 300, n = 400;  // ~30 repeats of each id
  Tensor ids = Ids({n}, vocab), grad_out = Random({n, cols});
  std::vector<double> expected(vocab * cols, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < cols; ++c) {
      expected[ids.i32()[i] * cols + c] += grad_out.f32()[i * cols + c];
    }
  }
  Tensor first = Zeros({vocab, cols});
  backend_.EmbeddingBackward({ids, grad_out, first});
  ExpectClose(expected, first, 1e-5, 1e-5);
  CpuBackend one_thread(TestCpuOptions(1));
  for (CpuBackend* backend : {&backend_, &one_thread}) {
    for (int repeat = 0; repeat < 3; ++repeat) {
      Tensor again = Zeros({vocab, cols});
      backend->EmbeddingBackward({ids, grad_out, again});
      ASSERT_EQ(std::memcmp(again.data, first.data, first.bytes()), 0);
    }
  }
}

TEST_F(CpuOpTest, CrossEntropyMatchesNaive) {
  for (auto [rows, vocab] : {std::pair<int64_t, int64_t>{5, 7}, {40, 501}}) {
    CrossEntropyParams p;
    p.logits = Random({rows, vocab}, -5, 5), p.targets = Ids({rows}, vocab);
    p.losses = Zeros({rows}), p.lse = Zeros({rows});
    std::vector<double> losses, lse, grad;
    Tensor grad_losses = Random({rows});
    Tensor grad_logits = Random({rows, vocab});
    for (int64_t r = 0; r < rows; ++r) {
      const float* x = p.logits.f32() + r * vocab;
      double sum = 0;
      for (int64_t v = 0; v < vocab; ++v) sum += std::exp(double{x[v]});
      lse.push_back(std::log(sum));
      losses.push_back(std::log(sum) - x[p.targets.i32()[r]]);
      for (int64_t v = 0; v < vocab; ++v) {
        const double onehot = v == p.targets.i32()[r] ? 1 : 0;
        grad.push_back(grad_logits.f32()[r * vocab + v] +
                       (std::exp(x[v]) / sum - onehot) * grad_losses.f32()[r]);
      }
    }
    backend_.CrossEntropyForward(p);
    ExpectClose(losses, p.losses, 1e-5, 1e-6);
    ExpectClose(lse, p.lse, 1e-5, 1e-6);
    backend_.CrossEntropyBackward({p.logits, p.targets, p.lse, grad_losses, grad_logits});
    ExpectClose(grad, grad_logits, 1e-5, 1e-6);
  }
}

// The loss's backward in place: the logits become their own gradient, the
// same bits as an accumulation into zeros.
TEST_F(CpuOpTest, CrossEntropyBackwardOverwritesTheLogitsInPlace) {
  const int64_t rows = 9, vocab = 301;
  CrossEntropyParams p{.logits = Random({rows, vocab}, -5, 5), .targets = Ids({rows}, vocab),
                       .losses = Zeros({rows}), .lse = Zeros({rows})};
  backend_.CrossEntropyForward(p);
  Tensor grad_losses = Random({rows});
  Tensor accumulated = Zeros({rows, vocab});
  backend_.CrossEntropyBackward({.logits = p.logits, .targets = p.targets, .lse = p.lse,
                                 .grad_losses = grad_losses, .grad_logits = accumulated});
  Tensor stale = Random({rows, vocab});  // overwrite ignores what was there
  backend_.CrossEntropyBackward({.logits = p.logits, .targets = p.targets, .lse = p.lse,
                                 .grad_losses = grad_losses, .grad_logits = stale,
                                 .overwrite = true});
  EXPECT_EQ(Values(stale), Values(accumulated));
  backend_.CrossEntropyBackward({.logits = p.logits, .targets = p.targets, .lse = p.lse,
                                 .grad_losses = grad_losses, .grad_logits = p.logits,
                                 .overwrite = true});
  EXPECT_EQ(Values(p.logits), Values(accumulated));
}

TEST_F(CpuOpTest, SumAndSumSquaresAccumulateInDouble) {
  for (int64_t n : {int64_t{1}, int64_t{35}, int64_t{100003}}) {
    Tensor in = Random({n}), out = FromValues({1}, {10.0f});
    double sum = 0, squares = 0;
    for (float x : Values(in)) sum += x, squares += double{x} * x;
    backend_.Sum({in, out, /*accumulate=*/false});
    EXPECT_NEAR(out.f32()[0], sum, 1e-6 * std::abs(sum) + 1e-6);
    backend_.SumSquares({in, out, /*accumulate=*/true});
    EXPECT_NEAR(out.f32()[0], sum + squares, 1e-6 * (std::abs(sum) + squares));
    // Fixed chunks: the same bits whatever the thread count.
    CpuBackend one_thread(TestCpuOptions(1));
    Tensor single = Zeros({1});
    one_thread.SumSquares({in, single, false});
    backend_.SumSquares({in, out, false});
    EXPECT_EQ(single.f32()[0], out.f32()[0]);
  }
}

// One AdamW step by hand, in double.
std::vector<double> HandAdamW(const std::vector<float>& param, const std::vector<float>& grad,
                              std::vector<double>& m, std::vector<double>& v,
                              const AdamWParams& p, double clip) {
  std::vector<double> out;
  for (size_t i = 0; i < param.size(); ++i) {
    const double g = grad[i] * clip;
    m[i] = p.beta1 * m[i] + (1 - p.beta1) * g;
    v[i] = p.beta2 * v[i] + (1 - p.beta2) * g * g;
    const double m_hat = m[i] / (1 - std::pow(double{p.beta1}, double(p.step)));
    const double v_hat = v[i] / (1 - std::pow(double{p.beta2}, double(p.step)));
    out.push_back(param[i] - p.lr * p.weight_decay * param[i] -
                  p.lr * m_hat / (std::sqrt(v_hat) + p.eps));
  }
  return out;
}

TEST_F(CpuOpTest, AdamWTakesTheBiasCorrectedDecoupledStep) {
  const int64_t n = 37;
  AdamWParams p;
  p.param = Random({n}), p.grad = Random({n}), p.m = Zeros({n}), p.v = Zeros({n});
  p.lr = 0.01f, p.weight_decay = 0.1f;
  std::vector<double> m(n, 0.0), v(n, 0.0);
  for (int64_t step = 1; step <= 3; ++step) {
    p.step = step;
    FillRandom(p.grad);
    const std::vector<double> expected =
        HandAdamW(Values(p.param), Values(p.grad), m, v, p, 1.0);
    backend_.AdamW(p);
    ExpectClose(expected, p.param, 1e-6, 1e-7);
    ExpectClose(m, p.m, 1e-6, 1e-8);
    ExpectClose(v, p.v, 1e-6, 1e-9);
  }
  // The first step moves each weight by about lr (m̂/√v̂ = ±1).
  p.param = Zeros({n}), p.m = Zeros({n}), p.v = Zeros({n}), p.step = 1;
  backend_.AdamW(p);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_NEAR(std::abs(p.param.f32()[i]), 0.01f, 1e-6f);
  }
}

TEST_F(CpuOpTest, AdamWClipsByTheGlobalNormReadFromTheTensor) {
  const int64_t n = 20011;
  AdamWParams p;
  p.param = Random({n}), p.grad = Random({n}), p.m = Random({n}), p.v = Random({n}, 0, 1);
  p.lr = 0.001f, p.weight_decay = 0.0f, p.step = 5, p.max_grad_norm = 1.0f;
  p.grad_norm_sq = FromValues({1}, {16.0f});  // norm 4: scale 1/4
  std::vector<double> m(p.m.f32(), p.m.f32() + n), v(p.v.f32(), p.v.f32() + n);
  std::vector<double> expected = HandAdamW(Values(p.param), Values(p.grad), m, v, p, 0.25);
  backend_.AdamW(p);
  ExpectClose(expected, p.param, 1e-6, 1e-7);
  ExpectClose(m, p.m, 1e-6, 1e-8);
  // Below the threshold the gradient is left alone.
  p.grad_norm_sq.f32()[0] = 0.25f;
  expected = HandAdamW(Values(p.param), Values(p.grad), m, v, p, 1.0);
  backend_.AdamW(p);
  ExpectClose(expected, p.param, 1e-6, 1e-7);
  ExpectClose(v, p.v, 1e-6, 1e-9);
}

}  // namespace
}  // namespace smallem
