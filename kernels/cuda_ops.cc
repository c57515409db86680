// CudaBackend's ops: each checks its operands against the op's contract
// (engine/op_checks.h, as the CPU reference does), then hands raw pointers
// and sizes to the launchers of kernels/kernels.h and kernels/matmul.h.
#include <cstdint>

#include "base/check.h"
#include "engine/op_checks.h"
#include "kernels/cuda_backend.h"
#include "kernels/cuda_check.h"
#include "kernels/kernels.h"

namespace smallem {
namespace {

// An activation operand (engine/backend.h, "Activations"): f32 or bf16,
// passed to the kernels with its type. An empty one is a null operand.
using cuda::ActIn;
using cuda::ActOut;

ActIn AsActIn(const Tensor& t) {
  CHECK(t.dtype == DType::kF32 || t.dtype == DType::kBF16)
      << "an activation must be f32 or bf16, is " << DTypeName(t.dtype);
  return ActIn{t.data, t.dtype == DType::kBF16};
}

ActOut AsActOut(const Tensor& t) {
  CHECK(t.dtype == DType::kF32 || t.dtype == DType::kBF16)
      << "an activation must be f32 or bf16, is " << DTypeName(t.dtype);
  return ActOut{t.data, t.dtype == DType::kBF16};
}

// An optional activation (a gradient that may not be needed): a null
// operand when empty.
ActOut ActOutOrNull(const Tensor& t) { return t.empty() ? ActOut{} : AsActOut(t); }

// The data of an optional f32 operand, or null.
float* F32OrNull(const Tensor& t) { return t.empty() ? nullptr : t.f32(); }

// The CUDA kernels exist for a few head sizes only.
cuda::AttentionShape AttentionShapeOf(int64_t batch, int64_t time, int64_t heads,
                                      int64_t head_dim, const char* op) {
  CHECK(cuda::AttentionSupportsHeadDim(head_dim))
      << op << ": head size " << head_dim
      << " has no CUDA kernel (supported: 32, 64, 128); change embed or heads";
  return cuda::AttentionShape{batch, time, heads, head_dim};
}

}  // namespace

void CudaBackend::Matmul(const MatmulParams& p) {
  CheckMatmul(p);
  const cuda::MatmulArgs args{.a = AsActIn(p.a), .b = AsActIn(p.b), .out = AsActOut(p.out),
                              .m = p.m, .n = p.n, .k = p.k,
                              .trans_a = p.trans_a, .trans_b = p.trans_b,
                              .batch = p.batch, .stride_a = p.stride_a,
                              .stride_b = p.stride_b, .stride_out = p.stride_out,
                              .alpha = p.alpha, .beta = p.beta};
  const cudaError_t e = matmul_->Run(args, matmul_precision_, stream_);
  CHECK(e == cudaSuccess) << "matmul (m=" << p.m << " n=" << p.n << " k=" << p.k
                          << " batch=" << p.batch << "): " << cudaGetErrorName(e) << " ("
                          << cudaGetErrorString(e) << "), cuBLAS: "
                          << cublasGetStatusString(matmul_->blas_status())
                          << (capturing_ ? "; inside a captured step: the staging had to "
                                           "grow, so this product never ran uncaptured"
                                         : "");
  UpdatePeak();  // the bf16 staging buffers may have grown
}

// ---------------------------------------------------------- elementwise

void CudaBackend::Add(const BinaryParams& p) {
  CheckBinary(p, "add");
  CheckCuda(cuda::LaunchAddForward(AsActIn(p.a), AsActIn(p.b), AsActOut(p.out), p.out.numel(),
                                   stream_),
            "add");
}

void CudaBackend::AddBackward(const BinaryBackwardParams& p) {
  CheckBinaryBackward(p, /*gradients_read_inputs=*/false, "add backward");
  CheckCuda(cuda::LaunchAddBackward(AsActIn(p.grad_out), ActOutOrNull(p.grad_a),
                                    ActOutOrNull(p.grad_b), p.grad_out.numel(), stream_),
            "add backward");
}

void CudaBackend::Mul(const BinaryParams& p) {
  CheckBinary(p, "mul");
  CheckCuda(cuda::LaunchMulForward(AsActIn(p.a), AsActIn(p.b), AsActOut(p.out), p.out.numel(),
                                   stream_),
            "mul");
}

void CudaBackend::MulBackward(const BinaryBackwardParams& p) {
  CheckBinaryBackward(p, /*gradients_read_inputs=*/true, "mul backward");
  // grad_a needs b and grad_b needs a; an input not needed is not read.
  const ActIn a = p.grad_b.empty() ? ActIn{} : AsActIn(p.a);
  const ActIn b = p.grad_a.empty() ? ActIn{} : AsActIn(p.b);
  CheckCuda(cuda::LaunchMulBackward(a, b, AsActIn(p.grad_out), ActOutOrNull(p.grad_a),
                                    ActOutOrNull(p.grad_b), p.grad_out.numel(), stream_),
            "mul backward");
}

void CudaBackend::GeluForward(const UnaryParams& p) {
  CheckUnary(p, "gelu");
  CheckCuda(cuda::LaunchGeluForward(AsActIn(p.in), AsActOut(p.out), p.in.numel(), stream_),
            "gelu");
}

void CudaBackend::GeluBackward(const UnaryBackwardParams& p) {
  if (p.grad_in.empty()) return;
  CheckUnaryBackward(p, "gelu backward");
  CheckCuda(cuda::LaunchGeluBackward(AsActIn(p.in), AsActIn(p.grad_out), AsActOut(p.grad_in),
                                     p.in.numel(), stream_),
            "gelu backward");
}

void CudaBackend::SiluForward(const UnaryParams& p) {
  CheckUnary(p, "silu");
  CheckCuda(cuda::LaunchSiluForward(AsActIn(p.in), AsActOut(p.out), p.in.numel(), stream_),
            "silu");
}

void CudaBackend::SiluBackward(const UnaryBackwardParams& p) {
  if (p.grad_in.empty()) return;
  CheckUnaryBackward(p, "silu backward");
  CheckCuda(cuda::LaunchSiluBackward(AsActIn(p.in), AsActIn(p.grad_out), AsActOut(p.grad_in),
                                     p.in.numel(), stream_),
            "silu backward");
}

void CudaBackend::SwiGluForward(const SwiGluParams& p) {
  CheckSwiGlu(p);
  CheckCuda(cuda::LaunchSwiGluForward(AsActIn(p.gate), AsActIn(p.up), AsActOut(p.out),
                                      p.gate.numel(), stream_),
            "swiglu");
}

void CudaBackend::SwiGluBackward(const SwiGluBackwardParams& p) {
  CheckSwiGluBackward(p);
  // The kernel adds; overwritten gradients start from zeros.
  for (const Tensor& grad : {p.grad_gate, p.grad_up}) {
    if (p.overwrite && !grad.empty()) {
      CheckCuda(cudaMemsetAsync(grad.data, 0, grad.bytes(), stream_),
                "swiglu backward (zeroing an overwritten gradient)");
    }
  }
  CheckCuda(cuda::LaunchSwiGluBackward(AsActIn(p.gate), AsActIn(p.up), AsActIn(p.grad_out),
                                       ActOutOrNull(p.grad_gate), ActOutOrNull(p.grad_up),
                                       p.gate.numel(), stream_),
            "swiglu backward");
}

void CudaBackend::BiasAdd(const BiasAddParams& p) {
  CheckBiasAdd(p);
  CheckCuda(cuda::LaunchBiasAddForward(AsActOut(p.x), p.bias.f32(), p.x.shape.rows(),
                                       p.bias.numel(), stream_),
            "bias_add");
}

void CudaBackend::BiasBackward(const BiasBackwardParams& p) {
  if (p.grad_bias.empty()) return;
  CheckBiasBackward(p);
  const int64_t rows = p.grad_out.shape.rows(), cols = p.grad_bias.numel();
  float* scratch = Scratch(cuda::BiasBackwardScratchFloats(rows, cols));
  CheckCuda(cuda::LaunchBiasAddBackward(AsActIn(p.grad_out), p.grad_bias.f32(), rows, cols,
                                        scratch, stream_),
            "bias backward");
}

void CudaBackend::BiasGeluForward(const BiasGeluParams& p) {
  CheckBiasGelu(p);
  CheckCuda(cuda::LaunchBiasGeluForward(AsActIn(p.x), F32OrNull(p.bias), AsActOut(p.out),
                                        p.x.shape.rows(), p.x.shape.cols(), stream_),
            "bias_gelu");
}

void CudaBackend::BiasGeluBackward(const BiasGeluBackwardParams& p) {
  if (p.grad_x.empty() && p.grad_bias.empty()) return;
  CheckBiasGeluBackward(p);
  const int64_t rows = p.x.shape.rows(), cols = p.x.shape.cols();
  float* scratch =
      p.grad_bias.empty() ? nullptr : Scratch(cuda::BiasGeluBackwardScratchFloats(rows, cols));
  CheckCuda(cuda::LaunchBiasGeluBackward(AsActIn(p.x), F32OrNull(p.bias), AsActIn(p.grad_out),
                                         ActOutOrNull(p.grad_x), p.overwrite,
                                         F32OrNull(p.grad_bias), rows, cols, scratch, stream_),
            "bias_gelu backward");
}

// ---------------------------------------------------------------- norms

void CudaBackend::LayerNormForward(const NormParams& p) {
  CheckNorm(p, NormKind::kLayer);
  CheckCuda(cuda::LaunchLayerNormForward(AsActIn(p.x), AsActIn(p.residual), p.gain.f32(),
                                         F32OrNull(p.bias), AsActOut(p.sum), AsActOut(p.out),
                                         F32OrNull(p.mean), F32OrNull(p.rstd), p.x.shape.rows(),
                                         p.gain.numel(), p.eps, stream_),
            "layer_norm");
}

void CudaBackend::LayerNormBackward(const NormBackwardParams& p) {
  CheckNormBackward(p, NormKind::kLayer);
  const int64_t rows = p.x.shape.rows(), cols = p.gain.numel();
  float* scratch = Scratch(cuda::LayerNormBackwardScratchFloats(rows, cols));
  CheckCuda(cuda::LaunchLayerNormBackward(AsActIn(p.x), p.gain.f32(), p.mean.f32(),
                                          p.rstd.f32(), AsActIn(p.grad_out),
                                          ActOutOrNull(p.grad_x), F32OrNull(p.grad_gain),
                                          F32OrNull(p.grad_bias), rows, cols, scratch, stream_),
            "layer_norm backward");
}

void CudaBackend::RmsNormForward(const NormParams& p) {
  CheckNorm(p, NormKind::kRms);
  CheckCuda(cuda::LaunchRmsNormForward(AsActIn(p.x), AsActIn(p.residual), p.gain.f32(),
                                       AsActOut(p.sum), AsActOut(p.out), F32OrNull(p.rstd),
                                       p.x.shape.rows(), p.gain.numel(), p.eps, stream_),
            "rms_norm");
}

void CudaBackend::RmsNormBackward(const NormBackwardParams& p) {
  CheckNormBackward(p, NormKind::kRms);
  const int64_t rows = p.x.shape.rows(), cols = p.gain.numel();
  float* scratch = Scratch(cuda::RmsNormBackwardScratchFloats(rows, cols));
  CheckCuda(cuda::LaunchRmsNormBackward(AsActIn(p.x), p.gain.f32(), p.rstd.f32(),
                                        AsActIn(p.grad_out), ActOutOrNull(p.grad_x),
                                        F32OrNull(p.grad_gain), rows, cols, scratch, stream_),
            "rms_norm backward");
}

// ----------------------------------------------------- rope, attention

void CudaBackend::RopeForward(const RopeParams& p) {
  CheckRope(p);
  const cuda::RopeShape shape{p.x.shape.rows(), p.x.shape.cols(), p.time,
                              p.head_dim,       p.rotate_channels, p.position_offset};
  CheckCuda(cuda::LaunchRopeForward(AsActIn(p.x), AsActOut(p.out), p.cos.f32(), p.sin.f32(),
                                    shape, stream_),
            "rope");
}

void CudaBackend::RopeBackward(const RopeBackwardParams& p) {
  if (p.grad_in.empty()) return;
  CheckRopeBackward(p);
  const cuda::RopeShape shape{p.grad_out.shape.rows(), p.grad_out.shape.cols(), p.time,
                              p.head_dim, p.rotate_channels, p.position_offset};
  // The kernel adds; an overwritten gradient starts from zeros.
  if (p.overwrite) {
    CheckCuda(cudaMemsetAsync(p.grad_in.data, 0, p.grad_in.bytes(), stream_),
              "rope backward (zeroing an overwritten gradient)");
  }
  CheckCuda(cuda::LaunchRopeBackward(AsActIn(p.grad_out), AsActOut(p.grad_in), p.cos.f32(),
                                     p.sin.f32(), shape, stream_),
            "rope backward");
}

void CudaBackend::AttentionForward(const AttentionParams& p) {
  CheckAttention(p);
  const cuda::AttentionShape shape =
      AttentionShapeOf(p.batch, p.time, p.heads, p.head_dim, "attention");
  float* lse = F32OrNull(p.lse);
  // The speed mode runs attention's products on the tensor cores too.
  if (matmul_precision_ == MatmulPrecision::kBf16) {
    CheckCuda(cuda::LaunchAttentionForwardBf16(AsActIn(p.qkv), AsActOut(p.out), lse, shape,
                                               stream_),
              "attention (bf16; a bf16 qkv must be 16-byte aligned)");
    return;
  }
  CheckCuda(cuda::LaunchAttentionForward(AsActIn(p.qkv), AsActOut(p.out), lse, shape, stream_),
            "attention");
}

void CudaBackend::AttentionBackward(const AttentionBackwardParams& p) {
  if (p.grad_qkv.empty()) return;
  CheckAttentionBackward(p);
  const cuda::AttentionShape shape =
      AttentionShapeOf(p.batch, p.time, p.heads, p.head_dim, "attention backward");
  float* scratch = Scratch(cuda::AttentionBackwardScratchFloats(shape));
  // The kernels add; an overwritten gradient starts from zeros (all-zero
  // bits are 0 in f32 and bf16 alike).
  if (p.overwrite) {
    CheckCuda(cudaMemsetAsync(p.grad_qkv.data, 0, p.grad_qkv.bytes(), stream_),
              "attention backward (zeroing an overwritten gradient)");
  }
  if (matmul_precision_ == MatmulPrecision::kBf16) {
    CheckCuda(cuda::LaunchAttentionBackwardBf16(AsActIn(p.qkv), AsActIn(p.out), p.lse.f32(),
                                                AsActIn(p.grad_out), AsActOut(p.grad_qkv),
                                                shape, scratch, stream_),
              "attention backward (bf16; a bf16 qkv or grad_out must be 16-byte aligned)");
    return;
  }
  CheckCuda(cuda::LaunchAttentionBackward(AsActIn(p.qkv), AsActIn(p.out), p.lse.f32(),
                                          AsActIn(p.grad_out), AsActOut(p.grad_qkv), shape,
                                          scratch, stream_),
            "attention backward");
}

// ------------------------------------------------- embedding and loss

void CudaBackend::EmbeddingForward(const EmbeddingParams& p) {
  CheckEmbedding(p);
  CheckCuda(cuda::LaunchEmbeddingForward(p.ids.i32(), p.table.f32(), p.out.f32(), p.ids.numel(),
                                         p.table.shape.rows(), p.table.shape.cols(), stream_),
            "embedding");
}

void CudaBackend::EmbeddingBackward(const EmbeddingBackwardParams& p) {
  if (p.grad_table.empty()) return;
  CheckEmbeddingBackward(p);
  CheckCuda(cuda::LaunchEmbeddingBackward(p.ids.i32(), p.grad_out.f32(), p.grad_table.f32(),
                                          p.ids.numel(), p.grad_table.shape.rows(),
                                          p.grad_table.shape.cols(), stream_),
            "embedding backward");
}

void CudaBackend::CrossEntropyForward(const CrossEntropyParams& p) {
  CheckCrossEntropy(p);
  CheckCuda(cuda::LaunchCrossEntropyForward(p.logits.f32(), p.targets.i32(), p.losses.f32(),
                                            F32OrNull(p.lse), p.logits.shape.rows(),
                                            p.logits.shape.cols(), stream_),
            "cross_entropy");
}

void CudaBackend::CrossEntropyBackward(const CrossEntropyBackwardParams& p) {
  if (p.grad_logits.empty()) return;
  CheckCrossEntropyBackward(p);
  CheckCuda(cuda::LaunchCrossEntropyBackward(p.logits.f32(), p.targets.i32(), p.lse.f32(),
                                             p.grad_losses.f32(), AsActOut(p.grad_logits),
                                             p.logits.shape.rows(), p.logits.shape.cols(),
                                             p.overwrite, stream_),
            "cross_entropy backward");
}

// ------------------------------------------ reductions, optimizer, data

void CudaBackend::Reduce(const ReduceParams& p, bool squares) {
  const char* op = squares ? "sum_squares" : "sum";
  CheckReduce(p, op);
  const int64_t count = p.in.numel();
  float* scratch = Scratch(cuda::ReduceScratchFloats(count));
  CheckCuda(cuda::LaunchReduce(p.in.f32(), count,
                               squares ? cuda::ReduceKind::kSumSquares : cuda::ReduceKind::kSum,
                               p.accumulate, p.out.f32(), scratch, stream_),
            op);
}

void CudaBackend::Sum(const ReduceParams& p) { Reduce(p, /*squares=*/false); }

void CudaBackend::SumSquares(const ReduceParams& p) { Reduce(p, /*squares=*/true); }

void CudaBackend::AdamW(const AdamWParams& p) {
  CheckAdamW(p);
  const bool clip = !p.grad_norm_sq.empty() && p.max_grad_norm > 0;
  cuda::AdamWHyper hyper;
  hyper.beta1 = p.beta1;
  hyper.beta2 = p.beta2;
  hyper.eps = p.eps;
  hyper.weight_decay = p.weight_decay;
  hyper.max_grad_norm = p.max_grad_norm;
  if (p.scalars.empty()) {
    // Bias corrections in double on the host, as in the CPU reference; with
    // scalars given, lr and the bias corrections are read on the device.
    const AdamWStepScalars s = MakeAdamWStepScalars(p.lr, p.beta1, p.beta2, p.step);
    hyper.lr = s.lr;
    hyper.correction1 = s.correction1;
    hyper.correction2 = s.correction2;
  }
  CheckCuda(cuda::LaunchAdamW(p.param.f32(), p.grad.f32(), p.m.f32(), p.v.f32(),
                              clip ? p.grad_norm_sq.f32() : nullptr, F32OrNull(p.scalars),
                              p.param.numel(), hyper, stream_),
            "adamw");
}

void CudaBackend::RowSumSquares(const RowReduceParams& p) {
  CheckRowSumSquares(p);
  CheckCuda(cuda::LaunchRowSumSquares(p.in.f32(), p.in.shape.rows(), p.in.shape.cols(), p.alpha,
                                      p.beta, p.out.f32(), stream_),
            "row_sum_squares");
}

void CudaBackend::RowScale(const RowScaleParams& p) {
  CheckRowScale(p);
  CheckCuda(cuda::LaunchRowScale(p.in.f32(), p.in.shape.rows(), p.in.shape.cols(),
                                 F32OrNull(p.numer), F32OrNull(p.denom), F32OrNull(p.scale),
                                 p.alpha, p.eps, p.out.f32(), stream_),
            "row_scale");
}

void CudaBackend::GatherSequences(const GatherSequencesParams& p) {
  CheckGatherSequences(p);
  const int64_t rows = p.starts.numel();
  CheckCuda(cuda::LaunchGatherSequences(p.tokens.i32(), p.tokens.numel(), p.starts.i32(), rows,
                                        p.time, p.inputs.i32(), p.targets.i32(), stream_),
            "gather_sequences");
}

void CudaBackend::LatentQkvForward(const LatentQkvParams& p) {
  CheckLatentQkv(p);
  const cuda::LatentQkvShape shape{p.out.numel() / (3 * p.heads * p.head_dim), p.heads,
                                   p.head_dim, p.rope_dim};
  CheckCuda(cuda::LaunchLatentQkvForward(AsActIn(p.q), AsActIn(p.kv), AsActIn(p.k_rope),
                                         AsActOut(p.out), shape, stream_),
            "latent_qkv");
}

void CudaBackend::LatentQkvBackward(const LatentQkvBackwardParams& p) {
  if (p.grad_q.empty() && p.grad_kv.empty() && p.grad_k_rope.empty()) return;
  CheckLatentQkvBackward(p);
  const cuda::LatentQkvShape shape{p.grad_out.numel() / (3 * p.heads * p.head_dim), p.heads,
                                   p.head_dim, p.rope_dim};
  CheckCuda(cuda::LaunchLatentQkvBackward(AsActIn(p.grad_out), ActOutOrNull(p.grad_q),
                                          ActOutOrNull(p.grad_kv), ActOutOrNull(p.grad_k_rope),
                                          shape, stream_),
            "latent_qkv backward");
}

// --------------------------------------------------------------- share_kv

void CudaBackend::ShareKvForward(const ShareKvParams& p) {
  CheckShareKv(p);
  CheckCuda(cuda::LaunchShareKvForward(AsActIn(p.q), AsActIn(p.source), AsActOut(p.out),
                                       p.q.shape.rows(), p.q.shape.cols(), stream_),
            "share_kv");
}

void CudaBackend::ShareKvBackward(const ShareKvBackwardParams& p) {
  if (p.grad_q.empty() && p.grad_source.empty()) return;
  CheckShareKvBackward(p);
  CheckCuda(cuda::LaunchShareKvBackward(AsActIn(p.grad_out), ActOutOrNull(p.grad_q),
                                        ActOutOrNull(p.grad_source), p.grad_out.shape.rows(),
                                        p.grad_out.shape.cols() / 3, stream_),
            "share_kv backward");
}

}  // namespace smallem
