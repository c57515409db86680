#include "engine/arena.h"

#include <algorithm>

#include "base/check.h"

namespace smallem {

Arena::Arena(Backend& backend, size_t block_bytes)
    : backend_(backend), block_bytes_(block_bytes) {}

Arena::~Arena() {
  for (const Block& b : blocks_) backend_.Free(b.data);
}

Tensor Arena::Allocate(Shape shape, DType dtype) {
  Tensor t{.data = nullptr, .shape = shape, .dtype = dtype};
  const size_t bytes = (t.bytes() + 63) / 64 * 64;
  while (current_ < blocks_.size() && offset_ + bytes > blocks_[current_].size) {
    ++current_;
    offset_ = 0;
  }
  if (current_ == blocks_.size()) {
    CHECK(growth_allowed_) << "activation memory: a step asked for " << bytes
                           << " more bytes than the warm-up steps did (" << reserved_
                           << " reserved); every step must make the same requests";
    const size_t size = std::max(block_bytes_, bytes);
    absl::StatusOr<void*> data = backend_.Allocate(size);
    CHECK(data.ok()) << "activation memory: " << data.status().message();
    blocks_.push_back(Block{static_cast<char*>(*data), size});
    reserved_ += size;
    offset_ = 0;
  }
  t.data = blocks_[current_].data + offset_;
  offset_ += bytes;
  return t;
}

Tensor Arena::AllocateZeroed(Shape shape, DType dtype) {
  Tensor t = Allocate(shape, dtype);
  backend_.Fill(t, 0.0f);
  return t;
}

void Arena::Reset() {
  current_ = 0;
  offset_ = 0;
}

}  // namespace smallem
