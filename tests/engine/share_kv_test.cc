// The share_kv op (a borrowing layer's packed qkv, own_keys): its values,
// its gradients against finite differences, and that its backward adds
// nothing to the source's queries.
#include <gtest/gtest.h>

#include <vector>

#include "engine/cpu/cpu_backend.h"
#include "tests/engine/cpu_op_test_util.h"

namespace smallem {
namespace {

class ShareKvTest : public testing::CpuOpTest {};

TEST_F(ShareKvTest, OwnQueriesThenTheSourcesKeysAndValues) {
  const int64_t rows = 3, c = 4;
  Tensor q = Random({rows, c}), source = Random({rows, 3 * c}), out = Zeros({rows, 3 * c});
  backend_.ShareKvForward({.q = q, .source = source, .out = out});
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < 3 * c; ++i) {
      const float expected = i < c ? q.f32()[r * c + i] : source.f32()[r * 3 * c + i];
      ASSERT_EQ(out.f32()[r * 3 * c + i], expected) << r << ", " << i;
    }
  }
}

TEST_F(ShareKvTest, BackwardAddsEachPartToItsOrigin) {
  // L = Σ w·out is linear: its finite differences are the weights
  // themselves, so the gradient must be w's q part into q, its k and v parts
  // into the source, and nothing into the source's queries — added to what
  // the gradients held.
  const int64_t rows = 5, c = 6;
  Tensor dout = Random({rows, 3 * c});
  Tensor dq = Random({rows, c}), dsource = Random({rows, 3 * c});
  const std::vector<float> q0 = Values(dq), s0 = Values(dsource);
  backend_.ShareKvBackward({.grad_out = dout, .grad_q = dq, .grad_source = dsource});
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < 3 * c; ++i) {
      const float g = dout.f32()[r * 3 * c + i];
      if (i < c) {
        EXPECT_EQ(dq.f32()[r * c + i], q0[r * c + i] + g);
        EXPECT_EQ(dsource.f32()[r * 3 * c + i], s0[r * 3 * c + i]);
      } else {
        EXPECT_EQ(dsource.f32()[r * 3 * c + i], s0[r * 3 * c + i] + g);
      }
    }
  }
  // Either gradient may be absent.
  backend_.ShareKvBackward({.grad_out = dout, .grad_q = Tensor{}, .grad_source = dsource});
  EXPECT_EQ(dsource.f32()[3 * c - 1], s0[3 * c - 1] + 2 * dout.f32()[3 * c - 1]);
}

TEST_F(ShareKvTest, FiniteDifferencesOfAProjectedOutput) {
  const int64_t rows = 4, c = 3;
  Tensor q = Random({rows, c}), source = Random({rows, 3 * c}), out = Zeros({rows, 3 * c});
  Tensor w = Random({rows, 3 * c});
  Tensor dq = Zeros({rows, c}), dsource = Zeros({rows, 3 * c});
  backend_.ShareKvBackward({.grad_out = w, .grad_q = dq, .grad_source = dsource});
  auto loss = [&] {
    backend_.ShareKvForward({.q = q, .source = source, .out = out});
    double sum = 0;
    for (int64_t i = 0; i < out.numel(); ++i) sum += double{w.f32()[i]} * out.f32()[i];
    return sum;
  };
  for (auto [in, grad] : {std::pair{q, dq}, {source, dsource}}) {
    for (int64_t i = 0; i < in.numel(); ++i) {
      const float x0 = in.f32()[i];
      in.f32()[i] = x0 + 0.25f;
      const double up = loss();
      in.f32()[i] = x0 - 0.25f;
      const double down = loss();
      in.f32()[i] = x0;
      EXPECT_NEAR(grad.f32()[i], (up - down) / 0.5, 1e-5) << i;
    }
  }
}

}  // namespace
}  // namespace smallem
