#include "engine/cpu/bf16_ops.h"

#include <algorithm>
#include <cstdint>

#include "base/check.h"
#include "engine/bf16.h"

namespace smallem::cpu {

void ForEachActivation(MatmulParams& p, ActivationVisitor visit) {
  visit(p.a, Access::kRead);
  visit(p.b, Access::kRead);
  // With beta 0 the product overwrites out, unless out has elements it does
  // not write (gaps between batch items): those must come back untouched.
  const bool covers_out = p.out.numel() == p.batch * p.m * p.n;
  visit(p.out, p.beta == 0.0f && covers_out ? Access::kWrite : Access::kUpdate);
}

void ForEachActivation(BinaryParams& p, ActivationVisitor visit) {
  visit(p.a, Access::kRead);
  visit(p.b, Access::kRead);
  visit(p.out, Access::kWrite);
}

void ForEachActivation(BinaryBackwardParams& p, ActivationVisitor visit) {
  visit(p.a, Access::kRead);
  visit(p.b, Access::kRead);
  visit(p.grad_out, Access::kRead);
  visit(p.grad_a, Access::kUpdate);
  visit(p.grad_b, Access::kUpdate);
}

void ForEachActivation(UnaryParams& p, ActivationVisitor visit) {
  visit(p.in, Access::kRead);
  visit(p.out, Access::kWrite);
}

void ForEachActivation(UnaryBackwardParams& p, ActivationVisitor visit) {
  visit(p.in, Access::kRead);
  visit(p.grad_out, Access::kRead);
  visit(p.grad_in, Access::kUpdate);
}

void ForEachActivation(SwiGluParams& p, ActivationVisitor visit) {
  visit(p.gate, Access::kRead);
  visit(p.up, Access::kRead);
  visit(p.out, Access::kWrite);
}

void ForEachActivation(SwiGluBackwardParams& p, ActivationVisitor visit) {
  visit(p.gate, Access::kRead);
  visit(p.up, Access::kRead);
  visit(p.grad_out, Access::kRead);
  visit(p.grad_gate, p.overwrite ? Access::kWrite : Access::kUpdate);
  visit(p.grad_up, p.overwrite ? Access::kWrite : Access::kUpdate);
}

void ForEachActivation(BiasAddParams& p, ActivationVisitor visit) {
  visit(p.x, Access::kUpdate);
}

void ForEachActivation(BiasBackwardParams& p, ActivationVisitor visit) {
  visit(p.grad_out, Access::kRead);
}

void ForEachActivation(NormParams& p, ActivationVisitor visit) {
  visit(p.x, Access::kRead);
  visit(p.residual, Access::kRead);
  visit(p.sum, Access::kWrite);
  visit(p.out, Access::kWrite);
}

void ForEachActivation(NormBackwardParams& p, ActivationVisitor visit) {
  visit(p.x, Access::kRead);
  visit(p.grad_out, Access::kRead);
  visit(p.grad_x, Access::kUpdate);
}

void ForEachActivation(RopeParams& p, ActivationVisitor visit) {
  visit(p.x, Access::kRead);
  visit(p.out, Access::kWrite);
}

void ForEachActivation(RopeBackwardParams& p, ActivationVisitor visit) {
  visit(p.grad_out, Access::kRead);
  visit(p.grad_in, p.overwrite ? Access::kWrite : Access::kUpdate);
}

void ForEachActivation(AttentionParams& p, ActivationVisitor visit) {
  visit(p.qkv, Access::kRead);
  visit(p.out, Access::kWrite);
}

void ForEachActivation(AttentionBackwardParams& p, ActivationVisitor visit) {
  visit(p.qkv, Access::kRead);
  visit(p.out, Access::kRead);
  visit(p.grad_out, Access::kRead);
  visit(p.grad_qkv, p.overwrite ? Access::kWrite : Access::kUpdate);
}

void ForEachActivation(CrossEntropyBackwardParams& p, ActivationVisitor visit) {
  visit(p.grad_logits, p.overwrite ? Access::kWrite : Access::kUpdate);
}

void ForEachActivation(LatentQkvParams& p, ActivationVisitor visit) {
  visit(p.q, Access::kRead);
  visit(p.kv, Access::kRead);
  visit(p.k_rope, Access::kRead);
  visit(p.out, Access::kWrite);
}

void ForEachActivation(LatentQkvBackwardParams& p, ActivationVisitor visit) {
  visit(p.grad_out, Access::kRead);
  visit(p.grad_q, Access::kUpdate);
  visit(p.grad_kv, Access::kUpdate);
  visit(p.grad_k_rope, Access::kUpdate);
}

void ForEachActivation(ShareKvParams& p, ActivationVisitor visit) {
  visit(p.q, Access::kRead);
  visit(p.source, Access::kRead);
  visit(p.out, Access::kWrite);
}

void ForEachActivation(ShareKvBackwardParams& p, ActivationVisitor visit) {
  visit(p.grad_out, Access::kRead);
  visit(p.grad_q, Access::kUpdate);
  visit(p.grad_source, Access::kUpdate);
}

// No [act] operands.
void ForEachActivation(EmbeddingParams& p, ActivationVisitor visit) {}
void ForEachActivation(EmbeddingBackwardParams& p, ActivationVisitor visit) {}
void ForEachActivation(CrossEntropyParams& p, ActivationVisitor visit) {}
void ForEachActivation(ReduceParams& p, ActivationVisitor visit) {}
void ForEachActivation(AdamWParams& p, ActivationVisitor visit) {}
void ForEachActivation(RowReduceParams& p, ActivationVisitor visit) {}
void ForEachActivation(RowScaleParams& p, ActivationVisitor visit) {}
void ForEachActivation(GatherSequencesParams& p, ActivationVisitor visit) {}

void ForEachActivation(BiasGeluParams& p, ActivationVisitor visit) {
  visit(p.x, Access::kRead);
  visit(p.out, Access::kWrite);
}

void ForEachActivation(BiasGeluBackwardParams& p, ActivationVisitor visit) {
  visit(p.x, Access::kRead);
  visit(p.grad_out, Access::kRead);
  visit(p.grad_x, p.overwrite ? Access::kWrite : Access::kUpdate);
}

void Bf16Widening::Widen(Tensor& t, Access access) {
  // A bf16 operand of no elements (k = 0 gives a and b none) stays as it is:
  // an empty copy would have no address, which the ops take for absent.
  if (t.empty() || t.numel() == 0 || t.dtype != DType::kBF16) return;
  const bool reads = access != Access::kWrite;
  const bool writes = access != Access::kRead;
  auto it = std::find_if(copies_.begin(), copies_.end(),
                         [&](const Copy& c) { return c.bf16 == t.data; });
  if (it == copies_.end()) {
    copies_.push_back(Copy{.bf16 = t.data, .numel = t.numel()});
    it = copies_.end() - 1;
    it->values.resize(static_cast<size_t>(t.numel()));
  }
  // Operands at one address are views of one buffer: same element count.
  CHECK_EQ(it->numel, t.numel()) << "bf16 operands overlap with different sizes";
  // The op has not run yet: the copy holds the memory's values whichever
  // alias asks for them first.
  if (reads && !it->filled) {
    const auto* src = static_cast<const uint16_t*>(t.data);
    for (int64_t i = 0; i < it->numel; ++i) it->values[i] = Bf16ToFloat(src[i]);
    it->filled = true;
  }
  it->written |= writes;
  t.data = it->values.data();
  t.dtype = DType::kF32;
}

void Bf16Widening::NarrowBack() {
  for (Copy& c : copies_) {
    if (!c.written) continue;
    auto* dst = static_cast<uint16_t*>(c.bf16);
    for (int64_t i = 0; i < c.numel; ++i) dst[i] = FloatToBf16(c.values[i]);
  }
}

}  // namespace smallem::cpu
