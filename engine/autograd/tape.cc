#include "engine/autograd/tape.h"

#include "base/check.h"

namespace smallem {

Var Tape::Param(Tensor value, Tensor grad) {
  CHECK(grad.shape == value.shape)
      << "gradient " << grad.shape.ToString() << " for parameter " << value.shape.ToString();
  nodes_.push_back(Node{.value = value,
                        .grad = grad,
                        .requires_grad = grad_enabled_,
                        .grad_ready = true});
  return Var{static_cast<int32_t>(nodes_.size() - 1)};
}

Var Tape::Input(Tensor value) {
  nodes_.push_back(Node{.value = value});
  return Var{static_cast<int32_t>(nodes_.size() - 1)};
}

Var Tape::Record(Op op, Tensor value, std::initializer_list<Var> inputs, BackwardFn backward) {
  bool requires_grad = false;
  const auto id = static_cast<int32_t>(nodes_.size());
  for (Var in : inputs) {
    if (!in.valid()) continue;
    ++nodes_[in.id].uses;
    nodes_[in.id].last_use = id;
    requires_grad |= grad_enabled_ && nodes_[in.id].requires_grad;
  }
  Node node{.op = op, .value = value, .requires_grad = requires_grad};
  if (requires_grad) {
    CHECK(backward) << "op " << OpName(op) << " has no gradient rule";
    node.backward = std::move(backward);
  }
  nodes_.push_back(std::move(node));
  return Var{id};
}

Tensor Tape::Grad(Var v) {
  Node& n = nodes_[v.id];
  CHECK(n.requires_grad) << "gradient asked of a value that needs none";
  if (!n.grad_ready) {
    n.grad = arena_.AllocateZeroed(n.value.shape, n.value.dtype);
    n.grad_ready = true;
  }
  CHECK(n.grad.shape == n.value.shape)
      << "gradient " << n.grad.shape.ToString() << " for value " << n.value.shape.ToString();
  return n.grad;
}

Tensor Tape::GradToWrite(Var v, bool* fresh) {
  Node& n = nodes_[v.id];
  CHECK(n.requires_grad) << "gradient asked of a value that needs none";
  *fresh = !n.grad_ready;
  if (*fresh) {
    n.grad = arena_.Allocate(n.value.shape, n.value.dtype);
    n.grad_ready = true;
  }
  return n.grad;
}

Tensor Tape::GradToOverwrite(Var v, DType dtype) {
  Node& n = nodes_[v.id];
  CHECK(n.requires_grad) << "gradient asked of a value that needs none";
  if (n.op == Op::kCount || n.uses != 1 || n.grad_ready) return Tensor{};
  n.grad = dtype == n.value.dtype ? n.value : arena_.Allocate(n.value.shape, dtype);
  n.grad_ready = true;
  return n.grad;
}

bool Tape::ShareGrad(Var y, Var v) {
  Node& n = nodes_[v.id];
  if (!n.requires_grad || n.grad_ready || v.id == y.id) return false;
  const Tensor gy = Grad(y);
  if (gy.numel() != n.value.numel() || gy.dtype != n.value.dtype) return false;
  n.grad = gy.Reshaped(n.value.shape);
  n.grad_ready = true;
  return true;
}

void Tape::Backward(Var loss) {
  CHECK_EQ(value(loss).numel(), 1) << "Backward needs a scalar loss";
  CHECK(requires_grad(loss)) << "the loss depends on no parameter";
  backend_.Fill(Grad(loss), 1.0f);
  for (int32_t i = loss.id; i >= 0; --i) {
    Node& n = nodes_[i];
    // A value no gradient reached contributes nothing.
    if (!n.backward || !n.grad_ready) continue;
    n.backward(*this, Var{i});
  }
}

void Tape::Reset() { nodes_.clear(); }

}  // namespace smallem
