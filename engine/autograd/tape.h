// Tape: reverse-mode autograd for one step.
//
// Ops (engine/autograd/ops.h) compute their output with a backend call and
// Record() it with the inputs and a backward rule that reads what the op
// saved. Backward() walks the records in reverse: each rule asks Grad() for
// its inputs' gradient buffers (zeroed at first use, then shared) and
// accumulates into them. Parameters carry persistent gradient buffers that the
// optimizer zeroes. Values and gradients live in the step Arena, so Reset()
// both the tape and the arena between steps. Not thread-safe.
#ifndef SMALLEM_ENGINE_AUTOGRAD_TAPE_H_
#define SMALLEM_ENGINE_AUTOGRAD_TAPE_H_

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <vector>

#include "engine/arena.h"
#include "engine/backend.h"
#include "engine/op.h"

namespace smallem {

// A handle to a value recorded on a tape.
struct Var {
  int32_t id = -1;
  bool valid() const { return id >= 0; }
};

class Tape {
 public:
  // The rule receives the tape and the op's output Var.
  using BackwardFn = std::function<void(Tape&, Var out)>;

  Tape(Backend& backend, Arena& arena)
      : backend_(backend), arena_(arena), activation_dtype_(backend.ActivationDType()) {}

  // When disabled (evaluation), ops record no backward rules.
  void set_grad_enabled(bool enabled) { grad_enabled_ = enabled; }
  bool grad_enabled() const { return grad_enabled_; }

  // The dtype ops store activations in (engine/autograd/ops.h says which):
  // the backend's Backend::ActivationDType() unless set. Gradients take
  // their value's dtype.
  void set_activation_dtype(DType dtype) { activation_dtype_ = dtype; }
  DType activation_dtype() const { return activation_dtype_; }

  // A parameter: its gradient accumulates into `grad` (same shape, CHECKed).
  Var Param(Tensor value, Tensor grad);
  // A constant input (token ids, targets, tables): no gradient.
  Var Input(Tensor value);
  // The output of `op`; requires a gradient when any input does.
  Var Record(Op op, Tensor value, std::initializer_list<Var> inputs, BackwardFn backward);

  const Tensor& value(Var v) const { return nodes_[v.id].value; }
  bool requires_grad(Var v) const { return nodes_[v.id].requires_grad; }
  // The gradient buffer of v (v's shape, and v's dtype unless
  // GradToOverwrite chose another), zeroed on first use in this backward
  // pass.
  Tensor Grad(Var v);
  // Grad(v) when v is valid and needs a gradient; an empty tensor (which the
  // backends skip) if not.
  Tensor GradIfNeeded(Var v) { return v.valid() && requires_grad(v) ? Grad(v) : Tensor{}; }

  // v's gradient for a rule that can either write it or add to it (a
  // product: beta 0 or 1). When no gradient of v exists yet, it is new,
  // uninitialized memory, *fresh is set and the rule must write every
  // element; otherwise *fresh is cleared and the rule adds, as with Grad(v).
  // Saves the zero fill, and the product's read of the zeros.
  Tensor GradToWrite(Var v, bool* fresh);

  // v's gradient, in `dtype`, for a backward rule that overwrites it (rather
  // than accumulating) and is the last reader of v's value: the loss turning
  // its logits into their gradient. Only when v is an op's output whose one
  // consumer is the op of this rule and no gradient of v exists yet;
  // otherwise an empty tensor, and the rule uses Grad(v). When dtype is v's,
  // the gradient takes v's own memory (v's value is then gone: read it
  // before Backward); else it is new, uninitialized memory, and the rules
  // that read Grad(v) later get it in that dtype.
  Tensor GradToOverwrite(Var v, DType dtype);

  // For a rule whose gradient of input v equals the gradient of its output
  // y (an add): makes v's gradient y's gradient buffer itself, reshaped to
  // v's shape, instead of zeroing a new one and adding y's into it. Only when
  // v needs a gradient, none exists yet, and v has y's element count and
  // dtype; returns whether it did (if not, the rule uses Grad(v)). Safe
  // because y's gradient is complete when y's rule runs and nothing reads it
  // after that rule; v's later contributions then accumulate into it.
  bool ShareGrad(Var y, Var v);
  // Whether an add about to be recorded, out = a + b, may give both inputs
  // its gradient buffer (ShareGrad on each): when a has no use yet and b's
  // last use came before a was made. a's producer is then the one rule that
  // reads a's gradient, and it runs before every rule that adds into b's
  // (those were recorded before a), so one buffer serves both; the add's
  // rule must still find a used by the add alone (uses(a) == 1).
  bool MayShareGradAcross(Var a, Var b) const {
    return a.valid() && b.valid() && nodes_[a.id].uses == 0 && nodes_[b.id].last_use < a.id;
  }
  int32_t uses(Var v) const { return nodes_[v.id].uses; }

  // Seeds d(loss)/d(loss) = 1 (loss must be a scalar) and runs every rule in
  // reverse order of recording.
  void Backward(Var loss);
  // Forgets every record (keeps capacity).
  void Reset();

  Backend& backend() { return backend_; }
  Arena& arena() { return arena_; }
  Tensor NewTensor(Shape shape, DType dtype = DType::kF32) {
    return arena_.Allocate(shape, dtype);
  }

 private:
  struct Node {
    Op op = Op::kCount;  // kCount for leaves
    Tensor value;
    Tensor grad;
    bool requires_grad = false;
    bool grad_ready = false;  // grad holds a valid (possibly zero) sum
    int32_t uses = 0;         // records that take this value as an input
    int32_t last_use = -1;    // the latest of those records
    BackwardFn backward;
  };

  Backend& backend_;
  Arena& arena_;
  bool grad_enabled_ = true;
  DType activation_dtype_;
  std::vector<Node> nodes_;
};

}  // namespace smallem

#endif  // SMALLEM_ENGINE_AUTOGRAD_TAPE_H_
