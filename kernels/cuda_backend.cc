// CudaBackend: checks each op's tensors against its contract (as the CPU
// reference does), then hands raw pointers and sizes to the launchers of
// kernels/kernels.h and kernels/matmul.h.
#include "kernels/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/check.h"
#include "kernels/kernels.h"

namespace smallem {
namespace {

// A failed launch (or a sticky error from an earlier kernel) is a broken
// invariant of the process: abort with the op and the CUDA error.
void CheckCuda(cudaError_t error, const char* what) {
  CHECK(error == cudaSuccess) << what << ": " << cudaGetErrorName(error) << " ("
                              << cudaGetErrorString(error) << ")";
}

void CheckF32(const Tensor& t, int64_t numel, const char* what) {
  CHECK(t.data != nullptr) << what << " is empty";
  CHECK(t.dtype == DType::kF32) << what << " must be f32, is " << DTypeName(t.dtype);
  CHECK_EQ(t.numel(), numel) << what << " " << t.shape.ToString();
}

void CheckI32(const Tensor& t, int64_t numel, const char* what) {
  CHECK(t.data != nullptr) << what << " is empty";
  CHECK(t.dtype == DType::kI32) << what << " must be i32, is " << DTypeName(t.dtype);
  CHECK_EQ(t.numel(), numel) << what << " " << t.shape.ToString();
}

// An activation operand (engine/backend.h, "Activations"): f32 or bf16,
// passed to the kernels with its type.
using cuda::ActIn;
using cuda::ActOut;

ActIn AsActIn(const Tensor& t) {
  CHECK(t.dtype == DType::kF32 || t.dtype == DType::kBF16)
      << "an activation must be f32 or bf16, is " << DTypeName(t.dtype);
  return ActIn{t.data, t.dtype == DType::kBF16};
}

ActOut AsActOut(const Tensor& t) {
  CHECK(t.dtype == DType::kF32 || t.dtype == DType::kBF16)
      << "an activation must be f32 or bf16, is " << DTypeName(t.dtype);
  return ActOut{t.data, t.dtype == DType::kBF16};
}

// CHECKs an activation operand of `numel` elements, f32 or bf16.
void CheckActivation(const Tensor& t, int64_t numel, const char* what) {
  CHECK(t.data != nullptr) << what << " is empty";
  CHECK(t.dtype == DType::kF32 || t.dtype == DType::kBF16)
      << what << " must be f32 or bf16, is " << DTypeName(t.dtype);
  CHECK_EQ(t.numel(), numel) << what << " " << t.shape.ToString();
}

// The f32 data of an optional tensor of `numel` elements, or null.
float* OptionalF32(const Tensor& t, int64_t numel, const char* what) {
  if (t.empty()) return nullptr;
  CheckF32(t, numel, what);
  return t.f32();
}

// An optional activation (a gradient that may not be needed): a null
// operand when empty.
ActOut OptionalAct(const Tensor& t, int64_t numel, const char* what) {
  if (t.empty()) return {};
  CheckActivation(t, numel, what);
  return AsActOut(t);
}

// Operands may alias only when they have one dtype (engine/backend.h,
// "Activations"): a bf16 view of f32 elements, or the reverse, is garbage.
void CheckAliasSameDType(const Tensor& a, const Tensor& b, const char* what) {
  CHECK(a.data != b.data || a.empty() || a.dtype == b.dtype)
      << what << ": aliased operands must have one dtype, are " << DTypeName(a.dtype)
      << " and " << DTypeName(b.dtype);
}

// The fused residual add of the norms: residual and sum, activations of
// `numel` elements, go together, and sum may alias x or residual only with
// their dtype.
void CheckNormResidual(const NormParams& p, int64_t numel, const char* op) {
  CHECK_EQ(p.residual.empty(), p.sum.empty()) << op << ": residual and sum go together";
  if (p.residual.empty()) return;
  CheckActivation(p.residual, numel, absl::StrCat(op, ": residual").c_str());
  CheckActivation(p.sum, numel, absl::StrCat(op, ": sum").c_str());
  CheckAliasSameDType(p.sum, p.x, op);
  CheckAliasSameDType(p.sum, p.residual, op);
}

// The elementwise ops' wrappers differ only in their launcher and names:
// each checks every operand as an activation (f32 or bf16) of the op's
// `count` elements (in order, so the first bad operand is the one named) and
// the output against the inputs it may alias, launches, and aborts naming
// the op when the launch fails. An operand is a tensor and its name in the
// messages ("gelu: in").
struct Operand {
  const Tensor& tensor;
  const char* name;
};
using OneInputLauncher = cudaError_t (*)(ActIn in, ActOut out, int64_t count,
                                         cudaStream_t stream);
using TwoInputLauncher = cudaError_t (*)(ActIn a, ActIn b, ActOut out, int64_t count,
                                         cudaStream_t stream);

void RunElementwise(OneInputLauncher launch, const char* op, int64_t count, const Operand& in,
                    const Operand& out, cudaStream_t stream) {
  CheckActivation(in.tensor, count, in.name);
  CheckActivation(out.tensor, count, out.name);
  CheckAliasSameDType(out.tensor, in.tensor, op);
  CheckCuda(launch(AsActIn(in.tensor), AsActOut(out.tensor), count, stream), op);
}

void RunElementwise(TwoInputLauncher launch, const char* op, int64_t count, const Operand& a,
                    const Operand& b, const Operand& out, cudaStream_t stream) {
  CheckActivation(a.tensor, count, a.name);
  CheckActivation(b.tensor, count, b.name);
  CheckActivation(out.tensor, count, out.name);
  CheckAliasSameDType(out.tensor, a.tensor, op);
  CheckAliasSameDType(out.tensor, b.tensor, op);
  CheckCuda(launch(AsActIn(a.tensor), AsActIn(b.tensor), AsActOut(out.tensor), count, stream),
            op);
}

cuda::RopeShape CheckRope(const Tensor& x, const Tensor& cos, const Tensor& sin,
                          int64_t time, int64_t head_dim, int64_t rotate_channels,
                          int64_t position_offset, const char* op) {
  CHECK(x.data != nullptr && (x.dtype == DType::kF32 || x.dtype == DType::kBF16))
      << op << ": x must be an f32 or bf16 activation";
  CHECK(head_dim > 0 && head_dim % 2 == 0)
      << op << ": head_dim " << head_dim << " must be positive and even";
  CHECK_GT(time, 0) << op << ": time";
  CHECK_GE(position_offset, 0) << op << ": position_offset";
  const int64_t rows = x.shape.rows(), width = x.shape.cols();
  CHECK(rotate_channels >= 0 && rotate_channels % head_dim == 0 && rotate_channels <= width)
      << op << ": rotate_channels " << rotate_channels << " must be a multiple of head_dim "
      << head_dim << " within the row width " << width;
  CHECK_EQ(cos.shape.cols(), head_dim / 2) << op << ": cos " << cos.shape.ToString();
  CHECK(cos.shape == sin.shape) << op << ": sin " << sin.shape.ToString() << " vs cos "
                                << cos.shape.ToString();
  CheckF32(cos, cos.numel(), "rope: cos");
  CheckF32(sin, sin.numel(), "rope: sin");
  const int64_t last_position = std::min(rows, time) - 1 + position_offset;
  CHECK_LT(last_position, cos.shape.rows()) << op << ": position beyond the cos/sin tables";
  return cuda::RopeShape{rows, width, time, head_dim, rotate_channels, position_offset};
}

cuda::AttentionShape CheckAttention(const Tensor& qkv, const Tensor& out, int64_t batch,
                                    int64_t time, int64_t heads, int64_t head_dim,
                                    const char* op) {
  CHECK(batch > 0 && time > 0 && heads > 0 && head_dim > 0)
      << op << ": batch " << batch << ", time " << time << ", heads " << heads
      << ", head_dim " << head_dim << " must be positive";
  CHECK(cuda::AttentionSupportsHeadDim(head_dim))
      << op << ": head size " << head_dim
      << " has no CUDA kernel (supported: 32, 64, 128); change embed or heads";
  const int64_t c = heads * head_dim;
  CheckActivation(qkv, batch * time * 3 * c, "attention: qkv (B, T, 3C)");
  CheckActivation(out, batch * time * c, "attention: out (B, T, C)");
  return cuda::AttentionShape{batch, time, heads, head_dim};
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(int device,
                                                            MatmulPrecision precision) {
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    cudaGetLastError();  // not sticky; leave the runtime clean
    return absl::UnavailableError(absl::StrCat(
        "no usable CUDA device: cudaGetDeviceCount failed with ", cudaGetErrorName(e), " (",
        cudaGetErrorString(e), "); check that a GPU is visible and the NVIDIA driver is "
        "loaded (nvidia-smi)"));
  }
  if (count == 0) {
    return absl::UnavailableError("no CUDA device: the driver reports 0 GPUs");
  }
  if (device < 0 || device >= count) {
    return absl::InvalidArgumentError(absl::StrCat("cuda:", device, " does not exist; this ",
                                                   "machine has cuda:0 to cuda:", count - 1));
  }
  auto fail = [device](const char* what, cudaError_t e) {
    cudaGetLastError();
    return absl::UnavailableError(absl::StrCat("cuda:", device, ": ", what, " failed with ",
                                               cudaGetErrorName(e), " (",
                                               cudaGetErrorString(e), ")"));
  };
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) return fail("cudaSetDevice", e);
  cudaDeviceProp prop{};
  if (cudaError_t e = cudaGetDeviceProperties(&prop, device); e != cudaSuccess) {
    return fail("cudaGetDeviceProperties", e);
  }
  cudaStream_t stream = nullptr;
  if (cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      e != cudaSuccess) {
    return fail("cudaStreamCreate", e);
  }
  cudaEvent_t upload_done = nullptr;
  if (cudaError_t e = cudaEventCreateWithFlags(&upload_done, cudaEventDisableTiming);
      e != cudaSuccess) {
    cudaStreamDestroy(stream);
    return fail("cudaEventCreate", e);
  }
  std::unique_ptr<cuda::MatmulContext> matmul;
  if (cudaError_t e = cuda::MatmulContext::Create(&matmul); e != cudaSuccess) {
    cudaEventDestroy(upload_done);
    cudaStreamDestroy(stream);
    return fail("creating the cuBLASLt context", e);
  }
  std::unique_ptr<CudaBackend> backend(
      new CudaBackend(device, prop.name, stream, upload_done, std::move(matmul)));
  backend->set_matmul_precision(precision);
  return std::unique_ptr<Backend>(std::move(backend));
}

CudaBackend::CudaBackend(int device, std::string device_class, cudaStream_t stream,
                         cudaEvent_t upload_done, std::unique_ptr<cuda::MatmulContext> matmul)
    : device_(device),
      device_class_(std::move(device_class)),
      stream_(stream),
      upload_done_(upload_done),
      matmul_(std::move(matmul)) {
  UpdatePeak();
}

CudaBackend::~CudaBackend() {
  cudaStreamSynchronize(stream_);
  for (cudaGraphExec_t graph : graphs_) cudaGraphExecDestroy(graph);
  for (const SnapshotBlock& block : snapshots_) cudaFreeHost(block.data);
  for (const auto& [ptr, bytes] : staging_) cudaFreeHost(ptr);
  for (const auto& [ptr, bytes] : allocations_) cudaFree(ptr);
  if (scratch_ != nullptr) cudaFree(scratch_);
  matmul_.reset();
  cudaEventDestroy(upload_done_);
  cudaStreamDestroy(stream_);
}

std::string CudaBackend::Name() const { return absl::StrCat("cuda:", device_); }

std::string CudaBackend::DeviceClass() const { return device_class_; }

double CudaBackend::PeakFlops() const {
  // Dense bf16 on the tensor cores (SXM parts); the H200 is an H100 with
  // more memory.
  if (absl::StrContains(device_class_, "H100") || absl::StrContains(device_class_, "H200")) {
    return 989e12;
  }
  return 0;
}

void CudaBackend::UpdatePeak() {
  const size_t held = live_bytes_ + scratch_floats_ * sizeof(float) + matmul_->device_bytes();
  peak_bytes_ = std::max(peak_bytes_, held);
}

void CudaBackend::CheckNotCapturing(const char* what) const {
  CHECK(!capturing_) << what << " inside a captured step (CaptureGraph): it cannot be recorded. "
                     << "Every buffer must reach its size in an uncaptured run of the same step, "
                     << "and host reads belong after LaunchGraph (SMALLEM_CUDA_GRAPHS=0 runs "
                     << "every step eagerly)";
}

absl::StatusOr<void*> CudaBackend::Allocate(size_t bytes) {
  CheckNotCapturing("Allocate");
  void* ptr = nullptr;
  // A zero-byte request still gets a distinct pointer, as on the CPU.
  const cudaError_t e = cudaMalloc(&ptr, std::max<size_t>(bytes, 256));
  if (e != cudaSuccess) {
    cudaGetLastError();  // out of memory is not sticky
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    return absl::ResourceExhaustedError(absl::StrCat(
        Name(), ": out of device memory allocating ", bytes, " bytes (", live_bytes_,
        " held by this backend, ", free_bytes, " of ", total_bytes,
        " free on the device; ", cudaGetErrorString(e),
        "); use a smaller batch or model"));
  }
  ++allocations_made_;
  CheckCuda(cudaMemsetAsync(ptr, 0, bytes, stream_), "Allocate: zeroing");
  allocations_[ptr] = bytes;
  live_bytes_ += bytes;
  UpdatePeak();
  return ptr;
}

void CudaBackend::Free(void* ptr) {
  if (ptr == nullptr) return;
  CheckNotCapturing("Free");
  auto it = allocations_.find(ptr);
  CHECK(it != allocations_.end())
      << "Free of a pointer this backend did not allocate, or freed twice";
  live_bytes_ -= it->second;
  allocations_.erase(it);
  // Queued ops may still use ptr; cudaFree alone does not promise to wait
  // for a non-blocking stream.
  CheckCuda(cudaStreamSynchronize(stream_), "Free (a queued op failed)");
  CheckCuda(cudaFree(ptr), "Free");
}

void CudaBackend::CopyToDevice(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (capturing_) {
    // The graph replays this copy long after src is gone: it reads a
    // page-locked copy of the bytes as they are now (a pageable source
    // could not be recorded at all).
    src = Snapshot(src, bytes);
    if (src == nullptr) return;  // snapshot memory short: this capture is redone
  }
  CheckCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), "CopyToDevice");
}

