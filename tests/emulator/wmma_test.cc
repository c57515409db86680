// The emulated WMMA against its definition, with small exact tiles: a
// 16×16×16 bf16 product with an f32 accumulator for each operand layout,
// the reference layout's promise (only elementwise use of x[] is safe), and
// the documented requirements (the whole warp, 32-byte aligned tiles, ldm a
// multiple of 16 bytes).
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mma.h>

#include <vector>

#include "emulator/device.h"
#include "kernels/launch.cuh"
#include "tests/emulator/emulated_device.h"

namespace smallem::emu {
namespace {

namespace wmma = nvcuda::wmma;
using bf16 = __nv_bfloat16;

class EmulatedWmmaTest : public ::testing::Test {
 protected:
  void SetUp() override { ResetDevice(); }
  void TearDown() override { ResetDevice(); }
};

// out = 2·(a·b) + c over one warp, b row- or column-major.
template <typename LayoutB>
__global__ void TileProduct(const bf16* a, const bf16* b, const float* c, float* out,
                            unsigned ldm) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, LayoutB> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc, zero;
  wmma::load_matrix_sync(fa, a, ldm);
  wmma::load_matrix_sync(fb, b, ldm);
  wmma::fill_fragment(zero, 0.0f);
  wmma::mma_sync(acc, fa, fb, zero);
  for (int e = 0; e < acc.num_elements; ++e) acc.x[e] *= 2.0f;  // elementwise: allowed
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
  wmma::load_matrix_sync(fc, c, 16, wmma::mem_row_major);
  for (int e = 0; e < acc.num_elements; ++e) acc.x[e] += fc.x[e];
  wmma::store_matrix_sync(out, acc, 16, wmma::mem_row_major);
}

// Small integers: every product and sum is exact in f32.
std::vector<bf16> Tile(int seed, int ldm) {
  std::vector<bf16> t(16 * ldm);
  for (int i = 0; i < 16 * ldm; ++i) t[i] = __float2bfloat16_rn(static_cast<float>((i * seed) % 7 - 3));
  return t;
}

TEST_F(EmulatedWmmaTest, AProductOfTilesIsTheMatrixProductForEitherLayoutOfB) {
  const int ldm = 24;  // padded rows, 48 bytes
  const std::vector<bf16> a = Tile(3, ldm), b = Tile(5, ldm);
  std::vector<float> c(256);
  for (int i = 0; i < 256; ++i) c[i] = static_cast<float>(i % 5);
  DeviceBuffer<bf16> da(a), db(b);
  DeviceBuffer<float> dc(c), out(256);
  for (bool b_row_major : {true, false}) {
    std::vector<float> got = UnderTwoSchedules([&] {
      if (b_row_major) {
        SMALLEM_LAUNCH(TileProduct<wmma::row_major>, 1, 32, 0, nullptr)(da.get(), db.get(),
                                                                          dc.get(), out.get(), ldm);
      } else {
        SMALLEM_LAUNCH(TileProduct<wmma::col_major>, 1, 32, 0, nullptr)(da.get(), db.get(),
                                                                          dc.get(), out.get(), ldm);
      }
      return out.Download();
    });
    for (int r = 0; r < 16; ++r) {
      for (int col = 0; col < 16; ++col) {
        double sum = 0;
        for (int k = 0; k < 16; ++k) {
          const bf16 bk = b_row_major ? b[k * ldm + col] : b[k + col * ldm];
          sum += double{__bfloat162float(a[r * ldm + k])} * __bfloat162float(bk);
        }
        ASSERT_EQ(got[r * 16 + col], 2 * sum + c[r * 16 + col])
            << "row " << r << " col " << col << (b_row_major ? " row-major" : " col-major");
      }
    }
  }
}

// Writes each lane's fragment elements where a kernel assuming "lane l holds
// row l/2" would: wrong, since the mapping is not promised.
__global__ void AssumesAMapping(const float* in, float* out) {
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> f;
  wmma::load_matrix_sync(f, in, 16, wmma::mem_row_major);
  for (int e = 0; e < f.num_elements; ++e) out[threadIdx.x * 8 + e] = f.x[e];
}

TEST_F(EmulatedWmmaTest, AKernelThatAssumesAnElementMappingGetsTheTileScrambled) {
  std::vector<float> in(256);
  for (int i = 0; i < 256; ++i) in[i] = static_cast<float>(i);
  DeviceBuffer<float> din(in), out(256);
  SMALLEM_LAUNCH(AssumesAMapping, 1, 32, 0, nullptr)(din.get(), out.get());
  EXPECT_NE(out.Download(), in);
}

__global__ void HalfAWarpLoads(const float* in, float* out) {
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> f;
  if (threadIdx.x < 16) wmma::load_matrix_sync(f, in, 16, wmma::mem_row_major);
  out[threadIdx.x] = 0;
}

__global__ void LoadWithLdm(const bf16* in, unsigned ldm) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> f;
  wmma::load_matrix_sync(f, in, ldm);
}

TEST_F(EmulatedWmmaTest, ACallBySomeLanesOrWithAnOddLeadingDimensionFaults) {
  DeviceBuffer<float> in(std::vector<float>(256, 1.0f)), out(32);
  SMALLEM_LAUNCH(HalfAWarpLoads, 1, 32, 0, nullptr)(in.get(), out.get());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  EXPECT_NE(LastFault().find("HalfAWarpLoads"), std::string::npos) << LastFault();
  ResetDevice();
  DeviceBuffer<bf16> tile(16 * 16);
  SMALLEM_LAUNCH(LoadWithLdm, 1, 32, 0, nullptr)(tile.get(), 12);  // 24 bytes
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  EXPECT_NE(LastFault().find("ldm not a multiple of 16 bytes"), std::string::npos) << LastFault();
}

}  // namespace
}  // namespace smallem::emu
