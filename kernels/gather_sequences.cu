// Training batches gathered on the device from the training split held
// there: row r of the batch is the T + 1 tokens from starts[r], the first T
// its inputs and the last T its targets. The host uploads only the B starts
// each step (engine/train/trainer.cc).
#include <cstdio>

#include "kernels/device_util.cuh"
#include "kernels/kernels.h"

namespace smallem::cuda {
namespace {

constexpr int kThreads = 256;

// tokens: (count) i32; starts: (rows) i32; inputs, targets: (rows, time) i32.
__global__ void GatherSequencesKernel(const int32_t* tokens, int64_t count,
                                      const int32_t* starts, int64_t rows,
                                      int64_t time, int32_t* inputs,
                                      int32_t* targets) {
  const int64_t total = rows * time;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / time, t = i % time;
    const int64_t start = starts[r];
    if (start < 0 || start + time + 1 > count) {
      // A broken invariant (the trainer makes the starts): stop loudly
      // rather than read out of bounds.
      printf("gather_sequences: start %lld of row %lld outside a split of %lld tokens\n",
             static_cast<long long>(start), static_cast<long long>(r),
             static_cast<long long>(count));
      __trap();
    }
    inputs[i] = tokens[start + t];
    targets[i] = tokens[start + t + 1];
  }
}

}  // namespace

cudaError_t LaunchGatherSequences(const int32_t* tokens, int64_t count,
                                  const int32_t* starts, int64_t rows,
                                  int64_t time, int32_t* inputs,
                                  int32_t* targets, cudaStream_t stream) {
  if (rows <= 0 || time <= 0) return cudaSuccess;
  SMALLEM_LAUNCH(GatherSequencesKernel, GridStrideBlocks(rows * time, kThreads), kThreads, 0, stream)(tokens, count, starts, rows, time, inputs,
                                    targets);
  return cudaGetLastError();
}

}  // namespace smallem::cuda