void CudaBackend::CopyToHost(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  CheckNotCapturing("CopyToHost");
  CheckCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_), "CopyToHost");
  CheckCuda(cudaStreamSynchronize(stream_), "CopyToHost (a queued op failed)");
}

void CudaBackend::CopyOnDevice(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  const auto* d = static_cast<const char*>(dst);
  const auto* s = static_cast<const char*>(src);
  if (d < s + bytes && s < d + bytes) {
    // Overlapping ranges (memmove semantics): go through scratch.
    float* staging = Scratch((bytes + sizeof(float) - 1) / sizeof(float));
    CheckCuda(cudaMemcpyAsync(staging, src, bytes, cudaMemcpyDeviceToDevice, stream_),
              "CopyOnDevice");
    src = staging;
  }
  CheckCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_),
            "CopyOnDevice");
}

void CudaBackend::Fill(Tensor t, float value) {
  CHECK(t.data != nullptr) << "Fill of an empty tensor";
  cuda::FillType type = cuda::FillType::kF32;
  switch (t.dtype) {
    case DType::kF32: type = cuda::FillType::kF32; break;
    case DType::kBF16: type = cuda::FillType::kBf16; break;
    case DType::kI32: type = cuda::FillType::kI32; break;
  }
  CheckCuda(cuda::LaunchFill(t.data, t.numel(), type, value, stream_), "Fill");
}

