// The CUDA reductions add in a fixed order without atomics (kernels/kernels.h):
// run twice on the same inputs, they give bitwise the same results.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend.h"
#include "gtest/gtest.h"
#include "tests/gpu/op_parity_test_util.h"

namespace smallem {
namespace {

using testing::OpParityTest;
using testing::Pair;
using testing::kGpu;

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
