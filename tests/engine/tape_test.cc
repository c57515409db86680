// An add's gradient buffer given to both of its inputs (Tape::ShareGrad,
// Tape::MayShareGradAcross): in a residual add's order of records — the
// branch made after the stream's last other use — both inputs hold the
// output's gradient itself and the gradients are right; where another
// record would add into one input's gradient while the other's is still to
// be read (the stream used after the branch was made, or the branch used
// again after the add), they keep separate buffers and stay right.
#include <gtest/gtest.h>

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
  // Where each case's records go: p a parameter, r = p·c1 the stream, the
  // branch from r through u = r·c2, loss = mean((branch + r)·w) plus each
  // case's extra terms.
  TapeShareTest()
      : p_(Random({kN})), c1_(Random({kN})), c2_(Random({kN})), c3_(Random({kN})),
        w_(Random({kN})) {}

  Var Const(Tape& tape, const Tensor& t) { return tape.Input(t); }

  Tensor p_, c1_, c2_, c3_, w_;
};

TEST_F(TapeShareTest, AResidualAddsBranchAndStreamShareOneBuffer) {
  for (const bool stream_first : {false, true}) {  // the model adds stream + branch
    Arena arena(backend_, 1 << 20);
    Tape tape(backend_, arena);
    const Tensor grad_p = Zeros({kN});
    const Var r = Mul(tape, tape.Param(p_, grad_p), Const(tape, c1_));
    const Var u = Mul(tape, r, Const(tape, c2_));  // r's last use before the branch
    const Var branch = Mul(tape, u, Const(tape, c3_));
    const Var y = stream_first ? Add(tape, r, branch) : Add(tape, branch, r);
    tape.Backward(Mean(tape, Mul(tape, y, Const(tape, w_))));
    EXPECT_EQ(tape.Grad(branch).data, tape.Grad(r).data) << "one buffer, " << stream_first;
    const std::vector<float> got = Values(grad_p);
    for (int64_t i = 0; i < kN; ++i) {
      const float w = w_.f32()[i] / kN, c1 = c1_.f32()[i];
      EXPECT_NEAR(got[i], w * c1 * (1 + c2_.f32()[i] * c3_.f32()[i]), 1e-6f) << i;
    }
  }
}

TEST_F(TapeShareTest, AStreamUsedAfterTheBranchWasMadeKeepsItsOwnBuffer) {
  Arena arena(backend_, 1 << 20);
  Tape tape(backend_, arena);
  const Tensor grad_p = Zeros({kN});
  const Var r = Mul(tape, tape.Param(p_, grad_p), Const(tape, c1_));
  const Var branch = Mul(tape, r, Const(tape, c3_));
  // r used again between the branch and the add: this rule adds into r's
  // gradient after the add's and before the branch's rule reads the branch's.
  const Var v = Mul(tape, r, Const(tape, c2_));
  const Var y = Add(tape, branch, r);
  tape.Backward(Add(tape, Mean(tape, Mul(tape, y, Const(tape, w_))), Mean(tape, v)));
  EXPECT_NE(tape.Grad(branch).data, tape.Grad(r).data);
  const std::vector<float> got = Values(grad_p);
  for (int64_t i = 0; i < kN; ++i) {
    const float w = w_.f32()[i] / kN, c1 = c1_.f32()[i];
    EXPECT_NEAR(got[i], c1 * (w * (c3_.f32()[i] + 1) + c2_.f32()[i] / kN), 1e-6f) << i;
  }
}

TEST_F(TapeShareTest, ABranchUsedAgainAfterTheAddKeepsItsOwnBuffer) {
  Arena arena(backend_, 1 << 20);
  Tape tape(backend_, arena);
  const Tensor grad_p = Zeros({kN});
  const Var r = Mul(tape, tape.Param(p_, grad_p), Const(tape, c1_));
  const Var u = Mul(tape, r, Const(tape, c2_));
  const Var branch = Mul(tape, u, Const(tape, c3_));
  const Var y = Add(tape, branch, r);
  const Var again = Mul(tape, branch, Const(tape, c2_));  // branch read after the add
  tape.Backward(Add(tape, Mean(tape, Mul(tape, y, Const(tape, w_))), Mean(tape, again)));
  EXPECT_NE(tape.Grad(branch).data, tape.Grad(r).data);
  const std::vector<float> got = Values(grad_p);
  for (int64_t i = 0; i < kN; ++i) {
    const float w = w_.f32()[i] / kN, c1 = c1_.f32()[i], c2 = c2_.f32()[i], c3 = c3_.f32()[i];
    const float d_branch = w + c2 / kN;
    EXPECT_NEAR(got[i], c1 * (w + d_branch * c3 * c2), 1e-6f) << i;
  }
}

}  // namespace
}  // namespace smallem
