// The engine's ops, listed once. Everything else that names
// every op is generated from these two X-macros: the Op enumeration and its
// name table (engine/op.h), Backend's pure virtual methods
// (engine/backend.h), the override declarations of CpuBackend, CudaBackend
// and ProfilingBackend, ForwardingBackend's forwarding bodies
// (engine/forwarding_backend.h) and the CPU reference's bf16 operand
// visitors (engine/cpu/bf16_ops.h).
//
// SMALLEM_OPS(X) holds one X(kEnumerator, "name") per op family: an Op,
// named after the file of its CPU reference and of its CUDA kernel
// (engine/cpu/rms_norm.cc, kernels/rms_norm.cu).
//
// SMALLEM_BACKEND_OPS(X) holds one X(Method, Params, kEnumerator) per
// Backend method `void Method(const Params& p)`, kEnumerator being the Op
// it belongs to (forward and backward share one). Every backend implements
// every method: Backend has no defaults.
//
// A new op is one entry in each list (and its params struct in
// engine/backend.h); the compiler then asks for every implementation.
//
// Use: define X, expand the list, undefine X:
//   #define SMALLEM_OP_NAME(op, name) name,
//   SMALLEM_OPS(SMALLEM_OP_NAME)
//   #undef SMALLEM_OP_NAME
#ifndef SMALLEM_ENGINE_OP_LIST_H_
#define SMALLEM_ENGINE_OP_LIST_H_

#define SMALLEM_OPS(X)                                                                    \
  X(kMatmul, "matmul")               /* batched GEMM with transposes, both gradients */   \
  X(kAdd, "add")                     /* out = a + b */                                    \
  X(kMul, "mul")                     /* out = a * b (elementwise) */                      \
  X(kGelu, "gelu")                   /* tanh approximation */                             \
  X(kSilu, "silu")                   /* x * sigmoid(x) */                                 \
  X(kSwiGlu, "swiglu")               /* silu(gate) * up, fused */                         \
  X(kBiasAdd, "bias_add")            /* x[n, :] += bias */                                \
  X(kLayerNorm, "layer_norm")        /* (x - mean) * rstd * gain + bias */                \
  X(kRmsNorm, "rms_norm")            /* x * rstd * gain */                                \
  X(kRope, "rope")                   /* rotary positions on adjacent pairs */             \
  X(kAttention, "attention")         /* causal multi-head attention from packed qkv */    \
  X(kEmbedding, "embedding")         /* row gather / deterministic scatter-add */         \
  X(kCrossEntropy, "cross_entropy")  /* per-row softmax cross-entropy from logits */      \
  X(kSum, "sum")                     /* sum of all elements to a scalar */                \
  X(kSumSquares, "sum_squares")      /* sum of squares to a scalar (gradient norm) */     \
  X(kAdamW, "adamw")                 /* fused AdamW update with global-norm clipping */   \
  X(kRowSumSquares, "row_sum_squares") /* per-row sum of squares (optimizer, no grad) */  \
  X(kRowScale, "row_scale")          /* rows scaled by √numer / √(denom + eps) */         \
  X(kGatherSequences, "gather_sequences") /* inputs and targets from device tokens */ \
  X(kLatentQkv, "latent_qkv")        /* latent attention's parts packed into qkv */    \
  X(kShareKv, "share_kv")            /* packed qkv: own queries, borrowed keys/values */ \
  X(kBiasGelu, "bias_gelu")          /* gelu(x + bias), one pass */ \
  X(kMoeRoute, "moe_route")          /* top-k experts, gates, sort by expert, balance */  \
  X(kMoePermute, "moe_permute")      /* rows to expert order and back, with gates */      \
  X(kGroupedMatmul, "grouped_matmul") /* one product per group of contiguous rows */

