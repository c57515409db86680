// The enumeration of every engine op. A new op lands with its CPU reference
// (engine/cpu/<op>.cc), its CUDA kernel (kernels/<op>.cu), a finite-difference
// gradient check (tests/engine/op_gradient_test.cc) and a CPU/CUDA parity case
// (tests/gpu/op_parity_test.cc).
#ifndef SMALLEM_ENGINE_OP_H_
#define SMALLEM_ENGINE_OP_H_

#include <cstdint>

namespace smallem {

enum class Op : uint8_t {
  kMatmul,        // batched GEMM with transposes (forward and both gradients)
  kAdd,           // out = a + b
  kMul,           // out = a * b (elementwise)
  kGelu,          // tanh approximation
  kSilu,          // x * sigmoid(x)
  kSwiGlu,        // silu(gate) * up, fused
  kBiasAdd,       // x[n, :] += bias
  kLayerNorm,     // (x - mean) * rstd * gain + bias
  kRmsNorm,       // x * rstd * gain
  kRope,          // rotary positions on adjacent pairs
  kAttention,     // causal multi-head attention from packed qkv
  kEmbedding,     // row gather / deterministic scatter-add
  kCrossEntropy,  // per-row softmax cross-entropy from logits
  kSum,           // sum of all elements to a scalar
  kSumSquares,    // sum of squares to a scalar (gradient norm)
  kAdamW,         // fused AdamW update with global-norm clipping
  kRowSumSquares, // per-row sum of squares (optimizer statistics, no gradient)
  kRowScale,      // rows scaled by √numer / √(denom + eps) (optimizer, no gradient)
  kGatherSequences,  // training inputs and targets gathered from device-resident tokens
  kCount,
};

inline constexpr int kOpCount = static_cast<int>(Op::kCount);

// "matmul", "layer_norm", ... (the file name of its CPU reference and kernel).
const char* OpName(Op op);

}  // namespace smallem

#endif  // SMALLEM_ENGINE_OP_H_
