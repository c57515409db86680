// kernels/*.cu on the emulated device, against float64 references written
// here from the launchers' contracts (kernels/kernels.h): every case runs
// under two thread schedules that must agree bit for bit, with device memory
// under AddressSanitizer and barriers and warp operations checked. Shapes are
// odd on purpose (rows that do not fill a warp or a block, a last block
// partly out of range).
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/kernels.h"
#include "tests/emulator/emulated_device.h"

namespace smallem::emu {
namespace {

using namespace ::smallem::cuda;

std::vector<float> Random(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

void ExpectClose(const std::vector<float>& got, const std::vector<double>& want, double rel) {
  ASSERT_EQ(got.size(), want.size());
  double scale = 0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], rel * (std::abs(want[i]) + 1e-3 * scale + 1e-30)) << "at " << i;
  }
}

class EmulatedKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override { ResetDevice(); }
};

TEST_F(EmulatedKernelsTest, RmsNormForwardAndBackwardMatchTheDefinition) {
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{9, 70}, {1, 5}, {37, 129}}) {
    SCOPED_TRACE(testing::Message() << rows << "x" << cols);
    const auto x = Random(rows * cols, 1), gain = Random(cols, 2), grad = Random(rows * cols, 3);
    DeviceBuffer<float> dx(x), dgain(gain), dgrad(grad), out(rows * cols), rstd(rows);
    DeviceBuffer<float> grad_x(rows * cols), grad_gain(cols);
    DeviceBuffer<float> scratch(RmsNormBackwardScratchFloats(rows, cols));
    const auto result = UnderTwoSchedules([&] {
      EXPECT_EQ(LaunchRmsNormForward({dx.get()}, {}, dgain.get(), {}, {out.get()}, rstd.get(),
                                     rows, cols, 1e-5f, nullptr),
                cudaSuccess);
      cudaMemset(grad_x.get(), 0, rows * cols * sizeof(float));
      cudaMemset(grad_gain.get(), 0, cols * sizeof(float));
      EXPECT_EQ(LaunchRmsNormBackward({dx.get()}, dgain.get(), rstd.get(), {dgrad.get()},
                                      {grad_x.get()}, grad_gain.get(), rows, cols,
                                      scratch.get(), nullptr),
                cudaSuccess);
      std::vector<float> all = out.Download();
      for (float v : grad_x.Download()) all.push_back(v);
      for (float v : grad_gain.Download()) all.push_back(v);
      return all;
    });
    std::vector<double> want(rows * cols), want_gx(rows * cols), want_gg(cols, 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      double squares = 0, dot = 0;
      for (int64_t c = 0; c < cols; ++c) squares += double{x[r * cols + c]} * x[r * cols + c];
      const double rs = 1.0 / std::sqrt(squares / cols + 1e-5);
      for (int64_t c = 0; c < cols; ++c) {
        want[r * cols + c] = x[r * cols + c] * rs * gain[c];
        dot += double{grad[r * cols + c]} * gain[c] * x[r * cols + c] * rs;
        want_gg[c] += double{grad[r * cols + c]} * x[r * cols + c] * rs;
      }
      for (int64_t c = 0; c < cols; ++c) {
        want_gx[r * cols + c] =
            rs * (grad[r * cols + c] * gain[c] - x[r * cols + c] * rs * dot / cols);
      }
    }
    want.insert(want.end(), want_gx.begin(), want_gx.end());
    want.insert(want.end(), want_gg.begin(), want_gg.end());
    ExpectClose(result, want, 1e-4);
  }
}

