// The enumeration of every engine op family, generated from SMALLEM_OPS
// (engine/op_list.h). A new op lands with its CPU reference
// (engine/cpu/<op>.cc), its CUDA kernel (kernels/<op>.cu), a finite-difference
// gradient check (tests/engine/op_gradient_test.cc) and a CPU/CUDA parity case
// (tests/gpu/*_parity_test.cc).
#ifndef SMALLEM_ENGINE_OP_H_
#define SMALLEM_ENGINE_OP_H_

#include <cstdint>

#include "engine/op_list.h"

namespace smallem {

enum class Op : uint8_t {
#define SMALLEM_OP_ENUMERATOR(op, name) op,
  SMALLEM_OPS(SMALLEM_OP_ENUMERATOR)
#undef SMALLEM_OP_ENUMERATOR
  kCount,
};

inline constexpr int kOpCount = static_cast<int>(Op::kCount);

// "matmul", "layer_norm", ... (the file name of its CPU reference and kernel).
const char* OpName(Op op);

}  // namespace smallem

#endif  // SMALLEM_ENGINE_OP_H_
