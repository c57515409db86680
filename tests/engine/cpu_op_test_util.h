// Test helpers for the CPU ops: a fixture that allocates tensors through a
// 2-thread CpuBackend (and frees them), random fills, and host views. The
// CPU backend's memory is host memory, so tests read and write it directly.
#ifndef SMALLEM_TESTS_ENGINE_CPU_OP_TEST_UTIL_H_
#define SMALLEM_TESTS_ENGINE_CPU_OP_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "base/check.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/tensor.h"
#include "tests/engine/test_cpu_backend.h"

namespace smallem::testing {

// Tensors allocated through one backend and freed with this object, which
// must be destroyed before the backend (declare it after).
class BackendTensors {
 public:
  explicit BackendTensors(Backend& backend) : backend_(backend) {}
  ~BackendTensors() {
    for (void* ptr : owned_) backend_.Free(ptr);
  }
  BackendTensors(const BackendTensors&) = delete;
  BackendTensors& operator=(const BackendTensors&) = delete;

  // Zeroed, as Backend::Allocate gives it.
  Tensor Allocate(Shape shape, DType dtype = DType::kF32) {
    Tensor t{.shape = shape, .dtype = dtype};
    absl::StatusOr<void*> ptr = backend_.Allocate(t.bytes());
    CHECK(ptr.ok()) << ptr.status().ToString();
    t.data = *ptr;
    owned_.push_back(t.data);
    return t;
  }

 private:
  Backend& backend_;
  std::vector<void*> owned_;
};

class CpuOpTest : public ::testing::Test {
 protected:
  CpuOpTest() : backend_(TestCpuOptions(2)), tensors_(backend_) {}

  Tensor Zeros(Shape shape, DType dtype = DType::kF32) { return tensors_.Allocate(shape, dtype); }

  // Uniform in [lo, hi).
  Tensor Random(Shape shape, float lo = -1.0f, float hi = 1.0f) {
    Tensor t = Zeros(shape);
    FillRandom(t, lo, hi);
    return t;
  }

  void FillRandom(Tensor t, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> dist(lo, hi);
    for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = dist(rng_);
  }

  // i32 ids uniform in [0, vocab).
  Tensor Ids(Shape shape, int32_t vocab) {
    Tensor t = Zeros(shape, DType::kI32);
    std::uniform_int_distribution<int32_t> dist(0, vocab - 1);
    for (int64_t i = 0; i < t.numel(); ++i) t.i32()[i] = dist(rng_);
    return t;
  }

  Tensor FromValues(Shape shape, const std::vector<float>& values) {
    Tensor t = Zeros(shape);
    CHECK_EQ(static_cast<int64_t>(values.size()), t.numel());
    for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = values[i];
    return t;
  }

  static std::vector<float> Values(const Tensor& t) {
    return std::vector<float>(t.f32(), t.f32() + t.numel());
  }

  CpuBackend backend_;
  std::mt19937 rng_{20240613};

 private:
  BackendTensors tensors_;
};

// |actual − expected| ≤ rel·|expected| + abs, element by element.
inline void ExpectClose(const std::vector<double>& expected, const Tensor& actual,
                        double rel = 1e-5, double abs = 1e-6) {
  ASSERT_EQ(static_cast<int64_t>(expected.size()), actual.numel());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(actual.f32()[i], expected[i], rel * std::abs(expected[i]) + abs)
        << "at element " << i;
  }
}

}  // namespace smallem::testing

#endif  // SMALLEM_TESTS_ENGINE_CPU_OP_TEST_UTIL_H_