TEST_F(EmulatedKernelsTest, LayerNormForwardWithResidualMatchesTheDefinition) {
  const int64_t rows = 11, cols = 45;
  const auto x = Random(rows * cols, 4), residual = Random(rows * cols, 5);
  const auto gain = Random(cols, 6), bias = Random(cols, 7);
  DeviceBuffer<float> dx(x), dres(residual), dgain(gain), dbias(bias);
  DeviceBuffer<float> sum(rows * cols), out(rows * cols), mean(rows), rstd(rows);
  const auto result = UnderTwoSchedules([&] {
    EXPECT_EQ(LaunchLayerNormForward({dx.get()}, {dres.get()}, dgain.get(), dbias.get(),
                                     {sum.get()}, {out.get()}, mean.get(), rstd.get(), rows,
                                     cols, 1e-5f, nullptr),
              cudaSuccess);
    return out.Download();
  });
  std::vector<double> want(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    double m = 0, v = 0;
    for (int64_t c = 0; c < cols; ++c) m += double{x[r * cols + c] + residual[r * cols + c]};
    m /= cols;
    for (int64_t c = 0; c < cols; ++c) {
      const double d = double{x[r * cols + c] + residual[r * cols + c]} - m;
      v += d * d;
    }
    const double rs = 1.0 / std::sqrt(v / cols + 1e-5);
    for (int64_t c = 0; c < cols; ++c) {
      want[r * cols + c] =
          (double{x[r * cols + c] + residual[r * cols + c]} - m) * rs * gain[c] + bias[c];
    }
  }
  ExpectClose(result, want, 1e-4);
}

TEST_F(EmulatedKernelsTest, ReduceSumsInAFixedTreeOverManyBlocks) {
  for (const int64_t count : {int64_t{1}, int64_t{1000}, int64_t{100003}}) {
    SCOPED_TRACE(count);
    const auto in = Random(count, 8);
    DeviceBuffer<float> din(in), out(2), scratch(std::max<size_t>(ReduceScratchFloats(count), 1));
    const auto result = UnderTwoSchedules([&] {
      EXPECT_EQ(LaunchReduce(din.get(), count, ReduceKind::kSum, false, out.get(), scratch.get(),
                             nullptr),
                cudaSuccess);
      EXPECT_EQ(LaunchReduce(din.get(), count, ReduceKind::kSumSquares, false, out.get() + 1,
                             scratch.get(), nullptr),
                cudaSuccess);
      return out.Download();
    });
    double sum = 0, squares = 0;
    for (float v : in) sum += v, squares += double{v} * v;
    EXPECT_EQ(result[0], static_cast<float>(sum));
    EXPECT_EQ(result[1], static_cast<float>(squares));
  }
}

TEST_F(EmulatedKernelsTest, CrossEntropyForwardAndBackwardMatchTheSoftmax) {
  const int64_t rows = 7, vocab = 300;
  const auto logits = Random(rows * vocab, 9, 3.0f), grad_losses = Random(rows, 10);
  std::vector<int32_t> targets(rows);
  for (int64_t r = 0; r < rows; ++r) targets[r] = static_cast<int32_t>((r * 97 + 5) % vocab);
  DeviceBuffer<float> dlogits(logits), dgl(grad_losses), losses(rows), lse(rows);
  DeviceBuffer<float> grad(rows * vocab);
  DeviceBuffer<int32_t> dtargets(targets);
  const auto result = UnderTwoSchedules([&] {
    EXPECT_EQ(LaunchCrossEntropyForward(dlogits.get(), dtargets.get(), losses.get(), lse.get(),
                                        rows, vocab, nullptr),
              cudaSuccess);
    EXPECT_EQ(LaunchCrossEntropyBackward(dlogits.get(), dtargets.get(), lse.get(), dgl.get(),
                                         {grad.get()}, rows, vocab, true, nullptr),
              cudaSuccess);
    std::vector<float> all = losses.Download();
    for (float v : grad.Download()) all.push_back(v);
    return all;
  });
  std::vector<double> want(rows), want_grad(rows * vocab);
  for (int64_t r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0;
    for (int64_t v = 0; v < vocab; ++v) m = std::max(m, double{logits[r * vocab + v]});
    for (int64_t v = 0; v < vocab; ++v) s += std::exp(logits[r * vocab + v] - m);
    const double row_lse = m + std::log(s);
    want[r] = row_lse - logits[r * vocab + targets[r]];
    for (int64_t v = 0; v < vocab; ++v) {
      want_grad[r * vocab + v] =
          (std::exp(logits[r * vocab + v] - row_lse) - (v == targets[r])) * grad_losses[r];
    }
  }
  want.insert(want.end(), want_grad.begin(), want_grad.end());
  ExpectClose(result, want, 1e-4);
}