void CudaBackend::Synchronize() {
  CheckNotCapturing("Synchronize");
  CheckCuda(cudaStreamSynchronize(stream_), "Synchronize (a queued op failed)");
}

// ------------------------------------------------------- staging, graphs

absl::StatusOr<void*> CudaBackend::AllocateStaging(size_t bytes) {
  CheckNotCapturing("AllocateStaging");
  void* ptr = nullptr;
  const size_t size = std::max<size_t>(bytes, 64);
  if (cudaError_t e = cudaHostAlloc(&ptr, size, cudaHostAllocDefault); e != cudaSuccess) {
    cudaGetLastError();
    return absl::ResourceExhaustedError(absl::StrCat(
        Name(), ": cannot allocate ", bytes, " bytes of page-locked host memory (",
        cudaGetErrorString(e), ")"));
  }
  ++allocations_made_;
  std::memset(ptr, 0, size);
  staging_[ptr] = size;
  return ptr;
}

void CudaBackend::FreeStaging(void* ptr) {
  if (ptr == nullptr) return;
  CheckNotCapturing("FreeStaging");
  auto it = staging_.find(ptr);
  CHECK(it != staging_.end()) << "FreeStaging of memory AllocateStaging did not return";
  staging_.erase(it);
  // Queued copies may still read it.
  CheckCuda(cudaStreamSynchronize(stream_), "FreeStaging (a queued op failed)");
  CheckCuda(cudaFreeHost(ptr), "FreeStaging");
}

