// Rotary positions on adjacent pairs: in each head, (x[2i], x[2i+1]) at
// position m rotates by θ = m·10000^(−2i/D), with cos θ and sin θ read from
// the host-computed tables. The backward rotates the gradient by −θ (the
// transpose of a rotation is its inverse).
#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "engine/cpu/bf16_ops.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/cpu_util.h"

namespace smallem {
namespace {

struct RopeLayout {
  int64_t rows;   // B·T
  int64_t width;  // W channels per row
  int64_t half;   // D/2
};

// Shared shape checks of forward and backward.
RopeLayout CheckRope(const Tensor& x, const Tensor& cos, const Tensor& sin,
                     int64_t time, int64_t head_dim, int64_t rotate_channels,
                     int64_t position_offset, const char* op) {
  CHECK(x.data != nullptr && x.dtype == DType::kF32) << op << ": x must be f32";
  CHECK(head_dim > 0 && head_dim % 2 == 0) << op << ": head_dim " << head_dim
                                           << " must be positive and even";
  CHECK_GT(time, 0) << op << ": time";
  CHECK_GE(position_offset, 0) << op << ": position_offset";
  const RopeLayout layout{x.shape.rows(), x.shape.cols(), head_dim / 2};
  CHECK(rotate_channels >= 0 && rotate_channels % head_dim == 0 &&
        rotate_channels <= layout.width)
      << op << ": rotate_channels " << rotate_channels << " must be a multiple "
      << "of head_dim " << head_dim << " within the row width " << layout.width;
  CHECK_EQ(cos.shape.cols(), layout.half) << op << ": cos " << cos.shape.ToString();
  CHECK(cos.shape == sin.shape) << op << ": sin " << sin.shape.ToString()
                                << " vs cos " << cos.shape.ToString();
  cpu::CheckF32(cos, cos.numel(), "rope: cos");
  cpu::CheckF32(sin, sin.numel(), "rope: sin");
  const int64_t last_position = std::min(layout.rows, time) - 1 + position_offset;
  CHECK_LT(last_position, cos.shape.rows())
      << op << ": position beyond the cos/sin tables";
  return layout;
}

}  // namespace

void CpuBackend::RopeForward(const RopeParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::RopeForward)) return;
  const RopeLayout l = CheckRope(p.x, p.cos, p.sin, p.time, p.head_dim,
                                 p.rotate_channels, p.position_offset, "rope");
  cpu::CheckF32(p.out, p.x.numel(), "rope: out");
  const float* x = p.x.f32();
  float* out = p.out.f32();
  const float* cos = p.cos.f32();
  const float* sin = p.sin.f32();
  const bool copy_rest = out != x && p.rotate_channels < l.width;
#pragma omp parallel for num_threads(threads_) if (l.rows * l.width >= cpu::kParallelMin)
  for (int64_t r = 0; r < l.rows; ++r) {
    const int64_t position = r % p.time + p.position_offset;
    const float* c_row = cos + position * l.half;
    const float* s_row = sin + position * l.half;
    const float* x_row = x + r * l.width;
    float* out_row = out + r * l.width;
    for (int64_t h = 0; h < p.rotate_channels; h += p.head_dim) {
      // Reading both of a pair before writing keeps out == x correct.
#pragma omp simd
      for (int64_t i = 0; i < l.half; ++i) {
        const float x0 = x_row[h + 2 * i], x1 = x_row[h + 2 * i + 1];
        out_row[h + 2 * i] = x0 * c_row[i] - x1 * s_row[i];
        out_row[h + 2 * i + 1] = x0 * s_row[i] + x1 * c_row[i];
      }
    }
    if (copy_rest) {
      std::memcpy(out_row + p.rotate_channels, x_row + p.rotate_channels,
                  (l.width - p.rotate_channels) * sizeof(float));
    }
  }
}

void CpuBackend::RopeBackward(const RopeBackwardParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::RopeBackward)) return;
  if (p.grad_in.empty()) return;
  const RopeLayout l =
      CheckRope(p.grad_out, p.cos, p.sin, p.time, p.head_dim,
                p.rotate_channels, p.position_offset, "rope backward");
  cpu::CheckF32(p.grad_in, p.grad_out.numel(), "rope backward: grad_in");
  CHECK(p.grad_in.data != p.grad_out.data)
      << "rope backward: grad_in must not alias grad_out (it accumulates)";
  const float* g = p.grad_out.f32();
  float* grad_in = p.grad_in.f32();
  const float* cos = p.cos.f32();
  const float* sin = p.sin.f32();
#pragma omp parallel for num_threads(threads_) if (l.rows * l.width >= cpu::kParallelMin)
  for (int64_t r = 0; r < l.rows; ++r) {
    const int64_t position = r % p.time + p.position_offset;
    const float* c_row = cos + position * l.half;
    const float* s_row = sin + position * l.half;
    const float* g_row = g + r * l.width;
    float* gi_row = grad_in + r * l.width;
    for (int64_t h = 0; h < p.rotate_channels; h += p.head_dim) {
#pragma omp simd
      for (int64_t i = 0; i < l.half; ++i) {
        const float g0 = g_row[h + 2 * i], g1 = g_row[h + 2 * i + 1];
        gi_row[h + 2 * i] += g0 * c_row[i] + g1 * s_row[i];
        gi_row[h + 2 * i + 1] += g1 * c_row[i] - g0 * s_row[i];
      }
    }
#pragma omp simd
    for (int64_t c = p.rotate_channels; c < l.width; ++c) gi_row[c] += g_row[c];
  }
}

}  // namespace smallem