TEST_F(EmulatedKernelsTest, EmbeddingBackwardAddsEachRowsTokensInOrder) {
  const int64_t count = 70, vocab = 13, cols = 33;
  std::vector<int32_t> ids(count);
  for (int64_t i = 0; i < count; ++i) ids[i] = static_cast<int32_t>((i * i + 3) % vocab);
  const auto grad_out = Random(count * cols, 11), start = Random(vocab * cols, 12);
  DeviceBuffer<int32_t> dids(ids);
  DeviceBuffer<float> dgo(grad_out), table(start);
  const auto result = UnderTwoSchedules([&] {
    table.Upload(start);
    EXPECT_EQ(LaunchEmbeddingBackward(dids.get(), dgo.get(), table.get(), count, vocab, cols,
                                      nullptr),
              cudaSuccess);
    return table.Download();
  });
  std::vector<double> want(start.begin(), start.end());
  for (int64_t i = 0; i < count; ++i) {
    for (int64_t c = 0; c < cols; ++c) want[ids[i] * cols + c] += grad_out[i * cols + c];
  }
  ExpectClose(result, want, 1e-5);
}

TEST_F(EmulatedKernelsTest, EmbeddingForwardTrapsOnAnIdOutsideTheVocabulary) {
  const std::vector<int32_t> ids = {0, 3, 9};
  DeviceBuffer<int32_t> dids(ids);
  DeviceBuffer<float> table(std::vector<float>(4 * 8, 1.0f)), out(3 * 8);
  EXPECT_EQ(LaunchEmbeddingForward(dids.get(), table.get(), out.get(), 3, 4, 8, nullptr),
            cudaSuccess);  // launched; the fault is found while it runs
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  EXPECT_NE(LastFault().find("__trap()"), std::string::npos) << LastFault();
}

TEST_F(EmulatedKernelsTest, AttentionForwardIsCausalSoftmaxAttention) {
  for (const int64_t head_dim : {int64_t{32}, int64_t{64}}) {
    const AttentionShape s{2, 37, 2, head_dim};
    SCOPED_TRACE(head_dim);
    const int64_t c = s.heads * s.head_dim;
    const auto qkv = Random(s.batch * s.time * 3 * c, 13);
    DeviceBuffer<float> dqkv(qkv), out(s.batch * s.time * c), lse(s.batch * s.heads * s.time);
    const auto result = UnderTwoSchedules([&] {
      EXPECT_EQ(LaunchAttentionForward({dqkv.get()}, {out.get()}, lse.get(), s, nullptr),
                cudaSuccess);
      return out.Download();
    });
    std::vector<double> want(s.batch * s.time * c);
    const double scale = 1.0 / std::sqrt(double(s.head_dim));
    for (int64_t b = 0; b < s.batch; ++b) {
      for (int64_t h = 0; h < s.heads; ++h) {
        for (int64_t t = 0; t < s.time; ++t) {
          auto at = [&](int64_t time, int64_t part, int64_t d) {
            return double{qkv[(b * s.time + time) * 3 * c + part * c + h * s.head_dim + d]};
          };
          std::vector<double> p(t + 1);
          double m = -INFINITY, total = 0;
          for (int64_t j = 0; j <= t; ++j) {
            double dot = 0;
            for (int64_t d = 0; d < s.head_dim; ++d) dot += at(t, 0, d) * at(j, 1, d);
            p[j] = dot * scale;
            m = std::max(m, p[j]);
          }
          for (double& v : p) total += (v = std::exp(v - m));
          for (int64_t d = 0; d < s.head_dim; ++d) {
            double o = 0;
            for (int64_t j = 0; j <= t; ++j) o += p[j] / total * at(j, 2, d);
            want[(b * s.time + t) * c + h * s.head_dim + d] = o;
          }
        }
      }
    }
    ExpectClose(result, want, 1e-4);
  }
}

