// Backend's default implementations of the optimizer row ops: a round trip
// through host memory around the CPU reference (engine/cpu/row_*.cc), so a
// backend without its own kernels is slow but correct.
#include "engine/backend.h"

#include <vector>

#include "engine/check.h"
#include "engine/cpu/cpu_util.h"

namespace smallem {
namespace {

std::vector<float> HostCopy(Backend& be, const Tensor& t) {
  std::vector<float> host(static_cast<size_t>(t.numel()));
  if (!t.empty()) be.CopyToHost(host.data(), t.data, t.bytes());
  return host;
}

}  // namespace

void Backend::RowSumSquares(const RowReduceParams& p) {
  const int64_t rows = p.in.shape.rows(), cols = p.in.shape.cols();
  CHECK(!p.in.empty() && !p.out.empty() && p.out.numel() == rows)
      << "row_sum_squares: out must hold one value per row of in " << p.in.shape.ToString();
  const std::vector<float> in = HostCopy(*this, p.in);
  std::vector<float> out = p.beta == 0.0f ? std::vector<float>(rows) : HostCopy(*this, p.out);
  cpu::RowSumSquares(in.data(), rows, cols, p.alpha, p.beta, out.data(), 1);
  CopyToDevice(p.out.data, out.data(), p.out.bytes());
}

void Backend::RowScale(const RowScaleParams& p) {
  const int64_t rows = p.in.shape.rows(), cols = p.in.shape.cols();
  CHECK(!p.in.empty() && !p.out.empty() && p.out.numel() == p.in.numel())
      << "row_scale: in and out must have the same size";
  CHECK(p.numer.empty() || p.numer.numel() == rows) << "row_scale: numer (R)";
  CHECK(p.denom.empty() || p.denom.numel() == rows) << "row_scale: denom (R)";
  const std::vector<float> in = HostCopy(*this, p.in);
  const std::vector<float> numer = HostCopy(*this, p.numer);
  const std::vector<float> denom = HostCopy(*this, p.denom);
  std::vector<float> out(in.size());
  cpu::RowScale(in.data(), rows, cols, p.numer.empty() ? nullptr : numer.data(),
                p.denom.empty() ? nullptr : denom.data(), p.alpha, p.eps, out.data(), 1);
  CopyToDevice(p.out.data, out.data(), p.out.bytes());
}

}  // namespace smallem
