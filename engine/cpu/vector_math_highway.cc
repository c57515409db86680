// engine/cpu/vector_math.h through Highway's contrib math (libhwy-dev),
// statically dispatched: the vectors are those of the -march the engine is
// compiled for (AVX-512 or AVX2 with SMALLEM_NATIVE, SSE otherwise).
//
// The elementwise functions walk full vectors, then the tail one lane at a
// time with the same lane code (CappedTag<float, 1>); the softmax rows and
// GELU's backward pad their tail to one full vector instead, GELU's because
// its one-lane code rounds some elements differently (bias_gelu.cc needs
// an element's value not to depend on where its slice of a row starts).
#ifdef SMALLEM_HAVE_HWY

#include "engine/cpu/vector_math.h"

#include <cstdio>
#include <cstring>
#include <limits>

// Static dispatch only: the ops are compiled for one -march, and Highway
// 1.0.3 rejects some -march=native baselines (e.g. Cooper Lake's) as a
// dynamic target.
#define HWY_COMPILE_ONLY_STATIC 1
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "hwy/targets.h"
#include "engine/cpu/highway_exp.h"

namespace smallem::cpu {
namespace {

namespace hn = hwy::HWY_NAMESPACE;
using hwy_exp::FastExp;
using Full = hn::ScalableTag<float>;
using One = hn::CappedTag<float, 1>;

constexpr float kTwoSqrt2OverPi = 2 * 0.7978845608028654f;
constexpr float kCubic = 0.044715f;

// σ(z) = 1/(1 + e^−z) from e^−|z| ∈ (0, 1]: no overflow at either end
// (Highway's Exp is valid up to +104; e^−|z| never leaves its range).
template <class D, class V>
HWY_INLINE V Sigmoid(D d, V z) {
  const V e = FastExp(d, hn::Neg(hn::Abs(z)));
  const V one = hn::Set(d, 1.0f);
  const V of_abs = hn::Div(one, hn::Add(one, e));  // σ(|z|)
  return hn::IfThenElse(hn::Lt(z, hn::Zero(d)), hn::Mul(e, of_abs), of_abs);
}

// 2u = 2√(2/π)(x + 0.044715x³), the argument of GELU's σ.
template <class D, class V>
HWY_INLINE V GeluArg(D d, V x) {
  const V x2 = hn::Mul(x, x);
  return hn::Mul(hn::Mul(hn::Set(d, kTwoSqrt2OverPi), x),
                 hn::MulAdd(hn::Set(d, kCubic), x2, hn::Set(d, 1.0f)));
}

// out[i] = f(d, in_0[i], ..., in_k[i]) over full vectors then single lanes.
template <class F>
void Map(int64_t n, F f) {
  const Full d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) f(d, i);
  const One d1;
  for (; i < n; ++i) f(d1, i);
}

}  // namespace

void BiasGeluForward(const float* in, const float* bias, float* out, int64_t n) {
  Map(n, [&](auto d, int64_t i) {
    auto x = hn::LoadU(d, in + i);
    if (bias != nullptr) x = hn::Add(x, hn::LoadU(d, bias + i));
    hn::StoreU(hn::Mul(x, Sigmoid(d, GeluArg(d, x))), d, out + i);
  });
}

void GeluForward(const float* in, float* out, int64_t n) { BiasGeluForward(in, nullptr, out, n); }

namespace {

// GELU'(x)·g + acc, what GeluBackward adds. d/dx x·σ(2u) = σ + x·σ(1 − σ)·2u',
// 2u' = 2√(2/π)(1 + 3·0.044715x²).
template <class D, class V>
HWY_INLINE V GeluSlopeTimes(D d, V x, V g, V acc) {
  const V s = Sigmoid(d, GeluArg(d, x));
  const V one = hn::Set(d, 1.0f);
  const V du = hn::Mul(hn::Set(d, kTwoSqrt2OverPi),
                       hn::MulAdd(hn::Set(d, 3.0f * kCubic), hn::Mul(x, x), one));
  const V slope = hn::Mul(hn::Mul(x, s), hn::Mul(hn::Sub(one, s), du));
  return hn::MulAdd(g, hn::Add(s, slope), acc);
}

// GeluBackward on n elements, n a multiple of the vector's lanes.
void GeluBackwardVectors(const float* in, const float* grad_out, float* grad_in,
                         int64_t n) {
  Map(n, [&](auto d, int64_t i) {
    hn::StoreU(GeluSlopeTimes(d, hn::LoadU(d, in + i), hn::LoadU(d, grad_out + i),
                              hn::LoadU(d, grad_in + i)),
               d, grad_in + i);
  });
}

// BiasGeluBackward on n elements, n a multiple of the vector's lanes.
void BiasGeluBackwardVectors(const float* in, const float* bias, const float* grad_out,
                             float* grad_in, bool overwrite, float* grad_bias, int64_t n) {
  Map(n, [&](auto d, int64_t i) {
    auto x = hn::LoadU(d, in + i);
    if (bias != nullptr) x = hn::Add(x, hn::LoadU(d, bias + i));
    // GeluBackward's value into zeros, then added where it goes.
    const auto v = GeluSlopeTimes(d, x, hn::LoadU(d, grad_out + i), hn::Zero(d));
    if (grad_in != nullptr) {
      hn::StoreU(overwrite ? v : hn::Add(hn::LoadU(d, grad_in + i), v), d, grad_in + i);
    }
    if (grad_bias != nullptr) {
      hn::StoreU(hn::Add(hn::LoadU(d, grad_bias + i), v), d, grad_bias + i);
    }
  });
}

}  // namespace