void CudaBackend::UploadStaged(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  CheckCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), "UploadStaged");
  // In a graph the record is a node of its own (external), so that each
  // replay records the event again and WaitStaged waits for that replay's
  // copy.
  CheckCuda(cudaEventRecordWithFlags(upload_done_, stream_,
                                     capturing_ ? cudaEventRecordExternal
                                                : cudaEventRecordDefault),
            "UploadStaged: event");
}

void CudaBackend::WaitStaged() {
  CheckNotCapturing("WaitStaged");
  CheckCuda(cudaEventSynchronize(upload_done_), "WaitStaged (a queued op failed)");
}

const void* CudaBackend::Snapshot(const void* src, size_t bytes) {
  constexpr size_t kAlign = 64;
  const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  snapshot_asked_ += rounded;
  if (snapshot_short_ || snapshots_.empty() ||
      snapshot_used_ + rounded > snapshots_.back().size) {
    snapshot_short_ = true;
    return nullptr;
  }
  char* dst = snapshots_.back().data + snapshot_used_;
  std::memcpy(dst, src, bytes);
  snapshot_used_ += rounded;
  return dst;
}

absl::StatusOr<int> CudaBackend::CaptureGraph(const std::function<void()>& record) {
  CHECK(!capturing_) << "CaptureGraph inside a capture";
  for (int attempt = 0; attempt < 2; ++attempt) {
    const size_t snapshot_start = snapshot_used_;
    snapshot_asked_ = 0;
    snapshot_short_ = false;
    CheckCuda(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal),
              "CaptureGraph: begin");
    capturing_ = true;
    record();
    capturing_ = false;
    cudaGraph_t graph = nullptr;
    CheckCuda(cudaStreamEndCapture(stream_, &graph),
              "CaptureGraph: a call of the step broke the capture");
    if (snapshot_short_) {
      // Host bytes copied during the capture did not fit: record the step
      // again with a block that holds them all (the old blocks stay with
      // the graphs that use them).
      cudaGraphDestroy(graph);
      snapshot_used_ = snapshot_start;
      const size_t size = std::max<size_t>(snapshot_asked_, size_t{64} << 10);
      void* block = nullptr;
      if (cudaError_t e = cudaHostAlloc(&block, size, cudaHostAllocDefault); e != cudaSuccess) {
        cudaGetLastError();
        return absl::ResourceExhaustedError(absl::StrCat(
            Name(), ": cannot allocate ", size, " bytes of page-locked memory for a graph (",
            cudaGetErrorString(e), ")"));
      }
      ++allocations_made_;
      snapshots_.push_back(SnapshotBlock{static_cast<char*>(block), size});
      snapshot_used_ = 0;
      continue;
    }
    cudaGraphExec_t exec = nullptr;
    const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    if (e != cudaSuccess) {
      cudaGetLastError();
      snapshot_used_ = snapshot_start;
      return absl::ResourceExhaustedError(absl::StrCat(
          Name(), ": instantiating the captured step failed with ", cudaGetErrorName(e), " (",
          cudaGetErrorString(e), "); set SMALLEM_CUDA_GRAPHS=0 to train without graphs"));
    }
    graphs_.push_back(exec);
    return static_cast<int>(graphs_.size()) - 1;
  }
  CHECK(false) << "CaptureGraph: the step copied more host bytes when recorded again; "
                  "`record` must make the same calls every time";
  return -1;
}

void CudaBackend::LaunchGraph(int graph) {
  CHECK(graph >= 0 && graph < static_cast<int>(graphs_.size()))
      << "LaunchGraph: no graph " << graph << " (" << graphs_.size() << " captured)";
  CheckCuda(cudaGraphLaunch(graphs_[graph], stream_), "LaunchGraph");
}

void CudaBackend::ReleaseGraphs() {
  CheckNotCapturing("ReleaseGraphs");
  if (graphs_.empty() && snapshots_.empty()) return;
  CheckCuda(cudaStreamSynchronize(stream_), "ReleaseGraphs (a queued op failed)");
  for (cudaGraphExec_t graph : graphs_) CheckCuda(cudaGraphExecDestroy(graph), "ReleaseGraphs");
  graphs_.clear();
  for (const SnapshotBlock& block : snapshots_) {
    CheckCuda(cudaFreeHost(block.data), "ReleaseGraphs: snapshot memory");
  }
  snapshots_.clear();
  snapshot_used_ = 0;
}

float* CudaBackend::Scratch(size_t floats) {
  if (floats <= scratch_floats_) return scratch_;
  CheckNotCapturing("growing the scratch buffer");
  // Queued ops may still read the old buffer.
  CheckCuda(cudaStreamSynchronize(stream_), "Scratch");
  if (scratch_ != nullptr) CheckCuda(cudaFree(scratch_), "Scratch: free");
  scratch_ = nullptr;
  scratch_floats_ = 0;
  // Rounded up to 1 MiB so that slightly larger requests do not regrow.
  constexpr size_t kGranule = (size_t{1} << 20) / sizeof(float);
  const size_t grown = (floats + kGranule - 1) / kGranule * kGranule;
  CheckCuda(cudaMalloc(&scratch_, grown * sizeof(float)), "Scratch: out of device memory");
  ++allocations_made_;
  scratch_floats_ = grown;
  UpdatePeak();
  return scratch_;
}

// ------------------------------------------------------------------ ops

