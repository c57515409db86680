// The CPU reference for bf16 activations (engine/backend.h, "Activations").
//
// An op given bf16 [act] operands runs as the f32 op on widened copies of
// them (bf16 → f32 is exact), and the copies it writes are rounded back to
// bf16 once, to nearest even — the definition every backend is judged
// against. Operands that share memory share one copy, so an op that allows
// out to alias an input behaves as it does in f32. This path is for
// reference and tests: the f32 ops themselves stay untouched and fast.
//
// Each CpuBackend op with [act] operands starts with
//   if (MaybeRunWidened(*this, p, &CpuBackend::GeluForward)) return;
#ifndef SMALLEM_ENGINE_CPU_BF16_OPS_H_
#define SMALLEM_ENGINE_CPU_BF16_OPS_H_

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "engine/backend.h"
#include "engine/op_list.h"

namespace smallem::cpu {

// How an op uses an operand: reads it, overwrites it, or reads and writes
// it (an accumulated gradient, an in-place update, beta ≠ 0).
enum class Access : uint8_t { kRead, kWrite, kUpdate };
using ActivationVisitor = absl::FunctionRef<void(Tensor&, Access)>;

// Calls `visit` on each [act] operand of an op's parameters, with how the
// op uses it (empty operands included; the visitor skips them). Declared for
// the parameters of every op of engine/op_list.h; the ops without [act]
// operands (embedding, the loss's forward, the reductions, the optimizer and
// data ops) visit none.
#define SMALLEM_DECLARE_FOR_EACH_ACTIVATION(Method, Params, op) \
  void ForEachActivation(Params& p, ActivationVisitor visit);
SMALLEM_BACKEND_OPS(SMALLEM_DECLARE_FOR_EACH_ACTIVATION)
#undef SMALLEM_DECLARE_FOR_EACH_ACTIVATION

// f32 stand-ins for the bf16 operands of one op call.
class Bf16Widening {
 public:
  Bf16Widening() = default;
  Bf16Widening(const Bf16Widening&) = delete;
  Bf16Widening& operator=(const Bf16Widening&) = delete;

  // When t is bf16, points it at an f32 copy of its memory (the same copy
  // for every operand at that address), filled with its values unless the
  // op only writes it. Other tensors are left alone.
  void Widen(Tensor& t, Access access);
  // Rounds every copy the op wrote back into its bf16 memory.
  void NarrowBack();
  bool empty() const { return copies_.empty(); }

 private:
  struct Copy {
    void* bf16 = nullptr;
    int64_t numel = 0;
    bool filled = false;   // values hold the bf16 memory's
    bool written = false;  // the op writes it: narrow back
    std::vector<float> values;
  };
  std::vector<Copy> copies_;
};

// Runs `op` on f32 copies when any [act] operand of p is bf16, and returns
// true; returns false (and does nothing) when they are all f32.
template <class Cpu, class Params>
bool MaybeRunWidened(Cpu& backend, const Params& p, void (Cpu::*op)(const Params&)) {
  Params f32 = p;
  Bf16Widening widening;
  ForEachActivation(f32, [&](Tensor& t, Access access) { widening.Widen(t, access); });
  if (widening.empty()) return false;
  (backend.*op)(f32);
  widening.NarrowBack();
  return true;
}

// A norm whose fused residual sum is stored in bf16 normalizes the stored,
// rounded sum, as Add then the norm would: runs those two and returns true,
// or returns false when the sum is absent or f32.
template <class Cpu>
bool MaybeSplitBf16Sum(Cpu& backend, const NormParams& p, void (Cpu::*norm)(const NormParams&)) {
  if (p.residual.empty() || p.sum.dtype != DType::kBF16) return false;
  backend.Add(BinaryParams{.a = p.x, .b = p.residual, .out = p.sum});
  NormParams stored = p;
  stored.x = p.sum;
  stored.residual = stored.sum = Tensor{};
  (backend.*norm)(stored);
  return true;
}

}  // namespace smallem::cpu

#endif  // SMALLEM_ENGINE_CPU_BF16_OPS_H_