void GeluBackward(const float* in, const float* grad_out, float* grad_in,
                  int64_t n) {
  // The tail goes through one zero-padded vector rather than one lane at a
  // time: the one-lane code rounds some elements differently (the compiler
  // fuses its products otherwise), and the fused bias + GELU runs this on
  // row slices whose tails fall anywhere (engine/cpu/bias_gelu.cc).
  constexpr int64_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(Full()));
  const int64_t full = n - n % lanes;
  GeluBackwardVectors(in, grad_out, grad_in, full);
  if (full == n) return;
  float x[kMaxLanes] = {}, g[kMaxLanes] = {}, acc[kMaxLanes] = {};
  const int64_t rest = n - full;
  std::memcpy(x, in + full, rest * sizeof(float));
  std::memcpy(g, grad_out + full, rest * sizeof(float));
  std::memcpy(acc, grad_in + full, rest * sizeof(float));
  GeluBackwardVectors(x, g, acc, lanes);
  std::memcpy(grad_in + full, acc, rest * sizeof(float));
}

void BiasGeluBackward(const float* in, const float* bias, const float* grad_out, float* grad_in,
                      bool overwrite, float* grad_bias, int64_t n) {
  // The tail through one zero-padded vector, as GeluBackward's.
  constexpr int64_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(Full()));
  const int64_t full = n - n % lanes;
  BiasGeluBackwardVectors(in, bias, grad_out, grad_in, overwrite, grad_bias, full);
  if (full == n) return;
  float x[kMaxLanes] = {}, b[kMaxLanes] = {}, g[kMaxLanes] = {}, gx[kMaxLanes] = {},
        gb[kMaxLanes] = {};
  const size_t rest = static_cast<size_t>(n - full) * sizeof(float);
  std::memcpy(x, in + full, rest);
  if (bias != nullptr) std::memcpy(b, bias + full, rest);
  std::memcpy(g, grad_out + full, rest);
  if (grad_in != nullptr) std::memcpy(gx, grad_in + full, rest);
  if (grad_bias != nullptr) std::memcpy(gb, grad_bias + full, rest);
  BiasGeluBackwardVectors(x, bias == nullptr ? nullptr : b, g, grad_in == nullptr ? nullptr : gx,
                          overwrite, grad_bias == nullptr ? nullptr : gb, lanes);
  if (grad_in != nullptr) std::memcpy(grad_in + full, gx, rest);
  if (grad_bias != nullptr) std::memcpy(grad_bias + full, gb, rest);
}

void SiluForward(const float* in, float* out, int64_t n) {
  Map(n, [&](auto d, int64_t i) {
    const auto x = hn::LoadU(d, in + i);
    hn::StoreU(hn::Mul(x, Sigmoid(d, x)), d, out + i);
  });
}

// σ(x)(1 + x(1 − σ(x))), SiLU's derivative.
template <class D, class V>
HWY_INLINE V SiluSlope(D d, V x, V s) {
  const V one = hn::Set(d, 1.0f);
  return hn::Mul(s, hn::MulAdd(x, hn::Sub(one, s), one));
}

void SiluBackward(const float* in, const float* grad_out, float* grad_in,
                  int64_t n) {
  Map(n, [&](auto d, int64_t i) {
    const auto x = hn::LoadU(d, in + i);
    const auto slope = SiluSlope(d, x, Sigmoid(d, x));
    hn::StoreU(hn::MulAdd(hn::LoadU(d, grad_out + i), slope, hn::LoadU(d, grad_in + i)),
               d, grad_in + i);
  });
}

void SwiGluForward(const float* gate, const float* up, float* out, int64_t n) {
  Map(n, [&](auto d, int64_t i) {
    const auto x = hn::LoadU(d, gate + i);
    hn::StoreU(hn::Mul(hn::Mul(x, Sigmoid(d, x)), hn::LoadU(d, up + i)), d, out + i);
  });
}

