// The emulated cuBLASLt against NVIDIA's documented semantics, with
// hand-computed products: column-major layouts with leading dimensions
// larger than the rows, transposes, strided batches, beta, bf16 inputs with
// an f32 or bf16 output, and what the library refuses.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "emulator/device.h"
#include "tests/emulator/emulated_device.h"

namespace smallem::emu {
namespace {

// One product's descriptors; each call checks its status.
struct Product {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};

  Product(cublasOperation_t ta, cublasOperation_t tb) {
    EXPECT_EQ(cublasLtCreate(&handle), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb),
              CUBLAS_STATUS_SUCCESS);
  }
  ~Product() {
    for (auto* l : {a, b, c}) cublasLtMatrixLayoutDestroy(l);
    cublasLtMatmulDescDestroy(desc);
    cublasLtDestroy(handle);
  }
  static cublasLtMatrixLayout_t Layout(cudaDataType type, uint64_t rows, uint64_t cols,
                                       int64_t ld, int32_t batch = 1, int64_t stride = 0) {
    cublasLtMatrixLayout_t l = nullptr;
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&l, type, rows, cols, ld), CUBLAS_STATUS_SUCCESS);
    if (batch > 1) {
      EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                                 sizeof batch),
                CUBLAS_STATUS_SUCCESS);
      EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                 &stride, sizeof stride),
                CUBLAS_STATUS_SUCCESS);
    }
    return l;
  }
  cublasStatus_t Plan(uint32_t alignment = 256) {
    cublasLtMatmulPreference_t preference = nullptr;
    EXPECT_EQ(cublasLtMatmulPreferenceCreate(&preference), CUBLAS_STATUS_SUCCESS);
    for (int attribute = CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES;
         attribute <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES; ++attribute) {
      EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(
                    preference, static_cast<cublasLtMatmulPreferenceAttributes_t>(attribute),
                    &alignment, sizeof alignment),
                CUBLAS_STATUS_SUCCESS);
    }
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(handle, desc, a, b, c, c, preference,
                                                            1, &result, &found);
    cublasLtMatmulPreferenceDestroy(preference);
    if (s == CUBLAS_STATUS_SUCCESS) {
      EXPECT_EQ(found, 1);
      algo = result.algo;
    }
    return s;
  }
  cublasStatus_t Run(const void* pa, const void* pb, void* pc, float alpha, float beta) {
    return cublasLtMatmul(handle, desc, &alpha, pa, a, pb, b, &beta, pc, c, pc, c, &algo, nullptr,
                          0, nullptr);
  }
};

class EmulatedCublasLtTest : public ::testing::Test {
 protected:
  void SetUp() override { ResetDevice(); }
  void TearDown() override { ResetDevice(); }
};

