// FastExp: the CPU ops' e^x on Highway vectors (engine/cpu/vector_math_
// highway.cc, engine/cpu/attention_tiles.cc). Include after Highway's
// headers, with HWY_COMPILE_ONLY_STATIC defined as those files do.
#ifndef SMALLEM_ENGINE_CPU_HIGHWAY_EXP_H_
#define SMALLEM_ENGINE_CPU_HIGHWAY_EXP_H_

#include <cstdint>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#if HWY_ARCH_X86
#include <immintrin.h>
#endif

namespace smallem::cpu::hwy_exp {

namespace hn = hwy::HWY_NAMESPACE;

// e^x, bit for bit Highway's Exp (hn::Exp): the same rounding of x·log₂e to
// n, the same two-part reduction r = x − n·ln 2 and the same polynomial in
// r, evaluated in the same order. Highway 1.0.3 then scales by 2ⁿ with seven
// integer operations and two products, to stay clear of overflow in 2ⁿ;
// AVX-512's vscalefps does that in one instruction, rounding once as the
// second product does, and its rounding of n uses vrndscaleps: together
// 1.5–2× Highway's throughput on one core (docs/benchmarks.md § The
// exponential). Other vectors use Highway's own.
template <class D, class V>
HWY_INLINE V FastExp(D d, V x) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if constexpr (sizeof(V) == 64) {
    const __m512 v = x.raw;
    // n = trunc(x·log₂e ± 0.5), the half with x's sign: (x ∧ −0) ∨ 0.5.
    const __m512 half = _mm512_castsi512_ps(_mm512_ternarylogic_epi32(
        _mm512_castps_si512(v), _mm512_set1_epi32(INT32_MIN),
        _mm512_castps_si512(_mm512_set1_ps(0.5f)), 0xEA));
    const __m512 n = _mm512_roundscale_ps(
        _mm512_fmadd_ps(v, _mm512_set1_ps(1.442695040888963407359924681f), half),
        _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-0.693145751953125f), v);
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(-1.428606765330187045e-6f), r);
    // Highway's ExpPoly: r + r²·Estrin(r; k0..k5), then + 1.
    const auto k = [](float c) { return _mm512_set1_ps(c); };
    const __m512 r2 = _mm512_mul_ps(r, r), r4 = _mm512_mul_ps(r2, r2);
    const __m512 poly = _mm512_fmadd_ps(
        r4, _mm512_fmadd_ps(k(0.000198527617612853646278381f), r, k(0.00139304355252534151077271f)),
        _mm512_fmadd_ps(r2,
                        _mm512_fmadd_ps(k(0.00833336077630519866943359f), r,
                                        k(0.0416664853692054748535156f)),
                        _mm512_fmadd_ps(k(0.166666671633720397949219f), r, k(0.5f))));
    const __m512 y = _mm512_scalef_ps(_mm512_add_ps(_mm512_fmadd_ps(poly, r2, r), k(1.0f)), n);
    // Zero below −104 (and for NaN), as Highway's.
    V out;
    out.raw = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, k(-104.0f), _CMP_GE_OQ), y);
    return out;
  }
#endif
  return hn::Exp(d, x);
}

}  // namespace smallem::cpu::hwy_exp

#endif  // SMALLEM_ENGINE_CPU_HIGHWAY_EXP_H_
