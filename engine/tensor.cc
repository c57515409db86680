#include "engine/tensor.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/check.h"

namespace smallem {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kBF16: return 2;
    case DType::kI32: return 4;
  }
  return 0;
}

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "F32";
    case DType::kBF16: return "BF16";
    case DType::kI32: return "I32";
  }
  return "?";
}

Shape::Shape(std::initializer_list<int64_t> dims) {
  CHECK_LE(dims.size(), static_cast<size_t>(kMaxRank)) << "rank above 4";
  for (int64_t d : dims) dims_[rank_++] = d;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[i];
  return n;
}

bool Shape::operator==(const Shape& other) const {
  if (rank_ != other.rank_) return false;
  for (int i = 0; i < rank_; ++i) {
    if (dims_[i] != other.dims_[i]) return false;
  }
  return true;
}

std::string Shape::ToString() const {
  std::string out = "(";
  for (int i = 0; i < rank_; ++i) absl::StrAppend(&out, i ? ", " : "", dims_[i]);
  return out + ")";
}

Tensor Tensor::Reshaped(Shape new_shape) const {
  CHECK_EQ(new_shape.numel(), numel())
      << "reshape " << shape.ToString() << " to " << new_shape.ToString();
  Tensor t = *this;
  t.shape = new_shape;
  return t;
}

}  // namespace smallem