void SwiGluBackward(const float* gate, const float* up, const float* grad_out,
                    float* grad_gate, float* grad_up, bool overwrite, int64_t n) {
  Map(n, [&](auto d, int64_t i) {
    const auto x = hn::LoadU(d, gate + i);
    const auto s = Sigmoid(d, x);
    const auto g = hn::LoadU(d, grad_out + i);
    if (grad_up != nullptr) {
      const auto acc = overwrite ? hn::Zero(d) : hn::LoadU(d, grad_up + i);
      hn::StoreU(hn::MulAdd(g, hn::Mul(x, s), acc), d, grad_up + i);
    }
    if (grad_gate != nullptr) {
      const auto slope = hn::Mul(hn::LoadU(d, up + i), SiluSlope(d, x, s));
      const auto acc = overwrite ? hn::Zero(d) : hn::LoadU(d, grad_gate + i);
      hn::StoreU(hn::MulAdd(g, slope, acc), d, grad_gate + i);
    }
  });
}

// The softmax rows are short (attention's row t has t + 1 entries), so their
// tails run as one full vector over a copy padded with −∞ (e^−∞ = 0 adds
// nothing to a sum, −∞ nothing to a max) rather than lane by lane.
struct PaddedTail {
  HWY_ALIGN float values[HWY_MAX_BYTES / sizeof(float)];
  PaddedTail(const float* in, int64_t count, int64_t lanes) {
    for (int64_t j = 0; j < lanes; ++j) {
      values[j] = j < count ? in[j] : -std::numeric_limits<float>::infinity();
    }
  }
};

float Max(const float* x, int64_t n) {
  const Full d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  auto best = hn::Set(d, -std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) best = hn::Max(best, hn::LoadU(d, x + i));
  if (i < n) best = hn::Max(best, hn::Load(d, PaddedTail(x + i, n - i, lanes).values));
  return hn::GetLane(hn::MaxOfLanes(d, best));
}

float ExpShiftedSum(const float* in, float shift, float* out, int64_t n) {
  const Full d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto shift_v = hn::Set(d, shift);
  auto sum = hn::Zero(d);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto e = FastExp(d, hn::Sub(hn::LoadU(d, in + i), shift_v));
    if (out != nullptr) hn::StoreU(e, d, out + i);
    sum = hn::Add(sum, e);
  }
  if (i < n) {
    PaddedTail tail(in + i, n - i, lanes);
    const auto e = FastExp(d, hn::Sub(hn::Load(d, tail.values), shift_v));
    hn::Store(e, d, tail.values);
    if (out != nullptr) std::memcpy(out + i, tail.values, (n - i) * sizeof(float));
    sum = hn::Add(sum, e);
  }
  return hn::GetLane(hn::SumOfLanes(d, sum));
}

void ScaledExpShifted(const float* in, float shift, float scale, float* out,
                      bool accumulate, int64_t n) {
  const Full d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto shift_v = hn::Set(d, shift);
  const auto scale_v = hn::Set(d, scale);
  const auto one = [&](const float* from, float* to) {
    const auto e = hn::Mul(FastExp(d, hn::Sub(hn::LoadU(d, from), shift_v)), scale_v);
    hn::StoreU(accumulate ? hn::Add(e, hn::LoadU(d, to)) : e, d, to);
  };
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) one(in + i, out + i);
  if (i < n) {
    PaddedTail tail(in + i, n - i, lanes);
    HWY_ALIGN float result[HWY_MAX_BYTES / sizeof(float)] = {};
    if (accumulate) std::memcpy(result, out + i, (n - i) * sizeof(float));
    one(tail.values, result);
    std::memcpy(out + i, result, (n - i) * sizeof(float));
  }
}

void ExpMinus(const float* in, const float* shift, float* out, int64_t n) {
  const Full d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    hn::StoreU(FastExp(d, hn::Sub(hn::LoadU(d, in + i), hn::LoadU(d, shift + i))), d,
               out + i);
  }
  if (i < n) {
    PaddedTail tail(in + i, n - i, lanes);  // e^(−∞ − 0) = 0 in the padding
    HWY_ALIGN float shifts[HWY_MAX_BYTES / sizeof(float)] = {};
    std::memcpy(shifts, shift + i, (n - i) * sizeof(float));
    const auto e = FastExp(d, hn::Sub(hn::Load(d, tail.values), hn::Load(d, shifts)));
    hn::Store(e, d, tail.values);
    std::memcpy(out + i, tail.values, (n - i) * sizeof(float));
  }
}

const char* VectorMathName() {
  static const char* const name = [] {
    static char buffer[64];
    const char* target = hwy::TargetName(HWY_STATIC_TARGET);
    std::snprintf(buffer, sizeof(buffer), "highway %s", target);
    return buffer;
  }();
  return name;
}

}  // namespace smallem::cpu

#endif  // SMALLEM_HAVE_HWY
