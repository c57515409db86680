// CpuBackend: memory, copies, Fill and the device description. The ops live
// in one file each (see cpu_backend.h).
#include "engine/cpu/cpu_backend.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "engine/bf16.h"
#include "engine/cpu/blas_core.h"
#include "engine/cpu/gemm.h"
#include "engine/cpu/partition.h"
#include "engine/cpu/thread_scratch.h"

#ifdef SMALLEM_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace smallem {
namespace {

// Each allocation starts with a header holding its size, so Free can keep
// the live-bytes count without a map; the header is one alignment unit long
// so the caller's pointer stays 64-byte aligned.
constexpr size_t kAlignment = 64;
constexpr uint64_t kLiveMagic = 0x536d616c6c656d21;  // "Smallem!"
struct AllocationHeader {
  size_t bytes;
  uint64_t magic;
};
static_assert(sizeof(AllocationHeader) <= kAlignment);

AllocationHeader* HeaderOf(void* ptr) {
  return reinterpret_cast<AllocationHeader*>(static_cast<char*>(ptr) -
                                             kAlignment);
}

// "AMD EPYC 7R13 Processor" → "amd-epyc-7r13-processor"; "" when unknown.
std::string CpuModelName() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    std::string name;
    for (char c : line.substr(colon + 1)) {
      if (std::isalnum(static_cast<unsigned char>(c))) {
        name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      } else if (!name.empty() && name.back() != '-') {
        name += '-';
      }
    }
    while (!name.empty() && name.back() == '-') name.pop_back();
    return name;
  }
  return "";
}

}  // namespace

namespace cpu {

float* ThreadScratch(size_t count) {
  thread_local std::vector<float> scratch;
  if (scratch.size() < count) scratch.resize(count);
  return scratch.data();
}

}  // namespace cpu

absl::StatusOr<std::optional<CpuBackend::AttentionKernel>> CpuBackend::ParseAttentionKernel(
    std::string_view name) {
#ifdef SMALLEM_HAVE_HWY
  constexpr bool kTilesBuilt = true;
  constexpr const char* kChoices = "auto, tiles, blas";
#else
  constexpr bool kTilesBuilt = false;
  constexpr const char* kChoices = "auto, blas";
#endif
  if (name == "auto") return std::optional<AttentionKernel>();
  if (name == "blas") return AttentionKernel::kBlas;
  if (name == "tiles" && kTilesBuilt) return AttentionKernel::kTiles;
  return absl::InvalidArgumentError(absl::StrCat(
      "\"", std::string(name), "\" is not an attention kernel this build has: ", kChoices));
}

absl::StatusOr<CpuBackend::Options> CpuBackend::OptionsFromEnvironment(int threads) {
  auto setting = [](const char* variable) -> std::string {
    const char* value = std::getenv(variable);
    return value == nullptr ? "auto" : value;
  };
  Options options{.threads = threads};
  absl::StatusOr<cpu::GemmChoice> gemm = cpu::ParseGemmChoice(setting("SMALLEM_GEMM"));
  if (!gemm.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("SMALLEM_GEMM: ", gemm.status().message()));
  }
  options.gemm = *gemm;
  absl::StatusOr<std::optional<AttentionKernel>> attention =
      ParseAttentionKernel(setting("SMALLEM_ATTENTION"));
  if (!attention.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("SMALLEM_ATTENTION: ", attention.status().message()));
  }
  options.attention = *attention;
  return options;
}

CpuBackend::CpuBackend(const Options& options)
    : threads_(options.threads > 0 ? options.threads : omp_get_num_procs()), gemm_(options.gemm) {
#ifdef SMALLEM_HAVE_HWY
  tiles_ = options.attention.value_or(AttentionKernel::kTiles) == AttentionKernel::kTiles;
#else
  CHECK(options.attention != AttentionKernel::kTiles)
      << "attention on the tiles in a build without Highway";
  tiles_ = false;
#endif
  omp_set_num_threads(threads_);
  cpu::EnsureBlasCore();
#ifdef SMALLEM_HAVE_OPENBLAS
  // The ops split GEMMs across the OpenMP team themselves; a second pool of
  // OpenBLAS threads would only compete with it for the same cores.
  openblas_set_num_threads(1);
#endif
}

int64_t CpuBackend::HeadLossChunkRows(int64_t rows, int64_t vocab, int64_t width) const {
  static const int64_t l2 = [] {
    const long bytes = sysconf(_SC_LEVEL2_CACHE_SIZE);  // one core's, from the CPU
    return bytes > 0 ? static_cast<int64_t>(bytes) : int64_t{1} << 20;
  }();
  const int64_t quarter = l2 / 4, row_bytes = vocab * int64_t{sizeof(float)};
  if (vocab * width * int64_t{sizeof(float)} > quarter || row_bytes > quarter) return rows;
  // Whole 16-row groups, at least one.
  const int64_t chunk = std::max<int64_t>(16, quarter / row_bytes / 16 * 16);
  return std::min(rows, chunk);
}

std::string CpuBackend::BlasCore() { return cpu::EnsureBlasCore(); }

std::string CpuBackend::DeviceClass() const {
  static const std::string* const model = new std::string(CpuModelName());
  std::string device_class = absl::StrCat("cpu-", threads_, "t");
  if (!model->empty()) absl::StrAppend(&device_class, "-", *model);
  return device_class;
}

absl::StatusOr<void*> CpuBackend::Allocate(size_t bytes) {
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* base = std::aligned_alloc(kAlignment, kAlignment + rounded);
  if (base == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cpu: out of host memory allocating ", bytes, " bytes (", live_bytes_,
        " already live); use a smaller batch or model"));
  }
  std::memset(base, 0, kAlignment + rounded);
  auto* header = static_cast<AllocationHeader*>(base);
  header->bytes = bytes;
  header->magic = kLiveMagic;
  live_bytes_ += bytes;
  peak_bytes_ = std::max(peak_bytes_, live_bytes_);
  return static_cast<char*>(base) + kAlignment;
}

void CpuBackend::Free(void* ptr) {
  if (ptr == nullptr) return;
  AllocationHeader* header = HeaderOf(ptr);
  CHECK_EQ(header->magic, kLiveMagic)
      << "Free of a pointer this backend did not allocate, or freed twice";
  header->magic = 0;
  live_bytes_ -= header->bytes;
  std::free(header);
}

void CpuBackend::CopyToDevice(void* dst, const void* src, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
}

void CpuBackend::CopyToHost(void* dst, const void* src, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
}

void CpuBackend::CopyOnDevice(void* dst, const void* src, size_t bytes) {
  if (bytes > 0 && dst != src) std::memmove(dst, src, bytes);
}

void CpuBackend::Fill(Tensor t, float value) {
  CHECK(t.data != nullptr) << "Fill of an empty tensor";
  const int64_t n = t.numel();
  if (t.dtype == DType::kI32) {
    std::fill_n(t.i32(), n, static_cast<int32_t>(value));
    return;
  }
  if (t.dtype == DType::kBF16) {
    std::fill_n(static_cast<uint16_t*>(t.data), n, FloatToBf16(value));
    return;
  }
  float* data = t.f32();
#pragma omp parallel for simd num_threads(threads_) if (n >= cpu::kParallelMin)
  for (int64_t i = 0; i < n; ++i) data[i] = value;
}

}  // namespace smallem