void CudaBackend::Matmul(const MatmulParams& p) {
  CHECK(p.m >= 0 && p.n >= 0 && p.k >= 0 && p.batch >= 1)
      << "matmul: m=" << p.m << " n=" << p.n << " k=" << p.k << " batch=" << p.batch;
  for (const Tensor* t : {&p.a, &p.b, &p.out}) {
    CHECK(t->data != nullptr && (t->dtype == DType::kF32 || t->dtype == DType::kBF16))
        << "matmul: a, b and out must be non-empty f32 or bf16 tensors";
  }
  CHECK(p.batch == 1 || p.stride_out != 0)
      << "matmul: a batched output cannot broadcast (stride_out = 0)";
  const int64_t last = p.batch - 1;
  CHECK_LE(last * p.stride_a + p.m * p.k, p.a.numel())
      << "matmul: a " << p.a.shape.ToString() << " too small";
  CHECK_LE(last * p.stride_b + p.k * p.n, p.b.numel())
      << "matmul: b " << p.b.shape.ToString() << " too small";
  CHECK_LE(last * p.stride_out + p.m * p.n, p.out.numel())
      << "matmul: out " << p.out.shape.ToString() << " too small";
  const cuda::MatmulArgs args{.a = AsActIn(p.a), .b = AsActIn(p.b), .out = AsActOut(p.out),
                              .m = p.m, .n = p.n, .k = p.k,
                              .trans_a = p.trans_a, .trans_b = p.trans_b,
                              .batch = p.batch, .stride_a = p.stride_a,
                              .stride_b = p.stride_b, .stride_out = p.stride_out,
                              .alpha = p.alpha, .beta = p.beta};
  const cudaError_t e = matmul_->Run(args, matmul_precision_, stream_);
  CHECK(e == cudaSuccess) << "matmul (m=" << p.m << " n=" << p.n << " k=" << p.k
                          << " batch=" << p.batch << "): " << cudaGetErrorName(e) << " ("
                          << cudaGetErrorString(e) << "), cuBLAS: "
                          << cublasGetStatusString(matmul_->blas_status())
                          << (capturing_ ? "; inside a captured step: the staging had to "
                                           "grow, so this product never ran uncaptured"
                                         : "");
  UpdatePeak();  // the bf16 staging buffers may have grown
}

void CudaBackend::Add(const BinaryParams& p) {
  RunElementwise(cuda::LaunchAddForward, "add", p.out.numel(), {p.a, "add: a"},
                 {p.b, "add: b"}, {p.out, "add: out"}, stream_);
}

void CudaBackend::AddBackward(const BinaryBackwardParams& p) {
  const int64_t n = p.grad_out.numel();
  CheckActivation(p.grad_out, n, "add backward: grad_out");
  const ActOut grad_a = OptionalAct(p.grad_a, n, "add backward: grad_a");
  const ActOut grad_b = OptionalAct(p.grad_b, n, "add backward: grad_b");
  CheckAliasSameDType(p.grad_a, p.grad_b, "add backward: grad_a and grad_b");
  CheckCuda(cuda::LaunchAddBackward(AsActIn(p.grad_out), grad_a, grad_b, n, stream_),
            "add backward");
}

void CudaBackend::Mul(const BinaryParams& p) {
  RunElementwise(cuda::LaunchMulForward, "mul", p.out.numel(), {p.a, "mul: a"},
                 {p.b, "mul: b"}, {p.out, "mul: out"}, stream_);
}

void CudaBackend::MulBackward(const BinaryBackwardParams& p) {
  const int64_t n = p.grad_out.numel();
  CheckActivation(p.grad_out, n, "mul backward: grad_out");
  const ActOut grad_a = OptionalAct(p.grad_a, n, "mul backward: grad_a");
  const ActOut grad_b = OptionalAct(p.grad_b, n, "mul backward: grad_b");
  CheckAliasSameDType(p.grad_a, p.grad_b, "mul backward: grad_a and grad_b");
  // grad_a needs b and grad_b needs a; an input not needed is not read.
  ActIn a, b;
  if (grad_b.data != nullptr) {
    CheckActivation(p.a, n, "mul backward: a (grad_b needs it)");
    a = AsActIn(p.a);
  }
  if (grad_a.data != nullptr) {
    CheckActivation(p.b, n, "mul backward: b (grad_a needs it)");
    b = AsActIn(p.b);
  }
  CheckCuda(cuda::LaunchMulBackward(a, b, AsActIn(p.grad_out), grad_a, grad_b, n, stream_),
            "mul backward");
}

void CudaBackend::GeluForward(const UnaryParams& p) {
  RunElementwise(cuda::LaunchGeluForward, "gelu", p.in.numel(), {p.in, "gelu: in"},
                 {p.out, "gelu: out"}, stream_);
}

void CudaBackend::GeluBackward(const UnaryBackwardParams& p) {
  if (p.grad_in.empty()) return;
  RunElementwise(cuda::LaunchGeluBackward, "gelu backward", p.in.numel(),
                 {p.in, "gelu backward: in"}, {p.grad_out, "gelu backward: grad_out"},
                 {p.grad_in, "gelu backward: grad_in"}, stream_);
}

void CudaBackend::SiluForward(const UnaryParams& p) {
  RunElementwise(cuda::LaunchSiluForward, "silu", p.in.numel(), {p.in, "silu: in"},
                 {p.out, "silu: out"}, stream_);
}

void CudaBackend::SiluBackward(const UnaryBackwardParams& p) {
  if (p.grad_in.empty()) return;
  RunElementwise(cuda::LaunchSiluBackward, "silu backward", p.in.numel(),
                 {p.in, "silu backward: in"}, {p.grad_out, "silu backward: grad_out"},
                 {p.grad_in, "silu backward: grad_in"}, stream_);
}

void CudaBackend::SwiGluForward(const SwiGluParams& p) {
  RunElementwise(cuda::LaunchSwiGluForward, "swiglu", p.gate.numel(), {p.gate, "swiglu: gate"},
                 {p.up, "swiglu: up"}, {p.out, "swiglu: out"}, stream_);
}

void CudaBackend::SwiGluBackward(const SwiGluBackwardParams& p) {
  const int64_t n = p.gate.numel();
  CheckActivation(p.gate, n, "swiglu backward: gate");
  CheckActivation(p.up, n, "swiglu backward: up");
  CheckActivation(p.grad_out, n, "swiglu backward: grad_out");
  const ActOut grad_gate = OptionalAct(p.grad_gate, n, "swiglu backward: grad_gate");
  const ActOut grad_up = OptionalAct(p.grad_up, n, "swiglu backward: grad_up");
  CheckCuda(cuda::LaunchSwiGluBackward(AsActIn(p.gate), AsActIn(p.up), AsActIn(p.grad_out),
                                       grad_gate, grad_up, n, stream_),
            "swiglu backward");
}