// The methods every backend implements.
#define SMALLEM_BACKEND_OPS(X)                                       \
  X(Matmul, MatmulParams, kMatmul)                                  \
  X(Add, BinaryParams, kAdd)                                        \
  X(AddBackward, BinaryBackwardParams, kAdd)                        \
  X(Mul, BinaryParams, kMul)                                        \
  X(MulBackward, BinaryBackwardParams, kMul)                        \
  X(GeluForward, UnaryParams, kGelu)                                \
  X(GeluBackward, UnaryBackwardParams, kGelu)                       \
  X(SiluForward, UnaryParams, kSilu)                                \
  X(SiluBackward, UnaryBackwardParams, kSilu)                       \
  X(SwiGluForward, SwiGluParams, kSwiGlu)                           \
  X(SwiGluBackward, SwiGluBackwardParams, kSwiGlu)                  \
  X(BiasAdd, BiasAddParams, kBiasAdd)                               \
  X(BiasBackward, BiasBackwardParams, kBiasAdd)                     \
  X(LayerNormForward, NormParams, kLayerNorm)                       \
  X(LayerNormBackward, NormBackwardParams, kLayerNorm)              \
  X(RmsNormForward, NormParams, kRmsNorm)                           \
  X(RmsNormBackward, NormBackwardParams, kRmsNorm)                  \
  X(RopeForward, RopeParams, kRope)                                 \
  X(RopeBackward, RopeBackwardParams, kRope)                        \
  X(AttentionForward, AttentionParams, kAttention)                  \
  X(AttentionBackward, AttentionBackwardParams, kAttention)         \
  X(EmbeddingForward, EmbeddingParams, kEmbedding)                  \
  X(EmbeddingBackward, EmbeddingBackwardParams, kEmbedding)         \
  X(CrossEntropyForward, CrossEntropyParams, kCrossEntropy)         \
  X(CrossEntropyBackward, CrossEntropyBackwardParams, kCrossEntropy) \
  X(Sum, ReduceParams, kSum)                                        \
  X(SumSquares, ReduceParams, kSumSquares)                          \
  X(AdamW, AdamWParams, kAdamW)                                     \
  X(GatherSequences, GatherSequencesParams, kGatherSequences)      \
  X(LatentQkvForward, LatentQkvParams, kLatentQkv)                  \
  X(LatentQkvBackward, LatentQkvBackwardParams, kLatentQkv)         \
  X(ShareKvForward, ShareKvParams, kShareKv)                        \
  X(ShareKvBackward, ShareKvBackwardParams, kShareKv)               \
  X(BiasGeluForward, BiasGeluParams, kBiasGelu)                     \
  X(BiasGeluBackward, BiasGeluBackwardParams, kBiasGelu)               \
  X(MoeRouteForward, MoeRouteParams, kMoeRoute)                     \
  X(MoeRouteBackward, MoeRouteBackwardParams, kMoeRoute)            \
  X(MoeBalance, MoeBalanceParams, kMoeRoute)                        \
  X(MoeDispatchForward, MoeDispatchParams, kMoePermute)             \
  X(MoeDispatchBackward, MoeDispatchBackwardParams, kMoePermute)    \
  X(MoeCombineForward, MoeCombineParams, kMoePermute)               \
  X(MoeCombineBackward, MoeCombineBackwardParams, kMoePermute)      \
  X(GroupedMatmulForward, GroupedMatmulParams, kGroupedMatmul)      \
  X(GroupedMatmulBackward, GroupedMatmulBackwardParams, kGroupedMatmul) \
  X(RowSumSquares, RowReduceParams, kRowSumSquares)                 \
  X(RowScale, RowScaleParams, kRowScale)

// For a backend's class body: `void Method(const Params& p) override;` for
// every op, as SMALLEM_BACKEND_OPS(SMALLEM_DECLARE_OP_OVERRIDE).
#define SMALLEM_DECLARE_OP_OVERRIDE(Method, Params, op) void Method(const Params& p) override;

#endif  // SMALLEM_ENGINE_OP_LIST_H_
