#include "engine/optim/newton_schulz.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "base/check.h"

namespace smallem {
namespace {

// Squared Frobenius norms below this count as zero (the matrix stays zero).
constexpr float kNormEps = 1e-30f;

// Solves the 4 × 4 system m·x = rhs by Gaussian elimination with partial
// pivoting.
std::array<double, 4> Solve4(std::array<std::array<double, 4>, 4> m, std::array<double, 4> rhs) {
  for (int col = 0; col < 4; ++col) {
    int pivot = col;
    for (int r = col + 1; r < 4; ++r) {
      if (std::abs(m[r][col]) > std::abs(m[pivot][col])) pivot = r;
    }
    std::swap(m[col], m[pivot]);
    std::swap(rhs[col], rhs[pivot]);
    CHECK(m[col][col] != 0) << "minimax: singular Remez system";
    for (int r = 0; r < 4; ++r) {
      if (r == col) continue;
      const double f = m[r][col] / m[col][col];
      for (int c = col; c < 4; ++c) m[r][c] -= f * m[col][c];
      rhs[r] -= f * rhs[col];
    }
  }
  return {rhs[0] / m[0][0], rhs[1] / m[1][1], rhs[2] / m[2][2], rhs[3] / m[3][3]};
}

// Positive critical points of p (roots of a + 3b·y + 5c·y² in y = x²),
// ascending; fewer than two when p has none.
std::vector<double> CriticalPoints(const NewtonSchulzStep& p) {
  std::vector<double> xs;
  if (p.c == 0) return xs;
  const double disc = 9 * p.b * p.b - 20 * p.a * p.c;
  if (disc < 0) return xs;
  for (double y : {(-3 * p.b - std::sqrt(disc)) / (10 * p.c), (-3 * p.b + std::sqrt(disc)) / (10 * p.c)}) {
    if (y > 0) xs.push_back(std::sqrt(y));
  }
  std::sort(xs.begin(), xs.end());
  return xs;
}

// The odd quintic closest to 1 in max norm on [lo, hi]. The error 1 − p
// equioscillates on l < x1 < x2 < u, where x1, x2 are p's critical points
// (a local maximum above 1, then a local minimum below): solve
// p(x_i) + (−1)^i·E = 1 for (a, b, c, E), move x1, x2 to the new critical
// points, repeat until they stop moving.
NewtonSchulzStep MinimaxQuintic(double lo, double hi) {
  std::array<double, 4> xs = {lo, lo + (hi - lo) / 3, lo + 2 * (hi - lo) / 3, hi};
  NewtonSchulzStep p;
  for (int iteration = 0; iteration < 200; ++iteration) {
    std::array<std::array<double, 4>, 4> m;
    for (int i = 0; i < 4; ++i) {
      const double x = xs[i];
      m[i] = {x, x * x * x, x * x * x * x * x, i % 2 == 0 ? 1.0 : -1.0};
    }
    const std::array<double, 4> sol = Solve4(m, {1, 1, 1, 1});
    p = NewtonSchulzStep{sol[0], sol[1], sol[2]};
    const std::vector<double> crit = CriticalPoints(p);
    CHECK(crit.size() == 2 && crit[0] > lo && crit[1] < hi)
        << "minimax: no alternation on [" << lo << ", " << hi << "]";
    const double moved = std::max(std::abs(crit[0] - xs[1]), std::abs(crit[1] - xs[2]));
    xs[1] = crit[0];
    xs[2] = crit[1];
    if (moved < 1e-15 * hi) break;
  }
  return p;
}

}  // namespace

const NewtonSchulzSchedule& StandardNewtonSchulzSchedule() {
  static const NewtonSchulzSchedule schedule = [] {
    NewtonSchulzSchedule s(8, NewtonSchulzStep{3.4445, -4.7750, 2.0315});
    s.push_back(NewtonSchulzStep{2.0, -1.5, 0.5});
    s.push_back(NewtonSchulzStep{2.0, -1.5, 0.5});
    return s;
  }();
  return schedule;
}

const NewtonSchulzSchedule& ShortNewtonSchulzSchedule() {
  // DeriveMinimaxSchedule(0.02, 4), rounded to 10 significant digits
  // (tests/engine/newton_schulz_test.cc re-derives it). Each row is one
  // iteration, with the interval it is optimal on (of σ/(1.01·‖X‖_F)):
  static const NewtonSchulzSchedule schedule = WithNormMargin(
      {
          {7.710969246, -22.11375479, 16.24874302},   // [0.02, 1]
          {3.215275987, -2.411172010, 0.5013000136},  // [0.1540, 1.8460]
          {2.218307752, -1.593989623, 0.4107478875},  // [0.4865, 1.5135]
          {1.884209319, -1.260194949, 0.3760209487},  // [0.9069, 1.0931]
      },
      kShortNormMargin);
  return schedule;
}

NewtonSchulzSchedule WithNormMargin(const NewtonSchulzSchedule& schedule, double margin) {
  CHECK(margin > 0 && !schedule.empty()) << "norm margin " << margin << " on "
                                         << schedule.size() << " steps";
  NewtonSchulzSchedule out = schedule;
  const double m2 = margin * margin;
  out[0] = NewtonSchulzStep{schedule[0].a / margin, schedule[0].b / (margin * m2),
                            schedule[0].c / (margin * m2 * m2)};
  return out;
}

double ApplySchedule(const NewtonSchulzSchedule& schedule, double x) {
  for (const NewtonSchulzStep& step : schedule) x = step(x);
  return x;
}

MinimaxSchedule DeriveMinimaxSchedule(double lower, int iterations) {
  CHECK(lower > 0 && lower < 1) << "minimax: lower bound " << lower << " not in (0, 1)";
  MinimaxSchedule out;
  double lo = lower, hi = 1.0;
  for (int t = 0; t < iterations; ++t) {
    const NewtonSchulzStep p = MinimaxQuintic(lo, hi);
    out.steps.push_back(p);
    // The image of [lo, hi]: p's extremes there are at the ends or at its
    // critical points.
    double next_lo = std::min(p(lo), p(hi)), next_hi = std::max(p(lo), p(hi));
    for (double x : CriticalPoints(p)) {
      if (x > lo && x < hi) {
        next_lo = std::min(next_lo, p(x));
        next_hi = std::max(next_hi, p(x));
      }
    }
    lo = next_lo;
    hi = next_hi;
  }
  out.band_low = lo;
  out.band_high = hi;
  return out;
}

int64_t NewtonSchulzWorkspaceFloats(int64_t batch, int64_t rows, int64_t cols) {
  const int64_t s = std::min(rows, cols);
  return PaddedFloats(batch * rows * cols) + 2 * PaddedFloats(batch * s * s) + PaddedFloats(batch);
}

NewtonSchulzWorkspace CarveNewtonSchulzWorkspace(float* base, int64_t batch, int64_t rows,
                                                 int64_t cols) {
  const int64_t s = std::min(rows, cols);
  NewtonSchulzWorkspace ws;
  ws.next = Tensor{.data = base, .shape = {batch, rows, cols}};
  base += PaddedFloats(batch * rows * cols);
  ws.gram = Tensor{.data = base, .shape = {batch, s, s}};
  base += PaddedFloats(batch * s * s);
  ws.poly = Tensor{.data = base, .shape = {batch, s, s}};
  base += PaddedFloats(batch * s * s);
  ws.norm_sq = Tensor{.data = base, .shape = {batch}};
  return ws;
}

void Orthogonalize(Backend& be, Tensor x, const NewtonSchulzSchedule& schedule,
                   const NewtonSchulzWorkspace& ws) {
  const int rank = x.shape.rank();
  CHECK(rank == 2 || rank == 3) << "orthogonalize: x " << x.shape.ToString()
                                << " must be (rows, cols) or (batch, rows, cols)";
  const int64_t batch = rank == 3 ? x.shape[0] : 1;
  const int64_t rows = x.shape[rank - 2], cols = x.shape[rank - 1];
  const bool wide = rows <= cols;
  const int64_t s = std::min(rows, cols), size = rows * cols;
  CHECK(ws.next.numel() >= batch * size && ws.gram.numel() >= batch * s * s &&
        ws.poly.numel() >= batch * s * s && ws.norm_sq.numel() >= batch)
      << "orthogonalize: workspace too small for " << x.shape.ToString();

  // Each matrix on its own: the norms are per row of the (batch, size) view.
  const Tensor flat = x.Reshaped({batch, size});
  const Tensor norm_sq{.data = ws.norm_sq.data, .shape = {batch}};
  be.RowSumSquares(RowReduceParams{.in = flat, .out = norm_sq});
  be.RowScale(RowScaleParams{.in = flat, .out = flat, .denom = norm_sq, .eps = kNormEps});

  Tensor current = x;
  Tensor other = Tensor{.data = ws.next.data, .shape = x.shape};
  for (const NewtonSchulzStep& step : schedule) {
    // gram = X·Xᵀ (wide) or Yᵀ·Y (tall): (s, s).
    be.Matmul(MatmulParams{.a = current, .b = current, .out = ws.gram, .m = s, .n = s,
                           .k = wide ? cols : rows, .trans_a = !wide, .trans_b = wide,
                           .batch = batch, .stride_a = size, .stride_b = size,
                           .stride_out = s * s});
    // poly = c·gram² + b·gram.
    be.CopyOnDevice(ws.poly.data, ws.gram.data, static_cast<size_t>(batch * s * s) * sizeof(float));
    be.Matmul(MatmulParams{.a = ws.gram, .b = ws.gram, .out = ws.poly, .m = s, .n = s, .k = s,
                           .batch = batch, .stride_a = s * s, .stride_b = s * s,
                           .stride_out = s * s, .alpha = static_cast<float>(step.c),
                           .beta = static_cast<float>(step.b)});
    // next = a·X + poly·X (wide) or a·Y + Y·polyᵀ (tall).
    be.CopyOnDevice(other.data, current.data, static_cast<size_t>(batch * size) * sizeof(float));
    if (wide) {
      be.Matmul(MatmulParams{.a = ws.poly, .b = current, .out = other, .m = rows, .n = cols,
                             .k = rows, .batch = batch, .stride_a = s * s, .stride_b = size,
                             .stride_out = size, .beta = static_cast<float>(step.a)});
    } else {
      be.Matmul(MatmulParams{.a = current, .b = ws.poly, .out = other, .m = rows, .n = cols,
                             .k = cols, .trans_b = true, .batch = batch, .stride_a = size,
                             .stride_b = s * s, .stride_out = size,
                             .beta = static_cast<float>(step.a)});
    }
    std::swap(current, other);
  }
  if (current.data != x.data) {
    be.CopyOnDevice(x.data, current.data, static_cast<size_t>(batch * size) * sizeof(float));
  }
}

}  // namespace smallem
