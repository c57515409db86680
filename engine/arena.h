// Arena: the step's activation memory. Tensors are carved from large backend
// blocks by bumping an offset; Reset() rewinds to the start, so a step that
// makes the same requests in the same order gets the same addresses every
// time — what CUDA-graph capture needs, and no allocation after the first
// step. Not thread-safe.
#ifndef SMALLEM_ENGINE_ARENA_H_
#define SMALLEM_ENGINE_ARENA_H_

#include <cstddef>
#include <vector>

#include "engine/backend.h"
#include "engine/tensor.h"

namespace smallem {

class Arena {
 public:
  explicit Arena(Backend& backend, size_t block_bytes = size_t{64} << 20);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // Uninitialized memory valid until the next Reset(). Dies with a message
  // naming the size when the device is out of memory.
  Tensor Allocate(Shape shape, DType dtype = DType::kF32);
  // As Allocate, filled with zeros.
  Tensor AllocateZeroed(Shape shape, DType dtype = DType::kF32);
  void Reset();

  // Whether Allocate may take a new block from the backend (default yes).
  // The trainer forbids it once warm-up steps have sized the arena, so that
  // a step that asks for more than they did fails loudly (a CHECK naming the
  // size) instead of allocating inside a captured step.
  void set_growth_allowed(bool allowed) { growth_allowed_ = allowed; }

  size_t reserved_bytes() const { return reserved_; }
  // Backend allocations made so far (one per block).
  int64_t blocks() const { return static_cast<int64_t>(blocks_.size()); }

 private:
  struct Block {
    char* data;
    size_t size;
  };
  Backend& backend_;
  size_t block_bytes_;
  std::vector<Block> blocks_;
  size_t current_ = 0;  // index of the block being filled
  size_t offset_ = 0;   // bytes used in it
  size_t reserved_ = 0;
  bool growth_allowed_ = true;
};

}  // namespace smallem

#endif  // SMALLEM_ENGINE_ARENA_H_
