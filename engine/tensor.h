// Tensors: a shape, a dtype and a pointer into memory owned by a Backend.
//
// Glossary used in every shape comment of the engine (row-major, last
// dimension contiguous):
//   B batch, T time (context), C channels (embed), V vocab, L layers,
//   H heads, D head size (C / H), F feed-forward width, N rows (B·T).
//
// A Tensor never owns its memory: parameters live in buffers the model holds,
// activations in the step Arena (engine/arena.h). Copying a Tensor copies the
// view. Tensors are plain values and are not synchronized.
#ifndef SMALLEM_ENGINE_TENSOR_H_
#define SMALLEM_ENGINE_TENSOR_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace smallem {

enum class DType : uint8_t { kF32, kBF16, kI32 };

size_t DTypeSize(DType dtype);
const char* DTypeName(DType dtype);

// Up to four dimensions; enough for every tensor of the engine.
class Shape {
 public:
  static constexpr int kMaxRank = 4;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);

  int rank() const { return rank_; }
  int64_t operator[](int i) const { return dims_[i]; }
  int64_t& operator[](int i) { return dims_[i]; }
  int64_t numel() const;
  // Last dimension (1 for a scalar).
  int64_t cols() const { return rank_ == 0 ? 1 : dims_[rank_ - 1]; }
  // Product of every dimension but the last.
  int64_t rows() const { return cols() == 0 ? 0 : numel() / cols(); }

  bool operator==(const Shape& other) const;
  bool operator!=(const Shape& other) const { return !(*this == other); }
  std::string ToString() const;  // "(2, 3, 4)"

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

struct Tensor {
  void* data = nullptr;  // Backend memory (device memory on CUDA).
  Shape shape;
  DType dtype = DType::kF32;

  bool empty() const { return data == nullptr; }
  int64_t numel() const { return shape.numel(); }
  size_t bytes() const { return static_cast<size_t>(numel()) * DTypeSize(dtype); }
  float* f32() const { return static_cast<float*>(data); }
  int32_t* i32() const { return static_cast<int32_t*>(data); }

  // A view of the same memory with another shape of equal numel (CHECKed).
  Tensor Reshaped(Shape new_shape) const;
};

}  // namespace smallem

#endif  // SMALLEM_ENGINE_TENSOR_H_
