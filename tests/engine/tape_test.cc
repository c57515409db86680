// An add's gradient buffer given to both of its inputs (Tape::ShareGrad,
// Tape::MayShareGradAcross): in a residual add's order of records — the
// branch made after the stream's last other use — both inputs hold the
// output's gradient itself and the gradients are right; where another
// record would add into one input's gradient while the other's is still to
// be read (the stream used after the branch was made, or the branch used
// again after the add), they keep separate buffers and stay right.
#include <gtest/gtest.h>

#include <functional>
#include <utility>
#include <vector>

#include "engine/arena.h"
#include "engine/autograd/ops.h"
#include "engine/autograd/tape.h"
#include "tests/engine/cpu_op_test_util.h"

namespace smallem {
namespace {

constexpr int64_t kN = 6;

class TapeShareTest : public testing::CpuOpTest {
 protected:
  TapeShareTest()
      : p_(Random({kN})), c1_(Random({kN})), c2_(Random({kN})), c3_(Random({kN})),
        w_(Random({kN})) {}

  // Records r = p·c1, the stream, and then what `build` records from it (it
  // returns the branch and the loss); runs the backward and checks p's
  // gradient against want(i), with w(i) = w_i / N (the gradient of
  // mean(y·w) at y_i). Returns whether branch and stream shared one buffer.
  bool Check(const std::function<std::pair<Var, Var>(Tape&, Var)>& build,
             const std::function<float(int64_t, float)>& want) {
    Arena arena(backend_, 1 << 20);
    Tape tape(backend_, arena);
    const Tensor grad_p = Zeros({kN});
    const Var r = Mul(tape, tape.Param(p_, grad_p), tape.Input(c1_));
    const auto [branch, loss] = build(tape, r);
    tape.Backward(loss);
    const std::vector<float> got = Values(grad_p);
    for (int64_t i = 0; i < kN; ++i) EXPECT_NEAR(got[i], want(i, w_.f32()[i] / kN), 1e-6f) << i;
    return tape.Grad(branch).data == tape.Grad(r).data;
  }

  Var Times(Tape& tape, Var x, const Tensor& c) { return Mul(tape, x, tape.Input(c)); }
  Var Scored(Tape& tape, Var y) { return Mean(tape, Times(tape, y, w_)); }
  float c1(int64_t i) const { return c1_.f32()[i]; }
  float c2(int64_t i) const { return c2_.f32()[i]; }
  float c3(int64_t i) const { return c3_.f32()[i]; }

  Tensor p_, c1_, c2_, c3_, w_;
};

TEST_F(TapeShareTest, AResidualAddsBranchAndStreamShareOneBuffer) {
  for (const bool stream_first : {false, true}) {  // the model adds stream + branch
    const bool shared = Check(
        [&](Tape& tape, Var r) {
          const Var u = Times(tape, r, c2_);  // r's last use before the branch
          const Var branch = Times(tape, u, c3_);
          const Var y = stream_first ? Add(tape, r, branch) : Add(tape, branch, r);
          return std::pair{branch, Scored(tape, y)};
        },
        [&](int64_t i, float w) { return w * c1(i) * (1 + c2(i) * c3(i)); });
    EXPECT_TRUE(shared) << "stream first: " << stream_first;
  }
}

TEST_F(TapeShareTest, AStreamUsedAfterTheBranchWasMadeKeepsItsOwnBuffer) {
  const bool shared = Check(
      [&](Tape& tape, Var r) {
        const Var branch = Times(tape, r, c3_);
        // r used again between the branch and the add: this rule adds into
        // r's gradient after the add's and before the branch's reads it.
        const Var v = Times(tape, r, c2_);
        const Var y = Add(tape, branch, r);
        return std::pair{branch, Add(tape, Scored(tape, y), Mean(tape, v))};
      },
      [&](int64_t i, float w) { return c1(i) * (w * (c3(i) + 1) + c2(i) / kN); });
  EXPECT_FALSE(shared);
}

TEST_F(TapeShareTest, ABranchUsedAgainAfterTheAddKeepsItsOwnBuffer) {
  const bool shared = Check(
      [&](Tape& tape, Var r) {
        const Var branch = Times(tape, Times(tape, r, c2_), c3_);
        const Var y = Add(tape, branch, r);
        const Var again = Times(tape, branch, c2_);  // branch read after the add
        return std::pair{branch, Add(tape, Scored(tape, y), Mean(tape, again))};
      },
      [&](int64_t i, float w) { return c1(i) * (w + (w + c2(i) / kN) * c3(i) * c2(i)); });
  EXPECT_FALSE(shared);
}

}  // namespace
}  // namespace smallem
