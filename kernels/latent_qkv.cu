// Latent attention's qkv (engine/backend.h, LatentQkvParams): the query, the
// rebuilt keys and values and the one shared rotary key packed per head for
// the attention kernels. Forward: one thread per output element, a gather.
// Backward: one thread per element of the row's q, kv and k_rope; each
// q/kv element has one source in grad_out, each k_rope element sums its H
// key heads in f32. x, out and the gradients f32 or bf16
// (kernels/activation_path.cuh).
#include "kernels/activation_path.cuh"
#include "kernels/device_util.cuh"
#include "kernels/kernels.h"

namespace smallem::cuda {
namespace {

constexpr int kThreads = 256;

// Widths of one row.
struct Widths {
  int64_t c, content, q, kv, out;  // H·D, Dn, H·D, H·Dn + H·D, 3·H·D
};

__host__ __device__ Widths WidthsOf(const LatentQkvShape& s) {
  const int64_t c = s.heads * s.head_dim, content = s.head_dim - s.rope_dim;
  return Widths{c, content, c, s.heads * content + c, 3 * c};
}

template <bool kMixed>
__global__ void LatentQkvForwardKernel(ActIn q, ActIn kv, ActIn k_rope, ActOut out,
                                       LatentQkvShape s) {
  const Widths w = WidthsOf(s);
  const int64_t count = s.rows * w.out;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < count;
       idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = idx / w.out, col = idx % w.out;
    const int64_t part = col / w.c;  // 0 query, 1 key, 2 value
    const int64_t within = col % w.c;
    const int64_t head = within / s.head_dim, i = within % s.head_dim;
    float v;
    if (part == 2) {
      v = LoadAct<kMixed>(kv, row * w.kv + s.heads * w.content + within);
    } else if (part == 0) {
      v = i < s.rope_dim
              ? LoadAct<kMixed>(q, row * w.q + head * s.rope_dim + i)
              : LoadAct<kMixed>(q, row * w.q + s.heads * s.rope_dim + head * w.content +
                                       (i - s.rope_dim));
    } else {
      v = i < s.rope_dim ? LoadAct<kMixed>(k_rope, row * s.rope_dim + i)
                         : LoadAct<kMixed>(kv, row * w.kv + head * w.content + (i - s.rope_dim));
    }
    StoreAct<kMixed>(out, idx, v);
  }
}

// Units of one row: q (H·D), then kv (H·Dn + H·D), then k_rope (R).
template <bool kMixed>
__global__ void LatentQkvBackwardKernel(ActIn grad_out, ActOut grad_q, ActOut grad_kv,
                                        ActOut grad_k_rope, LatentQkvShape s) {
  const Widths w = WidthsOf(s);
  const int64_t units = w.q + w.kv + s.rope_dim;
  const int64_t count = s.rows * units;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < count;
       idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = idx / units, unit = idx % units;
    const int64_t g = row * w.out;
    if (unit < w.q) {
      if (grad_q.data == nullptr) continue;
      const int64_t rotary = s.heads * s.rope_dim;
      const int64_t col = unit < rotary
                              ? (unit / s.rope_dim) * s.head_dim + unit % s.rope_dim
                              : ((unit - rotary) / w.content) * s.head_dim + s.rope_dim +
                                    (unit - rotary) % w.content;
      AccumulateAct<kMixed>(grad_q, row * w.q + unit, LoadAct<kMixed>(grad_out, g + col));
    } else if (unit < w.q + w.kv) {
      if (grad_kv.data == nullptr) continue;
      const int64_t k = unit - w.q;
      const int64_t keys = s.heads * w.content;
      const int64_t col = k < keys ? w.c + (k / w.content) * s.head_dim + s.rope_dim +
                                         k % w.content
                                   : 2 * w.c + (k - keys);
      AccumulateAct<kMixed>(grad_kv, row * w.kv + k, LoadAct<kMixed>(grad_out, g + col));
    } else {
      if (grad_k_rope.data == nullptr) continue;
      const int64_t i = unit - w.q - w.kv;
      float sum = 0;
      for (int64_t h = 0; h < s.heads; ++h) {
        sum += LoadAct<kMixed>(grad_out, g + w.c + h * s.head_dim + i);
      }
      AccumulateAct<kMixed>(grad_k_rope, row * s.rope_dim + i, sum);
    }
  }
}

bool Valid(const LatentQkvShape& s) {
  return s.rows >= 0 && s.heads > 0 && s.head_dim > 0 && s.rope_dim > 0 &&
         s.rope_dim % 2 == 0 && s.rope_dim < s.head_dim;
}

}  // namespace

cudaError_t LaunchLatentQkvForward(ActIn q, ActIn kv, ActIn k_rope, ActOut out,
                                   const LatentQkvShape& shape, cudaStream_t stream) {
  if (!Valid(shape)) return cudaErrorInvalidValue;
  if (shape.rows == 0) return cudaSuccess;
  const auto kernel = AnyBf16({q.bf16, kv.bf16, k_rope.bf16, out.bf16})
                          ? LatentQkvForwardKernel<true>
                          : LatentQkvForwardKernel<false>;
  const int64_t count = shape.rows * WidthsOf(shape).out;
  SMALLEM_LAUNCH(kernel, GridStrideBlocks(count, kThreads), kThreads, 0, stream)(q, kv, k_rope, out, shape);
  return cudaGetLastError();
}

cudaError_t LaunchLatentQkvBackward(ActIn grad_out, ActOut grad_q, ActOut grad_kv,
                                    ActOut grad_k_rope, const LatentQkvShape& shape,
                                    cudaStream_t stream) {
  if (!Valid(shape)) return cudaErrorInvalidValue;
  if (shape.rows == 0) return cudaSuccess;
  const auto kernel =
      AnyBf16({grad_out.bf16, grad_q.bf16, grad_kv.bf16, grad_k_rope.bf16})
          ? LatentQkvBackwardKernel<true>
          : LatentQkvBackwardKernel<false>;
  const Widths w = WidthsOf(shape);
  const int64_t count = shape.rows * (w.q + w.kv + shape.rope_dim);
  SMALLEM_LAUNCH(kernel, GridStrideBlocks(count, kThreads), kThreads, 0, stream)(
      grad_out, grad_q, grad_kv, grad_k_rope, shape);
  return cudaGetLastError();
}

}  // namespace smallem::cuda
