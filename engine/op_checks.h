// The operand contracts of the ops (engine/backend.h), CHECKed in one place
// for every backend: element counts, dtypes, shapes that must agree and the
// aliasing rules. Each backend calls the op's check at the top of its method
// (after the early return of a backward with nothing to compute), so CPU and
// CUDA reject the same calls with the same messages, which name the op and
// the operand: "rms_norm backward: gain (7 vs 5)".
//
// [act] operands are checked as activations, f32 or bf16. The CPU backend runs
// the checks on the f32 copies it computes on (engine/cpu/bf16_ops.h), the
// CUDA backend on the operands as given. What only one backend needs stays in
// it: the CPU's range checks of ids, targets and starts (read in host
// memory), CUDA's supported head sizes.
//
// A failed check is a broken invariant of the caller: CHECK (file, line,
// message, abort). Stateless and thread-safe.
#ifndef SMALLEM_ENGINE_OP_CHECKS_H_
#define SMALLEM_ENGINE_OP_CHECKS_H_

#include <cstdint>

#include "engine/backend.h"
#include "engine/tensor.h"
#include "runspec/model_config.h"  // NormKind

namespace smallem {

// A tensor of `numel` elements, non-empty, of the named type; `what` names it
// in the message ("adamw: grad").
void CheckF32(const Tensor& t, int64_t numel, const char* what);
void CheckI32(const Tensor& t, int64_t numel, const char* what);
// An [act] operand: f32 or bf16.
void CheckActivation(const Tensor& t, int64_t numel, const char* what);
// Operands may alias only when they have one dtype (engine/backend.h,
// "Activations"): a bf16 view of f32 elements, or the reverse, is garbage.
void CheckAliasSameDType(const Tensor& a, const Tensor& b, const char* what);

void CheckMatmul(const MatmulParams& p);

// The elementwise ops; `op` names the op in messages ("add", "gelu backward").
// Each operand has the element count of p.out (binary), p.in (unary) or
// p.gate (SwiGLU); an output may alias an input of its dtype.
void CheckBinary(const BinaryParams& p, const char* op);
// Every gradient asked for (grad_a, grad_b; either may be empty). With
// `gradients_read_inputs` (Mul) each also needs the other input: grad_a
// needs b and grad_b needs a; an input no gradient needs may be empty.
void CheckBinaryBackward(const BinaryBackwardParams& p, bool gradients_read_inputs,
                         const char* op);
void CheckUnary(const UnaryParams& p, const char* op);
// REQUIRES: p.grad_in is not empty (a backend returns early when it is).
void CheckUnaryBackward(const UnaryBackwardParams& p, const char* op);
void CheckSwiGlu(const SwiGluParams& p);
void CheckSwiGluBackward(const SwiGluBackwardParams& p);

void CheckBiasAdd(const BiasAddParams& p);
// REQUIRES: p.grad_bias is not empty.
void CheckBiasBackward(const BiasBackwardParams& p);
void CheckBiasGelu(const BiasGeluParams& p);
void CheckBiasGeluBackward(const BiasGeluBackwardParams& p);

// LayerNorm centers each row on its mean and may have a bias; RMSNorm does
// neither (its mean, bias and grad_bias are not read).
void CheckNorm(const NormParams& p, NormKind kind);
void CheckNormBackward(const NormBackwardParams& p, NormKind kind);

// Also: x's rows are positions that the cos/sin tables cover.
void CheckRope(const RopeParams& p);
// REQUIRES: p.grad_in is not empty. grad_in may not alias grad_out.
void CheckRopeBackward(const RopeBackwardParams& p);

void CheckAttention(const AttentionParams& p);
// REQUIRES: p.grad_qkv is not empty.
void CheckAttentionBackward(const AttentionBackwardParams& p);

// q (N, C), source and out (N, 3C); out aliases neither input.
void CheckShareKv(const ShareKvParams& p);
// REQUIRES: p.grad_q or p.grad_source is not empty.
void CheckShareKvBackward(const ShareKvBackwardParams& p);

void CheckEmbedding(const EmbeddingParams& p);
// REQUIRES: p.grad_table is not empty.
void CheckEmbeddingBackward(const EmbeddingBackwardParams& p);

void CheckCrossEntropy(const CrossEntropyParams& p);
// REQUIRES: p.grad_logits is not empty.
void CheckCrossEntropyBackward(const CrossEntropyBackwardParams& p);

// `op` is "sum" or "sum_squares".
void CheckReduce(const ReduceParams& p, const char* op);
void CheckAdamW(const AdamWParams& p);
void CheckRowSumSquares(const RowReduceParams& p);
void CheckRowScale(const RowScaleParams& p);
void CheckGatherSequences(const GatherSequencesParams& p);

// Latent attention's qkv packing: positive heads and head_dim, an even
// rope_dim in (0, head_dim), and each operand sized for out's rows.
void CheckLatentQkv(const LatentQkvParams& p);
void CheckLatentQkvBackward(const LatentQkvBackwardParams& p);

// The mixture-of-experts ops (engine/op_checks_moe.cc). Sizes come from
// the operands: N and k from experts (N, k), E from logits (N, E).
void CheckMoeRoute(const MoeRouteParams& p);
void CheckMoeRouteBackward(const MoeRouteBackwardParams& p);
void CheckMoeBalance(const MoeBalanceParams& p);
void CheckMoeDispatch(const MoeDispatchParams& p);
void CheckMoeDispatchBackward(const MoeDispatchBackwardParams& p);
void CheckMoeCombine(const MoeCombineParams& p);
void CheckMoeCombineBackward(const MoeCombineBackwardParams& p);
void CheckGroupedMatmul(const GroupedMatmulParams& p);
// REQUIRES: grad_x or grad_weight is not empty.
void CheckGroupedMatmulBackward(const GroupedMatmulBackwardParams& p);

}  // namespace smallem

#endif  // SMALLEM_ENGINE_OP_CHECKS_H_
