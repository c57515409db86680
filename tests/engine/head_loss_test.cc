// The training loss with its head (HeadLoss, engine/autograd/ops.h): in
// chunks of rows, with the loss's backward run in the forward, it gives the
// loss and gradients of the plain composition Mean(Mul(CrossEntropy(Linear)),
// mask)), matches central differences, never reads a fresh gradient, and
// scales by the loss's own gradient; a single chunk of a head too large to
// chunk, its loss taken in groups of rows, does too; the CPU's chunk rule.
#include <gtest/gtest.h>

#include <cmath>
#include <initializer_list>
#include <limits>
#include <vector>

#include "engine/arena.h"
#include "engine/autograd/ops.h"
#include "engine/autograd/tape.h"
#include "engine/cpu/cpu_backend.h"
#include "tests/engine/cpu_op_test_util.h"
#include "tests/engine/test_cpu_backend.h"

namespace smallem {
namespace {

constexpr int64_t kRows = 150, kWidth = 24, kVocab = 40;

class HeadLossTest : public testing::CpuOpTest {
 protected:
  struct Result {
    float loss = 0;
    std::vector<float> grad_x, grad_table;
  };

  explicit HeadLossTest(int64_t vocab = kVocab)
      : x_(Random({kRows, kWidth}, -2, 2)),
        table_(Random({vocab, kWidth})),
        targets_(Ids({kRows}, vocab)),
        mask_(Zeros({kRows})) {
    for (int64_t i = 0; i < kRows; ++i) mask_.f32()[i] = i % 3 == 0 ? 0.0f : 0.5f * (i % 5);
  }

  // The loss `times` times over (its gradient is `times`), and the
  // gradients, on an arena poisoned with NaN so that a fresh gradient read
  // before it is written would show.
  Result Run(int64_t chunk_rows, bool masked, int times = 1) {
    Arena arena(backend_, 4 << 20);
    backend_.Fill(arena.Allocate({(4 << 20) / 4}), std::numeric_limits<float>::quiet_NaN());
    arena.Reset();
    Tape tape(backend_, arena);
    const Tensor gx = Zeros(x_.shape), gt = Zeros(table_.shape);
    // x's gradient is the tape's own (fresh: written, not added); the
    // table's is a parameter's (added to).
    const Var x = Linear(tape, tape.Param(x_, gx), tape.Param(Eye(), Zeros({kWidth, kWidth})));
    const Var loss = HeadLoss(tape, x, tape.Param(table_, gt), tape.Input(targets_),
                              masked ? mask_ : Tensor{}, chunk_rows);
    Var total = loss;
    for (int i = 1; i < times; ++i) total = Add(tape, total, loss);
    tape.Backward(total);
    Result r;
    backend_.CopyToHost(&r.loss, tape.value(loss).data, sizeof(float));
    r.grad_x = Values(gx);
    r.grad_table = Values(gt);
    return r;
  }

  Tensor Eye() {
    Tensor t = Zeros({kWidth, kWidth});
    for (int64_t i = 0; i < kWidth; ++i) t.f32()[i * kWidth + i] = 1.0f;
    return t;
  }

  static void ExpectClose(const std::vector<float>& got, const std::vector<float>& want,
                          const char* what) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_FALSE(std::isnan(got[i])) << what << " at " << i;
      EXPECT_NEAR(got[i], want[i], 1e-5 * std::abs(want[i]) + 1e-7) << what << " at " << i;
    }
  }

  // Each chunk size, masked and not, gives the plain composition's loss and
  // gradients.
  void ExpectChunksGiveThePlainComposition(std::initializer_list<int64_t> chunk_rows) {
    for (const bool masked : {false, true}) {
      const Result plain = Run(kPlainHeadLoss, masked);
      for (const int64_t rows : chunk_rows) {
        const Result chunked = Run(rows, masked);
        EXPECT_NEAR(chunked.loss, plain.loss, 1e-6 * std::abs(plain.loss))
            << rows << " rows a chunk" << (masked ? ", masked" : "");
        ExpectClose(chunked.grad_x, plain.grad_x, "grad x");
        ExpectClose(chunked.grad_table, plain.grad_table, "grad table");
      }
    }
  }

  Tensor x_, table_, targets_, mask_;
};

TEST_F(HeadLossTest, ChunksGiveThePlainCompositionsLossAndGradients) {
  // 16-row chunks with a ragged last one, one row at a time, two chunks,
  // one chunk.
  ExpectChunksGiveThePlainComposition({16, 1, 100, kRows});
}

TEST_F(HeadLossTest, ChunkedGradientsScaleWithTheLosssGradient) {
  const Result once = Run(16, true), thrice = Run(16, true, 3);
  std::vector<float> tripled_x, tripled_table;
  for (float g : once.grad_x) tripled_x.push_back(3 * g);
  for (float g : once.grad_table) tripled_table.push_back(3 * g);
  ExpectClose(thrice.grad_x, tripled_x, "grad x, loss counted 3 times");
  ExpectClose(thrice.grad_table, tripled_table, "grad table, loss counted 3 times");
}

TEST_F(HeadLossTest, ChunkedGradientsMatchCentralDifferences) {
  const Result r = Run(16, true);
  auto loss_at = [&](Tensor t, int64_t i, float value) {
    const float saved = t.f32()[i];
    t.f32()[i] = value;
    const float loss = Run(16, true).loss;
    t.f32()[i] = saved;
    return loss;
  };
  constexpr float kStep = 1e-2f;
  for (auto [t, grad, what] : {std::tuple{x_, &r.grad_x, "x"},
                               std::tuple{table_, &r.grad_table, "table"}}) {
    for (int64_t i = 0; i < t.numel(); i += 97) {
      const float v = t.f32()[i];
      const double numeric = (double{loss_at(t, i, v + kStep)} - loss_at(t, i, v - kStep)) /
                             (2.0 * kStep);
      EXPECT_NEAR((*grad)[i], numeric, 2e-2 * std::abs(numeric) + 2e-4) << what << " " << i;
    }
  }
}

// A head of 4096 rows: its loss runs in groups of 16 rows (256 KiB of
// logits each), the last one ragged.
class LargeHeadLossTest : public HeadLossTest {
 protected:
  LargeHeadLossTest() : HeadLossTest(4096) {}
};

TEST_F(LargeHeadLossTest, OneChunkInGroupsGivesThePlainComposition) {
  ExpectChunksGiveThePlainComposition({kRows});
}

// Chunks where the head fits in a quarter of one core's L2, in whole 16-row
// groups; one chunk for a head too large (the GPT-2 vocabulary at width 768).
TEST(HeadLossChunkRowsTest, CpuChunksSmallHeadsOnly) {
  CpuBackend be(TestCpuOptions(1));
  const int64_t rows = int64_t{1} << 20;
  const int64_t small = be.HeadLossChunkRows(rows, 64, 16);
  EXPECT_LT(small, rows);
  EXPECT_EQ(small % 16, 0);
  EXPECT_EQ(be.HeadLossChunkRows(100, 64, 16), 100) << "never more than the rows";
  EXPECT_EQ(be.HeadLossChunkRows(rows, 50257, 768), rows);
}

}  // namespace
}  // namespace smallem
