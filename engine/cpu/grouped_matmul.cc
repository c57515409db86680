// Grouped product (engine/backend.h, GroupedMatmulParams): one GEMM per group
// over its contiguous rows — the experts of a MoE layer each see only the
// rows routed to them, never all N. Parallelism splits each group's product
// into slabs across the OpenMP team, as Matmul does.
#include <algorithm>
#include <vector>

#include "base/check.h"
#include "engine/cpu/bf16_ops.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/gemm.h"
#include "engine/op_checks.h"

namespace smallem {
namespace cpu {

void ForEachActivation(GroupedMatmulParams& p, ActivationVisitor visit) {
  visit(p.x, Access::kRead);
  visit(p.out, Access::kWrite);
}

void ForEachActivation(GroupedMatmulBackwardParams& p, ActivationVisitor visit) {
  visit(p.x, Access::kRead);
  visit(p.grad_out, Access::kRead);
  visit(p.grad_x, p.overwrite_x ? Access::kWrite : Access::kUpdate);
}

}  // namespace cpu

namespace {

// (group, slab) tasks: each group cut into `parts` slabs of `side(g)`.
struct Task {
  int64_t group, begin, count;
};

std::vector<Task> Tasks(const int32_t* offsets, int64_t groups, int parts, bool by_rows,
                        int64_t other_side) {
  std::vector<Task> tasks;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t rows = offsets[g + 1] - offsets[g];
    if (rows == 0) continue;
    const int64_t side = by_rows ? rows : other_side;
    // Small groups stay whole: a slab below 16 rows costs more than it saves.
    const int64_t slabs = std::max<int64_t>(1, std::min<int64_t>(parts, side / 16));
    for (int64_t s = 0; s < slabs; ++s) {
      const int64_t begin = side * s / slabs, end = side * (s + 1) / slabs;
      tasks.push_back(Task{g, begin, end - begin});
    }
  }
  return tasks;
}

void CheckOffsets(const int32_t* offsets, int64_t groups, int64_t rows) {
  CHECK_EQ(offsets[0], 0) << "grouped_matmul: offsets[0]";
  for (int64_t g = 0; g < groups; ++g) {
    CHECK_LE(offsets[g], offsets[g + 1]) << "grouped_matmul: offsets decrease at " << g;
  }
  CHECK_EQ(offsets[groups], rows) << "grouped_matmul: offsets end";
}

}  // namespace

void CpuBackend::GroupedMatmulForward(const GroupedMatmulParams& p) {
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::GroupedMatmulForward)) return;
  CheckGroupedMatmul(p);
  const int64_t groups = p.weight.shape[0], m = p.weight.shape[1], k = p.weight.shape[2];
  const int32_t* offsets = p.offsets.i32();
  CheckOffsets(offsets, groups, p.x.shape[0]);
  const std::vector<Task> tasks = Tasks(offsets, groups, threads_, true, 0);
  const float* x = p.x.f32();
  const float* w = p.weight.f32();
  float* out = p.out.f32();
  const int64_t task_count = static_cast<int64_t>(tasks.size());
#pragma omp parallel for num_threads(threads_) schedule(dynamic) if (task_count > 1)
  for (int64_t i = 0; i < task_count; ++i) {
    const Task& t = tasks[i];
    const int64_t row = offsets[t.group] + t.begin;
    cpu::Gemm(gemm_, false, true, t.count, m, k, 1.0f, x + row * k, k, w + t.group * m * k, k, 0.0f,
              out + row * m, m);
  }
}

void CpuBackend::GroupedMatmulBackward(const GroupedMatmulBackwardParams& p) {
  if (p.grad_x.empty() && p.grad_weight.empty()) return;
  if (cpu::MaybeRunWidened(*this, p, &CpuBackend::GroupedMatmulBackward)) return;
  CheckGroupedMatmulBackward(p);
  const int64_t groups = p.weight.shape[0], m = p.weight.shape[1], k = p.weight.shape[2];
  const int32_t* offsets = p.offsets.i32();
  CheckOffsets(offsets, groups, p.x.shape[0]);
  const float* x = p.x.f32();
  const float* w = p.weight.f32();
  const float* g = p.grad_out.f32();
  if (!p.grad_x.empty()) {
    // grad_x_g (R_g, K) += grad_out_g (R_g, M) · W_g (M, K).
    const std::vector<Task> tasks = Tasks(offsets, groups, threads_, true, 0);
    float* grad_x = p.grad_x.f32();
    const int64_t task_count = static_cast<int64_t>(tasks.size());
#pragma omp parallel for num_threads(threads_) schedule(dynamic) if (task_count > 1)
    for (int64_t i = 0; i < task_count; ++i) {
      const Task& t = tasks[i];
      const int64_t row = offsets[t.group] + t.begin;
      cpu::Gemm(gemm_, false, false, t.count, k, m, 1.0f, g + row * m, m, w + t.group * m * k, k,
                p.overwrite_x ? 0.0f : 1.0f, grad_x + row * k, k);
    }
  }
  if (!p.grad_weight.empty()) {
    // grad_W_g (M, K) += grad_out_gᵀ (M, R_g) · x_g (R_g, K), cut along M.
    const std::vector<Task> tasks = Tasks(offsets, groups, threads_, false, m);
    float* grad_w = p.grad_weight.f32();
    const int64_t task_count = static_cast<int64_t>(tasks.size());
#pragma omp parallel for num_threads(threads_) schedule(dynamic) if (task_count > 1)
    for (int64_t i = 0; i < task_count; ++i) {
      const Task& t = tasks[i];
      const int64_t row = offsets[t.group], rows = offsets[t.group + 1] - row;
      cpu::Gemm(gemm_, true, false, t.count, k, rows, 1.0f, g + row * m + t.begin, m, x + row * k,
                k, 1.0f, grad_w + t.group * m * k + t.begin * k, k);
    }
  }
}

}  // namespace smallem