void CudaBackend::BiasAdd(const BiasAddParams& p) {
  const int64_t cols = p.bias.numel();
  CheckF32(p.bias, cols, "bias_add: bias");
  CHECK_EQ(p.x.shape.cols(), cols) << "bias_add: x " << p.x.shape.ToString();
  CheckActivation(p.x, p.x.numel(), "bias_add: x");
  CheckCuda(cuda::LaunchBiasAddForward(AsActOut(p.x), p.bias.f32(), p.x.shape.rows(), cols,
                                       stream_),
            "bias_add");
}

void CudaBackend::BiasBackward(const BiasBackwardParams& p) {
  if (p.grad_bias.empty()) return;
  const int64_t cols = p.grad_bias.numel();
  CheckF32(p.grad_bias, cols, "bias backward: grad_bias");
  CHECK_EQ(p.grad_out.shape.cols(), cols)
      << "bias backward: grad_out " << p.grad_out.shape.ToString();
  CheckActivation(p.grad_out, p.grad_out.numel(), "bias backward: grad_out");
  const int64_t rows = p.grad_out.shape.rows();
  float* scratch = Scratch(cuda::BiasBackwardScratchFloats(rows, cols));
  CheckCuda(cuda::LaunchBiasAddBackward(AsActIn(p.grad_out), p.grad_bias.f32(), rows, cols,
                                        scratch, stream_),
            "bias backward");
}

void CudaBackend::LayerNormForward(const NormParams& p) {
  const int64_t cols = p.gain.numel();
  CHECK_EQ(p.x.shape.cols(), cols) << "layer_norm: x " << p.x.shape.ToString();
  const int64_t rows = p.x.shape.rows();
  CheckActivation(p.x, rows * cols, "layer_norm: x");
  CheckF32(p.gain, cols, "layer_norm: gain");
  CheckActivation(p.out, rows * cols, "layer_norm: out");
  CheckNormResidual(p, rows * cols, "layer_norm");
  CheckCuda(cuda::LaunchLayerNormForward(
                AsActIn(p.x), AsActIn(p.residual), p.gain.f32(),
                OptionalF32(p.bias, cols, "layer_norm: bias"), AsActOut(p.sum), AsActOut(p.out),
                OptionalF32(p.mean, rows, "layer_norm: mean"),
                OptionalF32(p.rstd, rows, "layer_norm: rstd"), rows, cols, p.eps, stream_),
            "layer_norm");
}

void CudaBackend::LayerNormBackward(const NormBackwardParams& p) {
  const int64_t cols = p.gain.numel();
  CHECK_EQ(p.x.shape.cols(), cols) << "layer_norm backward: x " << p.x.shape.ToString();
  const int64_t rows = p.x.shape.rows();
  CheckActivation(p.x, rows * cols, "layer_norm backward: x");
  CheckF32(p.gain, cols, "layer_norm backward: gain");
  CheckF32(p.mean, rows, "layer_norm backward: mean");
  CheckF32(p.rstd, rows, "layer_norm backward: rstd");
  CheckActivation(p.grad_out, rows * cols, "layer_norm backward: grad_out");
  const ActOut grad_x = OptionalAct(p.grad_x, rows * cols, "layer_norm backward: grad_x");
  float* grad_gain = OptionalF32(p.grad_gain, cols, "layer_norm backward: grad_gain");
  float* grad_bias = OptionalF32(p.grad_bias, cols, "layer_norm backward: grad_bias");
  float* scratch = Scratch(cuda::LayerNormBackwardScratchFloats(rows, cols));
  CheckCuda(cuda::LaunchLayerNormBackward(AsActIn(p.x), p.gain.f32(), p.mean.f32(),
                                          p.rstd.f32(), AsActIn(p.grad_out), grad_x, grad_gain,
                                          grad_bias, rows, cols, scratch, stream_),
            "layer_norm backward");
}

void CudaBackend::RmsNormForward(const NormParams& p) {
  const int64_t cols = p.gain.numel();
  CHECK_EQ(p.x.shape.cols(), cols) << "rms_norm: x " << p.x.shape.ToString();
  const int64_t rows = p.x.shape.rows();
  CheckActivation(p.x, rows * cols, "rms_norm: x");
  CheckF32(p.gain, cols, "rms_norm: gain");
  CheckActivation(p.out, rows * cols, "rms_norm: out");
  CheckNormResidual(p, rows * cols, "rms_norm");
  CheckCuda(cuda::LaunchRmsNormForward(
                AsActIn(p.x), AsActIn(p.residual), p.gain.f32(), AsActOut(p.sum),
                AsActOut(p.out),
                OptionalF32(p.rstd, rows, "rms_norm: rstd"), rows, cols, p.eps, stream_),
            "rms_norm");
}

void CudaBackend::RmsNormBackward(const NormBackwardParams& p) {
  const int64_t cols = p.gain.numel();
  CHECK_EQ(p.x.shape.cols(), cols) << "rms_norm backward: x " << p.x.shape.ToString();
  const int64_t rows = p.x.shape.rows();
  CheckActivation(p.x, rows * cols, "rms_norm backward: x");
  CheckF32(p.gain, cols, "rms_norm backward: gain");
  CheckF32(p.rstd, rows, "rms_norm backward: rstd");
  CheckActivation(p.grad_out, rows * cols, "rms_norm backward: grad_out");
  const ActOut grad_x = OptionalAct(p.grad_x, rows * cols, "rms_norm backward: grad_x");
  float* grad_gain = OptionalF32(p.grad_gain, cols, "rms_norm backward: grad_gain");
  float* scratch = Scratch(cuda::RmsNormBackwardScratchFloats(rows, cols));
  CheckCuda(cuda::LaunchRmsNormBackward(AsActIn(p.x), p.gain.f32(), p.rstd.f32(),
                                        AsActIn(p.grad_out), grad_x, grad_gain, rows, cols,
                                        scratch, stream_),
            "rms_norm backward");
}

