// Rotary positions on adjacent pairs: in each head, (x[2i], x[2i+1]) at
// position m rotates by θ = m·10000^(−2i/D), with cos θ and sin θ read from
// the host-computed tables. The backward rotates the gradient by −θ (the
// transpose of a rotation is its inverse).
#include <cstring>

#include "engine/cpu/bf16_ops.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/partition.h"
#include "engine/op_checks.h"

namespace smallem {
namespace {

struct RopeLayout {
  int64_t rows;   // B·T
  int64_t width;  // W channels per row
  int64_t half;   // D/2
};

RopeLayout LayoutOf(const Tensor& x, int64_t head_dim) {
  return RopeLayout{x.shape.rows(), x.shape.cols(), head_dim / 2};
}

}  // namespace

void CpuBackend::RopeForward(const RopeParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::RopeForward)) return;
  CheckRope(p);
  const RopeLayout l = LayoutOf(p.x, p.head_dim);
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
  CheckRopeBackward(p);
  const RopeLayout l = LayoutOf(p.grad_out, p.head_dim);
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
    // With overwrite, grad_in's prior values are never read.
    for (int64_t h = 0; h < p.rotate_channels; h += p.head_dim) {
#pragma omp simd
      for (int64_t i = 0; i < l.half; ++i) {
        const float g0 = g_row[h + 2 * i], g1 = g_row[h + 2 * i + 1];
        const float a = g0 * c_row[i] + g1 * s_row[i], b = g1 * c_row[i] - g0 * s_row[i];
        gi_row[h + 2 * i] = p.overwrite ? a : gi_row[h + 2 * i] + a;
        gi_row[h + 2 * i + 1] = p.overwrite ? b : gi_row[h + 2 * i + 1] + b;
      }
    }
#pragma omp simd
    for (int64_t c = p.rotate_channels; c < l.width; ++c) {
      gi_row[c] = p.overwrite ? g_row[c] : gi_row[c] + g_row[c];
    }
  }
}

}  // namespace smallem