TEST_F(EmulatedKernelsTest, Bf16ActivationsAreRoundedOnceOnStore) {
  const int64_t count = 1000;
  const auto a = Random(count, 14), b = Random(count, 15);
  DeviceBuffer<float> da(a), db(b);
  DeviceBuffer<__nv_bfloat16> out(count);
  UnderTwoSchedules([&] {
    EXPECT_EQ(LaunchAddForward({da.get()}, {db.get()}, {out.get(), true}, count, nullptr),
              cudaSuccess);
    std::vector<float> widened;
    for (__nv_bfloat16 h : out.Download()) widened.push_back(__bfloat162float(h));
    for (int64_t i = 0; i < count; ++i) {
      EXPECT_EQ(widened[i], __bfloat162float(__float2bfloat16_rn(a[i] + b[i]))) << i;
    }
    return widened;
  });
}

double Gelu(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

TEST_F(EmulatedKernelsTest, ElementwiseForwardsAndBackwardsMatchTheirFormulas) {
  const int64_t count = 1237;  // not a multiple of a block
  const auto a = Random(count, 16), b = Random(count, 17), g = Random(count, 18);
  DeviceBuffer<float> da(a), db(b), dg(g), out(6 * count);
  const auto result = UnderTwoSchedules([&] {
    cudaMemset(out.get(), 0, 6 * count * sizeof(float));
    float* o = out.get();
    EXPECT_EQ(LaunchGeluForward({da.get()}, {o}, count, nullptr), cudaSuccess);
    EXPECT_EQ(LaunchGeluBackward({da.get()}, {dg.get()}, {o + count}, count, nullptr),
              cudaSuccess);
    EXPECT_EQ(LaunchSiluForward({da.get()}, {o + 2 * count}, count, nullptr), cudaSuccess);
    EXPECT_EQ(LaunchSwiGluForward({da.get()}, {db.get()}, {o + 3 * count}, count, nullptr),
              cudaSuccess);
    EXPECT_EQ(LaunchMulForward({da.get()}, {db.get()}, {o + 4 * count}, count, nullptr),
              cudaSuccess);
    EXPECT_EQ(LaunchMulBackward({da.get()}, {db.get()}, {dg.get()}, {o + 5 * count}, {}, count,
                                nullptr),
              cudaSuccess);
    return out.Download();
  });
  std::vector<double> want(6 * count);
  for (int64_t i = 0; i < count; ++i) {
    const double x = a[i], y = b[i], h = 1e-4;
    const double sigmoid = 1.0 / (1.0 + std::exp(-x));
    want[i] = Gelu(x);
    want[count + i] = (Gelu(x + h) - Gelu(x - h)) / (2 * h) * g[i];
    want[2 * count + i] = x * sigmoid;
    want[3 * count + i] = x * sigmoid * y;
    want[4 * count + i] = x * y;
    want[5 * count + i] = double{g[i]} * y;
  }
  ExpectClose(result, want, 2e-4);  // the gelu derivative by central differences
}

TEST_F(EmulatedKernelsTest, RowSumSquaresSumsEachRowInDouble) {
  const int64_t rows = 5, cols = 1031;
  const auto in = Random(rows * cols, 19), start = Random(rows, 20);
  DeviceBuffer<float> din(in), out(start);
  const auto result = UnderTwoSchedules([&] {
    out.Upload(start);
    EXPECT_EQ(LaunchRowSumSquares(din.get(), rows, cols, 0.5f, 2.0f, out.get(), nullptr),
              cudaSuccess);
    return out.Download();
  });
  for (int64_t r = 0; r < rows; ++r) {
    double squares = 0;
    for (int64_t c = 0; c < cols; ++c) squares += double{in[r * cols + c]} * in[r * cols + c];
    EXPECT_NEAR(result[r], 0.5 * squares + 2.0 * start[r], 1e-5 * (0.5 * squares + 1));
  }
}

TEST_F(EmulatedKernelsTest, AdamWStepWithClippingMatchesTheUpdateRule) {
  const int64_t count = 300;
  const auto param = Random(count, 21), grad = Random(count, 22);
  const auto m0 = Random(count, 23, 0.1f);
  std::vector<float> v0(count);
  for (int64_t i = 0; i < count; ++i) v0[i] = 0.01f * (1 + i % 7);
  double norm_sq = 0;
  for (float x : grad) norm_sq += double{x} * x;
  const std::vector<float> norm = {static_cast<float>(norm_sq)};
  AdamWHyper hyper;
  hyper.lr = 1e-2f;
  hyper.weight_decay = 0.1f;
  hyper.max_grad_norm = 1.0f;
  hyper.correction1 = 1 / (1 - 0.9f * 0.9f);
  hyper.correction2 = 1 / (1 - 0.95f * 0.95f);
  DeviceBuffer<float> dp(param), dgrad(grad), dm(m0), dv(v0), dnorm(norm);
  const auto result = UnderTwoSchedules([&] {
    dp.Upload(param);
    dm.Upload(m0);
    dv.Upload(v0);
    EXPECT_EQ(LaunchAdamW(dp.get(), dgrad.get(), dm.get(), dv.get(), dnorm.get(), nullptr, count,
                          hyper, nullptr),
              cudaSuccess);
    return dp.Download();
  });
  const double clip = std::min(1.0, 1.0 / std::sqrt(norm_sq));
  std::vector<double> want(count);
  for (int64_t i = 0; i < count; ++i) {
    const double gi = grad[i] * clip;
    const double m = 0.9 * m0[i] + 0.1 * gi, v = 0.95 * v0[i] + 0.05 * gi * gi;
    const double update = m * hyper.correction1 / (std::sqrt(v * hyper.correction2) + 1e-8);
    want[i] = param[i] * (1 - 1e-2 * 0.1) - 1e-2 * update;
  }
  ExpectClose(result, want, 1e-5);
}

TEST_F(EmulatedKernelsTest, RopeRotatesAdjacentPairsOfEachHead) {
  RopeShape shape;
  shape.rows = 6;
  shape.time = 3;
  shape.head_dim = 8;
  shape.rotate_channels = 16;
  shape.width = 20;  // two heads rotate, four channels pass through
  shape.position_offset = 1;
  const int64_t positions = shape.time + shape.position_offset;
  std::vector<float> cos(positions * 4), sin(positions * 4);
  for (int64_t p = 0; p < positions; ++p) {
    for (int64_t i = 0; i < 4; ++i) {
      const double angle = p * std::pow(10000.0, -2.0 * i / 8);
      cos[p * 4 + i] = static_cast<float>(std::cos(angle));
      sin[p * 4 + i] = static_cast<float>(std::sin(angle));
    }
  }
  const auto x = Random(shape.rows * shape.width, 24);
  DeviceBuffer<float> dx(x), dcos(cos), dsin(sin), out(shape.rows * shape.width);
  const auto result = UnderTwoSchedules([&] {
    EXPECT_EQ(LaunchRopeForward({dx.get()}, {out.get()}, dcos.get(), dsin.get(), shape, nullptr),
              cudaSuccess);
    return out.Download();
  });
  std::vector<double> want(x.begin(), x.end());
  for (int64_t r = 0; r < shape.rows; ++r) {
    const int64_t p = r % shape.time + shape.position_offset;
    for (int64_t c = 0; c < shape.rotate_channels; c += 2) {
      const int64_t i = (c % shape.head_dim) / 2;
      const double a = x[r * shape.width + c], b = x[r * shape.width + c + 1];
      want[r * shape.width + c] = a * cos[p * 4 + i] - b * sin[p * 4 + i];
      want[r * shape.width + c + 1] = a * sin[p * 4 + i] + b * cos[p * 4 + i];
    }
  }
  ExpectClose(result, want, 1e-5);
}

}  // namespace
}  // namespace smallem::emu
