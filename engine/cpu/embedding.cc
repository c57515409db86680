// Embedding: a row gather, and its gradient, a scatter-add into the table.
// The scatter is made deterministic by giving each thread a slice of
// channels and walking the ids in order, so repeated ids add up in the same
// order whatever the thread count.
#include <omp.h>

#include <cstring>

#include "base/check.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/partition.h"
#include "engine/op_checks.h"

namespace smallem {
namespace {

// CHECKs every id once, before any thread reads the table with it.
void CheckIds(const int32_t* ids, int64_t count, int64_t vocab, const char* op) {
  for (int64_t n = 0; n < count; ++n) {
    CHECK(ids[n] >= 0 && ids[n] < vocab)
        << op << ": id " << ids[n] << " at " << n << " outside [0, " << vocab << ")";
  }
}

}  // namespace

void CpuBackend::EmbeddingForward(const EmbeddingParams& p) {
  const int64_t count = p.ids.numel();
  const int64_t vocab = p.table.shape.rows();
  const int64_t cols = p.table.shape.cols();
  CheckEmbedding(p);
  const int32_t* ids = p.ids.i32();
  CheckIds(ids, count, vocab, "embedding");
  const float* table = p.table.f32();
  float* out = p.out.f32();
#pragma omp parallel for num_threads(threads_) if (count * cols >= cpu::kParallelMin)
  for (int64_t n = 0; n < count; ++n) {
    std::memcpy(out + n * cols, table + ids[n] * cols, cols * sizeof(float));
  }
}

void CpuBackend::EmbeddingBackward(const EmbeddingBackwardParams& p) {
  if (p.grad_table.empty()) return;
  const int64_t count = p.ids.numel();
  const int64_t vocab = p.grad_table.shape.rows();
  const int64_t cols = p.grad_table.shape.cols();
  CheckEmbeddingBackward(p);
  const int32_t* ids = p.ids.i32();
  CheckIds(ids, count, vocab, "embedding backward");
  const float* g = p.grad_out.f32();
  float* grad_table = p.grad_table.f32();
#pragma omp parallel num_threads(threads_) if (count * cols >= cpu::kParallelMin)
  {
    const int parts = omp_get_num_threads();
    const int part = omp_get_thread_num();
    const int64_t begin = cpu::PartBegin(cols, part, parts);
    const int64_t end = cpu::PartBegin(cols, part + 1, parts);
    for (int64_t n = 0; n < count; ++n) {
      const float* g_row = g + n * cols;
      float* dst = grad_table + ids[n] * cols;
#pragma omp simd
      for (int64_t c = begin; c < end; ++c) dst[c] += g_row[c];
    }
  }
}

}  // namespace smallem