void CudaBackend::RopeForward(const RopeParams& p) {
  const cuda::RopeShape shape = CheckRope(p.x, p.cos, p.sin, p.time, p.head_dim,
                                          p.rotate_channels, p.position_offset, "rope");
  CheckActivation(p.out, p.x.numel(), "rope: out");
  CheckAliasSameDType(p.out, p.x, "rope: out and x");
  CheckCuda(cuda::LaunchRopeForward(AsActIn(p.x), AsActOut(p.out), p.cos.f32(), p.sin.f32(),
                                    shape, stream_),
            "rope");
}

void CudaBackend::RopeBackward(const RopeBackwardParams& p) {
  if (p.grad_in.empty()) return;
  const cuda::RopeShape shape =
      CheckRope(p.grad_out, p.cos, p.sin, p.time, p.head_dim, p.rotate_channels,
                p.position_offset, "rope backward");
  CheckActivation(p.grad_in, p.grad_out.numel(), "rope backward: grad_in");
  CHECK(p.grad_in.data != p.grad_out.data)
      << "rope backward: grad_in must not alias grad_out (it accumulates)";
  CheckCuda(cuda::LaunchRopeBackward(AsActIn(p.grad_out), AsActOut(p.grad_in), p.cos.f32(),
                                     p.sin.f32(), shape, stream_),
            "rope backward");
}

void CudaBackend::AttentionForward(const AttentionParams& p) {
  const cuda::AttentionShape shape =
      CheckAttention(p.qkv, p.out, p.batch, p.time, p.heads, p.head_dim, "attention");
  float* lse = OptionalF32(p.lse, p.batch * p.heads * p.time, "attention: lse (B, H, T)");
  // The speed mode runs attention's products on the tensor cores too.
  if (matmul_precision_ == MatmulPrecision::kBf16) {
    CheckCuda(cuda::LaunchAttentionForwardBf16(AsActIn(p.qkv), AsActOut(p.out), lse, shape,
                                               stream_),
              "attention (bf16; a bf16 qkv must be 16-byte aligned)");
    return;
  }
  CheckCuda(cuda::LaunchAttentionForward(AsActIn(p.qkv), AsActOut(p.out), lse, shape, stream_),
            "attention");
}

void CudaBackend::AttentionBackward(const AttentionBackwardParams& p) {
  if (p.grad_qkv.empty()) return;
  const cuda::AttentionShape shape = CheckAttention(p.qkv, p.out, p.batch, p.time, p.heads,
                                                    p.head_dim, "attention backward");
  const int64_t c = p.heads * p.head_dim;
  CheckF32(p.lse, p.batch * p.heads * p.time, "attention backward: lse (B, H, T)");
  CheckActivation(p.grad_out, p.batch * p.time * c, "attention backward: grad_out (B, T, C)");
  CheckActivation(p.grad_qkv, p.batch * p.time * 3 * c,
                  "attention backward: grad_qkv (B, T, 3C)");
  float* scratch = Scratch(cuda::AttentionBackwardScratchFloats(shape));
  if (matmul_precision_ == MatmulPrecision::kBf16) {
    CheckCuda(cuda::LaunchAttentionBackwardBf16(AsActIn(p.qkv), AsActIn(p.out), p.lse.f32(),
                                                AsActIn(p.grad_out), AsActOut(p.grad_qkv),
                                                shape, scratch, stream_),
              "attention backward (bf16; a bf16 qkv or grad_out must be 16-byte aligned)");
    return;
  }
  CheckCuda(cuda::LaunchAttentionBackward(AsActIn(p.qkv), AsActIn(p.out), p.lse.f32(),
                                          AsActIn(p.grad_out), AsActOut(p.grad_qkv), shape,
                                          scratch, stream_),
            "attention backward");
}

void CudaBackend::EmbeddingForward(const EmbeddingParams& p) {
  const int64_t count = p.ids.numel();
  const int64_t vocab = p.table.shape.rows();
  const int64_t cols = p.table.shape.cols();
  CheckI32(p.ids, count, "embedding: ids");
  CheckF32(p.table, vocab * cols, "embedding: table (V, C)");
  CheckF32(p.out, count * cols, "embedding: out (N, C)");
  CheckCuda(cuda::LaunchEmbeddingForward(p.ids.i32(), p.table.f32(), p.out.f32(), count,
                                         vocab, cols, stream_),
            "embedding");
}

void CudaBackend::EmbeddingBackward(const EmbeddingBackwardParams& p) {
  if (p.grad_table.empty()) return;
  const int64_t count = p.ids.numel();
  const int64_t vocab = p.grad_table.shape.rows();
  const int64_t cols = p.grad_table.shape.cols();
  CheckI32(p.ids, count, "embedding backward: ids");
  CheckF32(p.grad_table, vocab * cols, "embedding backward: grad_table (V, C)");
  CheckF32(p.grad_out, count * cols, "embedding backward: grad_out (N, C)");
  CheckCuda(cuda::LaunchEmbeddingBackward(p.ids.i32(), p.grad_out.f32(), p.grad_table.f32(),
                                          count, vocab, cols, stream_),
            "embedding backward");
}

void CudaBackend::CrossEntropyForward(const CrossEntropyParams& p) {
  const int64_t rows = p.logits.shape.rows();
  const int64_t vocab = p.logits.shape.cols();
  CheckF32(p.logits, rows * vocab, "cross_entropy: logits (N, V)");
  CheckI32(p.targets, rows, "cross_entropy: targets (N)");
  CheckF32(p.losses, rows, "cross_entropy: losses (N)");
  float* lse = OptionalF32(p.lse, rows, "cross_entropy: lse (N)");
  CheckCuda(cuda::LaunchCrossEntropyForward(p.logits.f32(), p.targets.i32(), p.losses.f32(),
                                            lse, rows, vocab, stream_),
            "cross_entropy");
}

