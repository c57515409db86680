// Per-thread scratch for the CPU ops, so they keep buffers without
// allocating per call. Defined in cpu_backend.cc.
#ifndef SMALLEM_ENGINE_CPU_THREAD_SCRATCH_H_
#define SMALLEM_ENGINE_CPU_THREAD_SCRATCH_H_

#include <cstddef>

namespace smallem::cpu {

// At least `count` floats private to the calling thread, valid until its next
// call.
float* ThreadScratch(size_t count);

}  // namespace smallem::cpu

#endif  // SMALLEM_ENGINE_CPU_THREAD_SCRATCH_H_