TEST_F(EmulatedCublasLtTest, ColumnMajorWithPaddedLeadingDimensionsAndTransposes) {
  // op(A) = A is 2×3, stored column-major with ld 3 (one pad row, 99):
  //   A = [1 2 3; 4 5 6]
  // op(B) = Bᵀ where B is 2×3 column-major with ld 2: B = [1 0 2; 0 1 3],
  //   so op(B) = [1 0; 0 1; 2 3] (3×2).
  // D = A·Bᵀ = [1+6, 2+9; 4+12, 5+18] = [7 11; 16 23].
  DeviceBuffer<float> a(std::vector<float>{1, 4, 99, 2, 5, 99, 3, 6, 99});
  DeviceBuffer<float> b(std::vector<float>{1, 0, 0, 1, 2, 3});
  DeviceBuffer<float> d(std::vector<float>{NAN, NAN, NAN, NAN});  // beta 0: never read
  Product p(CUBLAS_OP_N, CUBLAS_OP_T);
  p.a = Product::Layout(CUDA_R_32F, 2, 3, 3);
  p.b = Product::Layout(CUDA_R_32F, 2, 3, 2);
  p.c = Product::Layout(CUDA_R_32F, 2, 2, 2);
  ASSERT_EQ(p.Plan(), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(p.Run(a.get(), b.get(), d.get(), 1.0f, 0.0f), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(d.Download(), (std::vector<float>{7, 16, 11, 23}));  // column-major
  // D = 2·A·Bᵀ + 1·D, in place.
  ASSERT_EQ(p.Run(a.get(), b.get(), d.get(), 2.0f, 1.0f), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(d.Download(), (std::vector<float>{21, 48, 33, 69}));
}

TEST_F(EmulatedCublasLtTest, StridedBatchesAreIndependentProducts) {
  // Two items of a 1×2 · 2×1 product, items 4 elements apart (2 of padding).
  DeviceBuffer<float> a(std::vector<float>{1, 2, -7, -7, 3, 4});
  DeviceBuffer<float> b(std::vector<float>{5, 6, -7, -7, 7, 8});
  DeviceBuffer<float> d(std::vector<float>{0, 0});
  Product p(CUBLAS_OP_N, CUBLAS_OP_N);
  p.a = Product::Layout(CUDA_R_32F, 1, 2, 1, 2, 4);
  p.b = Product::Layout(CUDA_R_32F, 2, 1, 2, 2, 4);
  p.c = Product::Layout(CUDA_R_32F, 1, 1, 1, 2, 1);
  ASSERT_EQ(p.Plan(), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(p.Run(a.get(), b.get(), d.get(), 1.0f, 0.0f), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(d.Download(), (std::vector<float>{1 * 5 + 2 * 6, 3 * 7 + 4 * 8}));
}

TEST_F(EmulatedCublasLtTest, Bf16InputsSumInF32AndABf16OutputIsRoundedOnceToNearestEven) {
  // 1·1 + 2⁻⁸·1 = 1 + 2⁻⁸: exact in f32; as bf16 (8 significant bits) it is
  // halfway between 1 and 1 + 2⁻⁷ and rounds to even, 1.
  const float tiny = std::ldexp(1.0f, -8);
  DeviceBuffer<__nv_bfloat16> a(
      std::vector<__nv_bfloat16>{__float2bfloat16_rn(1), __float2bfloat16_rn(tiny)});
  DeviceBuffer<__nv_bfloat16> b(
      std::vector<__nv_bfloat16>{__float2bfloat16_rn(1), __float2bfloat16_rn(1)});
  DeviceBuffer<float> d32(1);
  Product f32_out(CUBLAS_OP_N, CUBLAS_OP_N);
  f32_out.a = Product::Layout(CUDA_R_16BF, 1, 2, 1);
  f32_out.b = Product::Layout(CUDA_R_16BF, 2, 1, 2);
  f32_out.c = Product::Layout(CUDA_R_32F, 1, 1, 1);
  ASSERT_EQ(f32_out.Plan(), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(f32_out.Run(a.get(), b.get(), d32.get(), 1.0f, 0.0f), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(d32.Download()[0], 1.0f + tiny);

  DeviceBuffer<__nv_bfloat16> d16(1);
  Product bf16_out(CUBLAS_OP_N, CUBLAS_OP_N);
  bf16_out.a = Product::Layout(CUDA_R_16BF, 1, 2, 1);
  bf16_out.b = Product::Layout(CUDA_R_16BF, 2, 1, 2);
  bf16_out.c = Product::Layout(CUDA_R_16BF, 1, 1, 1);
  ASSERT_EQ(bf16_out.Plan(), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(bf16_out.Run(a.get(), b.get(), d16.get(), 1.0f, 0.0f), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(__bfloat162float(d16.Download()[0]), 1.0f);
}

TEST_F(EmulatedCublasLtTest, UnsupportedTypesAndImpossibleShapesAreRefusedAsTheLibraryDoes) {
  {  // f32 A and B take only an f32 D.
    Product p(CUBLAS_OP_N, CUBLAS_OP_N);
    p.a = Product::Layout(CUDA_R_32F, 2, 2, 2);
    p.b = Product::Layout(CUDA_R_32F, 2, 2, 2);
    p.c = Product::Layout(CUDA_R_16BF, 2, 2, 2);
    EXPECT_EQ(p.Plan(), CUBLAS_STATUS_NOT_SUPPORTED);
  }
  {  // A and B of different types.
    Product p(CUBLAS_OP_N, CUBLAS_OP_N);
    p.a = Product::Layout(CUDA_R_32F, 2, 2, 2);
    p.b = Product::Layout(CUDA_R_16BF, 2, 2, 2);
    p.c = Product::Layout(CUDA_R_32F, 2, 2, 2);
    EXPECT_EQ(p.Plan(), CUBLAS_STATUS_NOT_SUPPORTED);
  }
  {  // A leading dimension below the rows.
    Product p(CUBLAS_OP_N, CUBLAS_OP_N);
    p.a = Product::Layout(CUDA_R_32F, 2, 2, 1);
    p.b = Product::Layout(CUDA_R_32F, 2, 2, 2);
    p.c = Product::Layout(CUDA_R_32F, 2, 2, 2);
    EXPECT_EQ(p.Plan(), CUBLAS_STATUS_INVALID_VALUE);
  }
  {  // op(A) is 2×3 but op(B) is 2×2.
    Product p(CUBLAS_OP_N, CUBLAS_OP_N);
    p.a = Product::Layout(CUDA_R_32F, 2, 3, 2);
    p.b = Product::Layout(CUDA_R_32F, 2, 2, 2);
    p.c = Product::Layout(CUDA_R_32F, 2, 2, 2);
    EXPECT_EQ(p.Plan(), CUBLAS_STATUS_INVALID_VALUE);
  }
  {  // An attribute of the wrong size.
    Product p(CUBLAS_OP_N, CUBLAS_OP_N);
    const int64_t wide = 1;
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &wide,
                                             sizeof wide),
              CUBLAS_STATUS_INVALID_VALUE);
  }
}

TEST_F(EmulatedCublasLtTest, PointersLessAlignedThanTheAlgorithmWasChosenForAreRefused) {
  DeviceBuffer<float> a(std::vector<float>{0, 1, 2, 3, 4});
  DeviceBuffer<float> b(std::vector<float>{1, 1});
  DeviceBuffer<float> d(1);
  Product p(CUBLAS_OP_N, CUBLAS_OP_N);
  p.a = Product::Layout(CUDA_R_32F, 1, 2, 1);
  p.b = Product::Layout(CUDA_R_32F, 2, 1, 2);
  p.c = Product::Layout(CUDA_R_32F, 1, 1, 1);
  ASSERT_EQ(p.Plan(), CUBLAS_STATUS_SUCCESS);  // the default: 256-byte alignment
  EXPECT_EQ(p.Run(a.get() + 1, b.get(), d.get(), 1.0f, 0.0f), CUBLAS_STATUS_INVALID_VALUE);
  ASSERT_EQ(p.Plan(4), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(p.Run(a.get() + 1, b.get(), d.get(), 1.0f, 0.0f), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(d.Download()[0], 3.0f);
}

TEST_F(EmulatedCublasLtTest, ALeadingDimensionReachingPastTheAllocationIsAnIllegalAddress) {
  DeviceBuffer<float> a(4);  // a 2×2 A, but described with ld 3: 5 elements
  DeviceBuffer<float> b(std::vector<float>{1, 0, 0, 1});
  DeviceBuffer<float> d(4);
  Product p(CUBLAS_OP_N, CUBLAS_OP_N);
  p.a = Product::Layout(CUDA_R_32F, 2, 2, 3);
  p.b = Product::Layout(CUDA_R_32F, 2, 2, 2);
  p.c = Product::Layout(CUDA_R_32F, 2, 2, 2);
  ASSERT_EQ(p.Plan(), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(p.Run(a.get(), b.get(), d.get(), 1.0f, 0.0f), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorIllegalAddress);
  EXPECT_NE(LastFault().find("A (2 x 2, ld 3"), std::string::npos) << LastFault();
}

}  // namespace
}  // namespace smallem::emu