void CudaBackend::CrossEntropyBackward(const CrossEntropyBackwardParams& p) {
  if (p.grad_logits.empty()) return;
  const int64_t rows = p.logits.shape.rows();
  const int64_t vocab = p.logits.shape.cols();
  CheckF32(p.logits, rows * vocab, "cross_entropy backward: logits (N, V)");
  CheckI32(p.targets, rows, "cross_entropy backward: targets (N)");
  CheckF32(p.lse, rows, "cross_entropy backward: lse (N)");
  CheckF32(p.grad_losses, rows, "cross_entropy backward: grad_losses (N)");
  CheckActivation(p.grad_logits, rows * vocab, "cross_entropy backward: grad_logits (N, V)");
  CheckAliasSameDType(p.grad_logits, p.logits, "cross_entropy backward: grad_logits in place");
  CheckCuda(cuda::LaunchCrossEntropyBackward(p.logits.f32(), p.targets.i32(), p.lse.f32(),
                                             p.grad_losses.f32(), AsActOut(p.grad_logits),
                                             rows, vocab, p.overwrite, stream_),
            "cross_entropy backward");
}

void CudaBackend::Reduce(const ReduceParams& p, bool squares) {
  const char* op = squares ? "sum_squares" : "sum";
  CheckF32(p.in, p.in.numel(), op);
  CheckF32(p.out, 1, op);
  const int64_t count = p.in.numel();
  float* scratch = Scratch(cuda::ReduceScratchFloats(count));
  CheckCuda(cuda::LaunchReduce(p.in.f32(), count,
                               squares ? cuda::ReduceKind::kSumSquares : cuda::ReduceKind::kSum,
                               p.accumulate, p.out.f32(), scratch, stream_),
            op);
}

void CudaBackend::Sum(const ReduceParams& p) { Reduce(p, /*squares=*/false); }

void CudaBackend::SumSquares(const ReduceParams& p) { Reduce(p, /*squares=*/true); }

void CudaBackend::AdamW(const AdamWParams& p) {
  const int64_t n = p.param.numel();
  CheckF32(p.param, n, "adamw: param");
  CheckF32(p.grad, n, "adamw: grad");
  CheckF32(p.m, n, "adamw: m");
  CheckF32(p.v, n, "adamw: v");
  const float* grad_norm_sq = nullptr;
  if (!p.grad_norm_sq.empty() && p.max_grad_norm > 0) {
    CheckF32(p.grad_norm_sq, 1, "adamw: grad_norm_sq (1)");
    grad_norm_sq = p.grad_norm_sq.f32();
  }
  cuda::AdamWHyper hyper;
  hyper.beta1 = p.beta1;
  hyper.beta2 = p.beta2;
  hyper.eps = p.eps;
  hyper.weight_decay = p.weight_decay;
  hyper.max_grad_norm = p.max_grad_norm;
  const float* scalars = nullptr;
  if (!p.scalars.empty()) {
    // lr and the bias corrections are read on the device.
    CheckF32(p.scalars, AdamWStepScalars::kCount, "adamw: scalars (3)");
    scalars = p.scalars.f32();
  } else {
    // Bias corrections in double on the host, as in the CPU reference.
    const AdamWStepScalars s = MakeAdamWStepScalars(p.lr, p.beta1, p.beta2, p.step);
    hyper.lr = s.lr;
    hyper.correction1 = s.correction1;
    hyper.correction2 = s.correction2;
  }
  CheckCuda(cuda::LaunchAdamW(p.param.f32(), p.grad.f32(), p.m.f32(), p.v.f32(),
                              grad_norm_sq, scalars, n, hyper, stream_),
            "adamw");
}

void CudaBackend::RowSumSquares(const RowReduceParams& p) {
  const int64_t rows = p.in.shape.rows(), cols = p.in.shape.cols();
  CheckF32(p.in, p.in.numel(), "row_sum_squares: in");
  CheckF32(p.out, rows, "row_sum_squares: out (R)");
  CheckCuda(cuda::LaunchRowSumSquares(p.in.f32(), rows, cols, p.alpha, p.beta, p.out.f32(),
                                      stream_),
            "row_sum_squares");
}

void CudaBackend::RowScale(const RowScaleParams& p) {
  const int64_t rows = p.in.shape.rows(), cols = p.in.shape.cols();
  CheckF32(p.in, p.in.numel(), "row_scale: in");
  CheckF32(p.out, p.in.numel(), "row_scale: out");
  CheckCuda(cuda::LaunchRowScale(p.in.f32(), rows, cols,
                                 OptionalF32(p.numer, rows, "row_scale: numer (R)"),
                                 OptionalF32(p.denom, rows, "row_scale: denom (R)"),
                                 OptionalF32(p.scale, 1, "row_scale: scale (1)"), p.alpha,
                                 p.eps, p.out.f32(), stream_),
            "row_scale");
}

void CudaBackend::GatherSequences(const GatherSequencesParams& p) {
  const int64_t rows = p.starts.numel(), time = p.time;
  CHECK_GT(time, 0) << "gather_sequences: time";
  CheckI32(p.tokens, p.tokens.numel(), "gather_sequences: tokens (S)");
  CheckI32(p.starts, rows, "gather_sequences: starts (B)");
  CheckI32(p.inputs, rows * time, "gather_sequences: inputs (B·T)");
  CheckI32(p.targets, rows * time, "gather_sequences: targets (B·T)");
  CheckCuda(cuda::LaunchGatherSequences(p.tokens.i32(), p.tokens.numel(), p.starts.i32(), rows,
                                        time, p.inputs.i32(), p.targets.i32(), stream_),
            "gather_sequences");
}

}  // namespace smallem
