// Latent attention's qkv: the query, the rebuilt keys and values and the one
// shared rotary key packed per head as the attention op reads them
// (LatentQkvParams in engine/backend.h). A pure copy forward; the backward
// copies each gradient back and sums the shared rotary key's over the heads.
#include <cstring>

#include "engine/cpu/bf16_ops.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/partition.h"
#include "engine/op_checks.h"

namespace smallem {
namespace {

// Channel counts of one row, from the op's sizes.
struct LatentQkvLayout {
  int64_t heads, head_dim, rope, content;  // H, D, R, Dn = D − R
  int64_t q_width() const { return heads * head_dim; }
  int64_t kv_width() const { return heads * (content + head_dim); }
  int64_t out_width() const { return 3 * heads * head_dim; }
};

LatentQkvLayout LayoutOf(int64_t heads, int64_t head_dim, int64_t rope_dim) {
  return LatentQkvLayout{heads, head_dim, rope_dim, head_dim - rope_dim};
}

}  // namespace

void CpuBackend::LatentQkvForward(const LatentQkvParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::LatentQkvForward)) return;
  CheckLatentQkv(p);
  const LatentQkvLayout l = LayoutOf(p.heads, p.head_dim, p.rope_dim);
  const int64_t rows = p.out.numel() / l.out_width();
  const int64_t c = l.q_width();
  const float* q = p.q.f32();
  const float* kv = p.kv.f32();
  const float* k_rope = p.k_rope.f32();
  float* out = p.out.f32();
  const size_t rope_bytes = l.rope * sizeof(float), content_bytes = l.content * sizeof(float);
#pragma omp parallel for num_threads(threads_) if (rows * l.out_width() >= cpu::kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const float* q_row = q + r * l.q_width();
    const float* kv_row = kv + r * l.kv_width();
    float* o = out + r * l.out_width();
    for (int64_t h = 0; h < l.heads; ++h) {
      float* oq = o + h * l.head_dim;
      float* ok = o + c + h * l.head_dim;
      std::memcpy(oq, q_row + h * l.rope, rope_bytes);
      std::memcpy(oq + l.rope, q_row + l.heads * l.rope + h * l.content, content_bytes);
      std::memcpy(ok, k_rope + r * l.rope, rope_bytes);
      std::memcpy(ok + l.rope, kv_row + h * l.content, content_bytes);
    }
    std::memcpy(o + 2 * c, kv_row + l.heads * l.content, c * sizeof(float));
  }
}

void CpuBackend::LatentQkvBackward(const LatentQkvBackwardParams& p) {
  if (p.grad_q.empty() && p.grad_kv.empty() && p.grad_k_rope.empty()) return;
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::LatentQkvBackward)) return;
  CheckLatentQkvBackward(p);
  const LatentQkvLayout l = LayoutOf(p.heads, p.head_dim, p.rope_dim);
  const int64_t rows = p.grad_out.numel() / l.out_width();
  const int64_t c = l.q_width();
  const float* g = p.grad_out.f32();
  float* grad_q = p.grad_q.empty() ? nullptr : p.grad_q.f32();
  float* grad_kv = p.grad_kv.empty() ? nullptr : p.grad_kv.f32();
  float* grad_k_rope = p.grad_k_rope.empty() ? nullptr : p.grad_k_rope.f32();
#pragma omp parallel for num_threads(threads_) if (rows * l.out_width() >= cpu::kParallelMin)
  for (int64_t r = 0; r < rows; ++r) {
    const float* g_row = g + r * l.out_width();
    for (int64_t h = 0; h < l.heads; ++h) {
      const float* gq = g_row + h * l.head_dim;
      const float* gk = g_row + c + h * l.head_dim;
      if (grad_q != nullptr) {
        float* dq = grad_q + r * l.q_width();
        for (int64_t i = 0; i < l.rope; ++i) dq[h * l.rope + i] += gq[i];
        float* dq_content = dq + l.heads * l.rope + h * l.content;
        for (int64_t i = 0; i < l.content; ++i) dq_content[i] += gq[l.rope + i];
      }
      if (grad_kv != nullptr) {
        float* dk = grad_kv + r * l.kv_width() + h * l.content;
        for (int64_t i = 0; i < l.content; ++i) dk[i] += gk[l.rope + i];
      }
    }
    if (grad_kv != nullptr) {
      float* dv = grad_kv + r * l.kv_width() + l.heads * l.content;
      for (int64_t i = 0; i < c; ++i) dv[i] += g_row[2 * c + i];
    }
    if (grad_k_rope != nullptr) {
      // Summed over the heads in f32, then added once (as a bf16 gradient
      // is: one rounding).
      for (int64_t i = 0; i < l.rope; ++i) {
        float sum = 0;
        for (int64_t h = 0; h < l.heads; ++h) sum += g_row[c + h * l.head_dim + i];
        grad_k_rope[r * l.rope + i] += sum;
      }
    }
  }
}

}  // namespace smallem
