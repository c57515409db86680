// The emulated device's WMMA (nvcuda::wmma) for 16×16×16 bf16 tiles with f32
// accumulators, the shapes kernels/attention_bf16.cu uses. Test-only.
//
// The hardware does not say which tile elements a lane's fragment holds, so
// a kernel may only treat x[] elementwise. The emulator's reference layout
// makes any other use show: element e of lane l holds tile position
// (37·(8l + e) + 11) mod 256 (row-major in the tile), a scrambled mapping no
// kernel would guess. Loads, stores and mma_sync are warp-collective: every
// lane of the warp must reach the same call (checked, as __syncwarp), the
// pointer must be 32-byte aligned and ldm a multiple of 16 bytes (the
// documented requirements; a fault otherwise). mma_sync multiplies the bf16
// tiles exactly and sums in f32 in k order.
#ifndef SMALLEM_EMULATOR_MMA_H_
#define SMALLEM_EMULATOR_MMA_H_

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <source_location>
#include <type_traits>

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "the emulator models 16x16x16 tiles");
  static constexpr int num_elements = 256 / 32;
  T x[num_elements];
};

namespace detail {

constexpr int kTile = 16;
constexpr int kPerLane = 8;

// The tile position (row-major) of element e of `lane`'s fragment.
constexpr int Position(int lane, int e) { return (37 * (kPerLane * lane + e) + 11) % 256; }

inline int LinearThread() {
  const uint3& t = threadIdx;
  const dim3& b = blockDim;
  return static_cast<int>(t.x + t.y * b.x + t.z * b.x * b.y);
}
inline int Lane() { return LinearThread() % 32; }

// The whole warp meets here, as at any warp-collective operation.
inline void Collective(const std::source_location& where) {
  ::smallem::emu::SyncWarp(0xffffffffu, where.file_name(), static_cast<int>(where.line()));
}

template <typename T>
void CheckOperand(const T* p, unsigned ldm, const std::source_location& where) {
  if (reinterpret_cast<uintptr_t>(p) % 32 != 0) {
    ::smallem::emu::DeviceFault("wmma: a tile pointer not 32-byte aligned", where.file_name(),
                                static_cast<int>(where.line()));
  }
  if ((ldm * sizeof(T)) % 16 != 0) {
    ::smallem::emu::DeviceFault("wmma: ldm not a multiple of 16 bytes", where.file_name(),
                                static_cast<int>(where.line()));
  }
}

inline float Widen(float v) { return v; }
inline float Widen(__nv_bfloat16 v) { return __bfloat162float(v); }

// One warp's tiles during mma_sync: blocks run one at a time, so one copy
// per warp of the block will do.
struct WarpTiles {
  float a[256], b[256], c[256];
};
inline WarpTiles& Tiles() {
  static WarpTiles tiles[32];
  return tiles[LinearThread() / 32];
}

// Offset in memory of tile position (row, col) for a row- or col-major
// operand with leading dimension ldm.
inline int64_t Offset(int row, int col, unsigned ldm, bool row_major_memory) {
  return row_major_memory ? int64_t{row} * ldm + col : row + int64_t{col} * ldm;
}

}  // namespace detail

template <typename Use, int M, int N, int K, typename T, typename Layout>
void fill_fragment(fragment<Use, M, N, K, T, Layout>& f, T value) {
  for (T& v : f.x) v = value;
}

template <typename Use, int M, int N, int K, typename T, typename Layout>
void load_matrix_sync(fragment<Use, M, N, K, T, Layout>& f, const T* p, unsigned ldm,
                      const std::source_location where = std::source_location::current()) {
  static_assert(!std::is_same_v<Use, accumulator>, "an accumulator load names its layout");
  detail::Collective(where);
  detail::CheckOperand(p, ldm, where);
  const int lane = detail::Lane();
  for (int e = 0; e < detail::kPerLane; ++e) {
    const int pos = detail::Position(lane, e);
    f.x[e] = p[detail::Offset(pos / 16, pos % 16, ldm, std::is_same_v<Layout, row_major>)];
  }
}

template <int M, int N, int K>
void load_matrix_sync(fragment<accumulator, M, N, K, float>& f, const float* p, unsigned ldm,
                      layout_t layout,
                      const std::source_location where = std::source_location::current()) {
  detail::Collective(where);
  detail::CheckOperand(p, ldm, where);
  const int lane = detail::Lane();
  for (int e = 0; e < detail::kPerLane; ++e) {
    const int pos = detail::Position(lane, e);
    f.x[e] = p[detail::Offset(pos / 16, pos % 16, ldm, layout == mem_row_major)];
  }
}

template <int M, int N, int K>
void store_matrix_sync(float* p, const fragment<accumulator, M, N, K, float>& f, unsigned ldm,
                       layout_t layout,
                       const std::source_location where = std::source_location::current()) {
  detail::Collective(where);
  detail::CheckOperand(p, ldm, where);
  const int lane = detail::Lane();
  for (int e = 0; e < detail::kPerLane; ++e) {
    const int pos = detail::Position(lane, e);
    p[detail::Offset(pos / 16, pos % 16, ldm, layout == mem_row_major)] = f.x[e];
  }
}

// d = a·b + c, the warp's tiles gathered from every lane's fragments.
template <int M, int N, int K, typename T, typename LayoutA, typename LayoutB>
void mma_sync(fragment<accumulator, M, N, K, float>& d,
              const fragment<matrix_a, M, N, K, T, LayoutA>& a,
              const fragment<matrix_b, M, N, K, T, LayoutB>& b,
              const fragment<accumulator, M, N, K, float>& c,
              const std::source_location where = std::source_location::current()) {
  detail::Collective(where);
  detail::WarpTiles& tiles = detail::Tiles();
  const int lane = detail::Lane();
  for (int e = 0; e < detail::kPerLane; ++e) {
    const int pos = detail::Position(lane, e);
    tiles.a[pos] = detail::Widen(a.x[e]);
    tiles.b[pos] = detail::Widen(b.x[e]);
    tiles.c[pos] = c.x[e];
  }
  detail::Collective(where);  // every lane's part is in
  float out[detail::kPerLane];
  for (int e = 0; e < detail::kPerLane; ++e) {
    const int pos = detail::Position(lane, e);
    const int row = pos / 16, col = pos % 16;
    float sum = 0.0f;
    for (int k = 0; k < detail::kTile; ++k) sum += tiles.a[row * 16 + k] * tiles.b[k * 16 + col];
    out[e] = sum + tiles.c[pos];
  }
  detail::Collective(where);  // every lane has read before the tiles are reused
  for (int e = 0; e < detail::kPerLane; ++e) d.x[e] = out[e];
}

}  // namespace nvcuda::wmma

#endif  // SMALLEM_EMULATOR_MMA_H_
