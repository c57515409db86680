// The CUDA kernels' host launchers: the whole contract between kernels/*.cu
// and CudaBackend (kernels/cuda_ops.cc).
//
// Each launcher enqueues its kernels on `stream` and returns the launch
// status (cudaGetLastError), never an abseil type: kernels/ knows nothing of
// the engine. Errors that happen while a kernel runs surface at the next
// synchronization. Every pointer is device memory; every tensor is f32,
// row-major, last dimension contiguous, unless its comment says otherwise.
// Forward launchers OVERWRITE their outputs; backward launchers ACCUMULATE
// (+=) into their gradients, and a null gradient pointer means "not needed".
// The reductions (bias, norm gains, embedding, Sum, row sums, attention,
// cross-entropy) add in a fixed order that depends only on the shapes, with
// no atomics: the same inputs give bitwise the same outputs, run after run.
//
// Glossary (engine/tensor.h): B batch, T time, C channels, V vocab, H heads,
// D head size, N rows (B·T).
//
// Scratch: a few launchers need device scratch memory; the matching
// `…ScratchFloats` function says how many floats, and the caller owns it. The
// launchers are not thread-safe with respect to one scratch buffer.
#ifndef SMALLEM_KERNELS_KERNELS_H_
#define SMALLEM_KERNELS_KERNELS_H_

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace smallem::cuda {

// An activation operand (engine/backend.h, "Activations"): f32 elements, or
// bf16 when `bf16`. Kernels read either as f32, compute in f32 and round
// once to nearest-even when they store into a bf16 operand; a backward's
// accumulation into a bf16 gradient is bf16(f32(grad) + contribution).
// Device access: kernels/activation.cuh. A null data means "not given"
// where the launcher's comment allows it.
struct ActIn {
  const void* data = nullptr;
  bool bf16 = false;
};
struct ActOut {
  void* data = nullptr;
  bool bf16 = false;
};

// fill.cu: data[i] = value, with the value converted to the element type.
enum class FillType { kF32, kBf16, kI32 };
cudaError_t LaunchFill(void* data, int64_t count, FillType type, float value,
                       cudaStream_t stream);

// add.cu. Elementwise launchers (add, mul, gelu, silu, swiglu): every
// operand is an activation (ActIn, ActOut) of `count` elements.
// out = a + b; out may alias a or b (same dtype).
cudaError_t LaunchAddForward(ActIn a, ActIn b, ActOut out, int64_t count,
                             cudaStream_t stream);
// grad_a += grad_out, grad_b += grad_out (either may be null, or both equal).
cudaError_t LaunchAddBackward(ActIn grad_out, ActOut grad_a, ActOut grad_b,
                              int64_t count, cudaStream_t stream);

// mul.cu
// out = a · b elementwise; out may alias a or b (same dtype).
cudaError_t LaunchMulForward(ActIn a, ActIn b, ActOut out, int64_t count,
                             cudaStream_t stream);
// grad_a += grad_out · b, grad_b += grad_out · a (either may be null; a may
// be null when grad_b is, b when grad_a is).
cudaError_t LaunchMulBackward(ActIn a, ActIn b, ActIn grad_out, ActOut grad_a,
                              ActOut grad_b, int64_t count, cudaStream_t stream);

// gelu.cu (tanh approximation)
cudaError_t LaunchGeluForward(ActIn in, ActOut out, int64_t count,
                              cudaStream_t stream);
// grad_in += gelu'(in) · grad_out.
cudaError_t LaunchGeluBackward(ActIn in, ActIn grad_out, ActOut grad_in,
                               int64_t count, cudaStream_t stream);

// silu.cu: out = x·σ(x).
cudaError_t LaunchSiluForward(ActIn in, ActOut out, int64_t count,
                              cudaStream_t stream);
cudaError_t LaunchSiluBackward(ActIn in, ActIn grad_out, ActOut grad_in,
                               int64_t count, cudaStream_t stream);

// swiglu.cu: out = silu(gate)·up, all (N, F).
cudaError_t LaunchSwiGluForward(ActIn gate, ActIn up, ActOut out, int64_t count,
                                cudaStream_t stream);
// grad_gate and grad_up (N, F) += ; either may be null.
cudaError_t LaunchSwiGluBackward(ActIn gate, ActIn up, ActIn grad_out,
                                 ActOut grad_gate, ActOut grad_up,
                                 int64_t count, cudaStream_t stream);

// bias_add.cu
// x (rows, cols) activation += bias (cols) f32 on every row.
cudaError_t LaunchBiasAddForward(ActOut x, const float* bias, int64_t rows,
                                 int64_t cols, cudaStream_t stream);
// grad_bias (cols) f32 += Σ_rows grad_out (rows, cols) activation.
size_t BiasBackwardScratchFloats(int64_t rows, int64_t cols);
cudaError_t LaunchBiasAddBackward(ActIn grad_out, float* grad_bias,
                                  int64_t rows, int64_t cols, float* scratch,
                                  cudaStream_t stream);

// bias_gelu.cu: out (rows, cols) = gelu(x + bias), bias (cols) f32 or null;
// out may alias x.
cudaError_t LaunchBiasGeluForward(ActIn x, const float* bias, ActOut out, int64_t rows,
                                  int64_t cols, cudaStream_t stream);
// d = gelu'(x + bias)·grad_out: grad_x += d (= d when overwrite; null: not
// needed), grad_bias (cols) f32 += Σ_rows d (null: not needed; then scratch
// may be null too), deterministic.
size_t BiasGeluBackwardScratchFloats(int64_t rows, int64_t cols);
cudaError_t LaunchBiasGeluBackward(ActIn x, const float* bias, ActIn grad_out, ActOut grad_x,
                                   bool overwrite, float* grad_bias, int64_t rows,
                                   int64_t cols, float* scratch, cudaStream_t stream);

// layer_norm.cu: out = (x − mean)·rstd·gain + bias over rows of cols.
// Activations: x, residual, sum, out (rows, cols); f32: gain, bias (cols),
// mean, rstd (rows). bias, mean and rstd may be null. With residual
// non-null, x is first replaced by sum = x + residual, written to sum (rounded
// as LaunchAddForward rounds it) and normalized as stored; sum may alias x or
// residual (same dtype). Both residual and sum are null, or neither.
cudaError_t LaunchLayerNormForward(ActIn x, ActIn residual, const float* gain,
                                   const float* bias, ActOut sum, ActOut out,
                                   float* mean, float* rstd, int64_t rows,
                                   int64_t cols, float eps, cudaStream_t stream);
// grad_x (rows, cols) activation, grad_gain (cols), grad_bias (cols) f32 += ;
// each may be null. x and grad_out (rows, cols) activations; mean and rstd
// (rows) are the forward's.
size_t LayerNormBackwardScratchFloats(int64_t rows, int64_t cols);
cudaError_t LaunchLayerNormBackward(ActIn x, const float* gain,
                                    const float* mean, const float* rstd,
                                    ActIn grad_out, ActOut grad_x,
                                    float* grad_gain, float* grad_bias,
                                    int64_t rows, int64_t cols, float* scratch,
                                    cudaStream_t stream);

// rms_norm.cu: out = x·rstd·gain, rstd = 1/√(mean(x²) + eps); rstd (rows, f32)
// may be null. Activations, residual and sum as in LaunchLayerNormForward.
cudaError_t LaunchRmsNormForward(ActIn x, ActIn residual, const float* gain,
                                 ActOut sum, ActOut out, float* rstd,
                                 int64_t rows, int64_t cols, float eps,
                                 cudaStream_t stream);
// grad_x (rows, cols) activation, grad_gain (cols) f32 += ; either may be
// null. x and grad_out as in LaunchLayerNormBackward.
size_t RmsNormBackwardScratchFloats(int64_t rows, int64_t cols);
cudaError_t LaunchRmsNormBackward(ActIn x, const float* gain, const float* rstd,
                                  ActIn grad_out, ActOut grad_x,
                                  float* grad_gain, int64_t rows, int64_t cols,
                                  float* scratch, cudaStream_t stream);

// rope.cu. Rows of `width` channels; row r is at position
// r mod time + position_offset; the first rotate_channels channels are heads
// of head_dim channels whose pairs (2i, 2i+1) rotate by the angle whose cos
// and sin are tables (positions, head_dim/2), f32; the rest pass through.
struct RopeShape {
  int64_t rows = 0, width = 0, time = 0, head_dim = 0, rotate_channels = 0,
          position_offset = 0;
};
// x, out (rows, width) activations; out may alias x (same dtype).
cudaError_t LaunchRopeForward(ActIn x, ActOut out, const float* cos,
                              const float* sin, const RopeShape& shape,
                              cudaStream_t stream);
// grad_in += rotation of grad_out by −angle (activations); must not alias
// grad_out.
cudaError_t LaunchRopeBackward(ActIn grad_out, ActOut grad_in, const float* cos,
                               const float* sin, const RopeShape& shape,
                               cudaStream_t stream);

// attention.cu: causal attention from packed qkv (B, T, 3C), C = H·D, D one
// of kAttentionHeadDims. Flash-style: tiles of queries and keys in shared
// memory, an online softmax, no T × T matrix anywhere.
inline constexpr int kAttentionHeadDims[] = {32, 64, 128};
bool AttentionSupportsHeadDim(int64_t head_dim);
struct AttentionShape {
  int64_t batch = 0, time = 0, heads = 0, head_dim = 0;
};
// qkv, out, grad_out and grad_qkv are activations (f32 or bf16, each); lse
// and scratch are f32.
// out (B, T, C) = softmax(q·kᵀ/√D, causal)·v; lse (B, H, T) the natural
// log-sum-exp of each row's scaled scores (lse may be null).
cudaError_t LaunchAttentionForward(ActIn qkv, ActOut out, float* lse,
                                   const AttentionShape& shape,
                                   cudaStream_t stream);
// grad_qkv (B, T, 3C) += ; recomputes the probabilities from lse. Scratch
// holds rowsum(grad_out ∘ out) per (B, H, T). Deterministic: every gradient
// element is summed by one thread in a fixed order, no atomics.
size_t AttentionBackwardScratchFloats(const AttentionShape& shape);
cudaError_t LaunchAttentionBackward(ActIn qkv, ActIn out, const float* lse,
                                    ActIn grad_out, ActOut grad_qkv,
                                    const AttentionShape& shape,
                                    float* scratch, cudaStream_t stream);

// attention_bf16.cu: the same two operations on the tensor cores, what
// CudaBackend runs when its matmuls are bf16. q, k, v, dO and the
// probabilities are rounded to bf16 (f32 accumulation; scores, softmax
// statistics, lse and delta in f32): ~1e-2 relative accuracy. Same operand
// types, shapes, head sizes, lse, scratch (AttentionBackwardScratchFloats)
// and determinism (no atomics) as the f32 launchers above; bf16 operands
// are read straight into the tensor cores' tiles, with no conversion, 16
// bytes at a time: a bf16 qkv or grad_out must be 16-byte aligned
// (cudaErrorMisalignedAddress otherwise).
cudaError_t LaunchAttentionForwardBf16(ActIn qkv, ActOut out, float* lse,
                                       const AttentionShape& shape,
                                       cudaStream_t stream);
cudaError_t LaunchAttentionBackwardBf16(ActIn qkv, ActIn out, const float* lse,
                                        ActIn grad_out, ActOut grad_qkv,
                                        const AttentionShape& shape,
                                        float* scratch, cudaStream_t stream);

// share_kv.cu: a borrowing layer's packed qkv (own_keys). q (rows, C),
// source and out (rows, 3C), activations each.
// out = [q | source[:, C:3C]]; out aliases neither input.
cudaError_t LaunchShareKvForward(ActIn q, ActIn source, ActOut out, int64_t rows,
                                 int64_t channels, cudaStream_t stream);
// grad_q += grad_out[:, 0:C]; grad_source[:, C:3C] += grad_out[:, C:3C]
// (either may be null).
cudaError_t LaunchShareKvBackward(ActIn grad_out, ActOut grad_q, ActOut grad_source,
                                  int64_t rows, int64_t channels, cudaStream_t stream);

// embedding.cu
// out (count, cols) = table (vocab, cols)[ids (count) i32]. An id outside
// [0, vocab) is a broken invariant: the kernel traps (a sticky CUDA error).
cudaError_t LaunchEmbeddingForward(const int32_t* ids, const float* table,
                                   float* out, int64_t count, int64_t vocab,
                                   int64_t cols, cudaStream_t stream);
// grad_table (vocab, cols) += scatter of grad_out (count, cols) by ids. One
// block owns each table row and adds its tokens in token order: no atomics.
cudaError_t LaunchEmbeddingBackward(const int32_t* ids, const float* grad_out,
                                    float* grad_table, int64_t count,
                                    int64_t vocab, int64_t cols,
                                    cudaStream_t stream);

// cross_entropy.cu
// losses (rows) = lse − logits[target]; lse (rows) saved (may be null).
// logits (rows, vocab), targets (rows) i32 in [0, vocab) (else a trap).
cudaError_t LaunchCrossEntropyForward(const float* logits,
                                      const int32_t* targets, float* losses,
                                      float* lse, int64_t rows, int64_t vocab,
                                      cudaStream_t stream);
// grad_logits (rows, vocab), f32 or bf16, += (softmax −
// onehot(target))·grad_losses[row], or = when overwrite, and then an f32
// grad_logits may be logits (in place).
cudaError_t LaunchCrossEntropyBackward(const float* logits,
                                       const int32_t* targets,
                                       const float* lse,
                                       const float* grad_losses,
                                       ActOut grad_logits, int64_t rows,
                                       int64_t vocab, bool overwrite,
                                       cudaStream_t stream);

// reduce.cu: out (1) = Σ in (or Σ in²), or out += when accumulate; summed in
// double over a fixed two-pass tree, cast to f32 at the end.
enum class ReduceKind { kSum, kSumSquares };
size_t ReduceScratchFloats(int64_t count);
cudaError_t LaunchReduce(const float* in, int64_t count, ReduceKind kind,
                         bool accumulate, float* out, float* scratch,
                         cudaStream_t stream);

// adamw.cu: one fused AdamW step on `count` elements. correction1/2 are
// 1/(1 − β^step) computed on the host. When grad_norm_sq (1) is non-null
// and max_grad_norm > 0, the gradient is scaled by
// min(1, max_grad_norm / √grad_norm_sq), read on the device. When scalars
// (3) is non-null, lr, correction1 and correction2 are read from it on the
// device instead of from hyper (what a captured step needs).
struct AdamWHyper {
  float lr = 0, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f;
  float weight_decay = 0, max_grad_norm = 0;
  float correction1 = 1, correction2 = 1;
};
cudaError_t LaunchAdamW(float* param, const float* grad, float* m, float* v,
                        const float* grad_norm_sq, const float* scalars,
                        int64_t count, const AdamWHyper& hyper,
                        cudaStream_t stream);

// row_sum_squares.cu: out (rows) = alpha·Σ_k in[r, k]² + beta·out[r] for in
// (rows, cols); beta = 0 never reads out. Each row summed in double by one
// block in a fixed order, rounded to f32 once.
cudaError_t LaunchRowSumSquares(const float* in, int64_t rows, int64_t cols,
                                float alpha, float beta, float* out,
                                cudaStream_t stream);

// row_scale.cu: out[r, :] = in[r, :]·f_r for in, out (rows, cols) (out may
// alias in), f_r = a·√numer[r] / √(denom[r] + eps) computed in double with a
// = alpha·scale[0] (an f32 product) or alpha when scale is null; a null
// numer or denom counts as 1; a row with denom[r] + eps ≤ 0 gets 0.
cudaError_t LaunchRowScale(const float* in, int64_t rows, int64_t cols,
                           const float* numer, const float* denom,
                           const float* scale, float alpha, float eps,
                           float* out, cudaStream_t stream);

// gather_sequences.cu: inputs[r·time + t] = tokens[starts[r] + t] and
// targets[r·time + t] = tokens[starts[r] + t + 1] for r < rows, t < time;
// tokens (count), starts (rows), inputs and targets (rows·time), all i32. A
// start outside [0, count − time − 1] traps (a sticky CUDA error).
cudaError_t LaunchGatherSequences(const int32_t* tokens, int64_t count,
                                  const int32_t* starts, int64_t rows,
                                  int64_t time, int32_t* inputs,
                                  int32_t* targets, cudaStream_t stream);

// latent_qkv.cu: latent attention's qkv (engine/backend.h, LatentQkvParams).
// rows of out (3·H·D) from q (H·D), kv (H·Dn + H·D) and k_rope (R),
// Dn = D − R; all activations. The backward adds each part of grad_out into
// its input's gradient (null ones skipped), the shared k_rope's summed over
// the heads in f32.
struct LatentQkvShape {
  int64_t rows = 0, heads = 0, head_dim = 0, rope_dim = 0;
};
cudaError_t LaunchLatentQkvForward(ActIn q, ActIn kv, ActIn k_rope, ActOut out,
                                   const LatentQkvShape& shape, cudaStream_t stream);
cudaError_t LaunchLatentQkvBackward(ActIn grad_out, ActOut grad_q, ActOut grad_kv,
                                    ActOut grad_k_rope, const LatentQkvShape& shape,
                                    cudaStream_t stream);

}  // namespace smallem::cuda

#endif  // SMALLEM_KERNELS_KERNELS_H_
