// The CPU ops' elementwise math on contiguous float arrays, one thread each:
// the activations (GELU, SiLU, SwiGLU, forward and backward) and the
// softmax pieces (row max, exp and its sum, scaled exp) that attention and
// the loss share. The callers split arrays across the OpenMP team
// (cpu::ForChunks in partition.h) and rows across threads themselves.
//
// Built on Highway's contrib math (libhwy-dev: Exp to 1 ulp, static dispatch
// to the -march the engine is compiled for) where Highway is present; a
// plain loop over cpu::Exp (exp.h) elsewhere — the GPU machine, which
// has no Debian packages. Each element's result does not depend on where a
// chunk starts (the tails run the same lane code, one lane wide), so the
// thread count never changes a bit. docs/design-notes.md § CPU vector math.
#ifndef SMALLEM_ENGINE_CPU_VECTOR_MATH_H_
#define SMALLEM_ENGINE_CPU_VECTOR_MATH_H_

#include <cstdint>

namespace smallem::cpu {

// GELU, tanh approximation, as x·σ(2u), u = √(2/π)(x + 0.044715x³).
void GeluForward(const float* in, float* out, int64_t n);
// grad_in += grad_out · GELU'(in).
void GeluBackward(const float* in, const float* grad_out, float* grad_in,
                  int64_t n);

// GELU of in + bias (bias null: of in), element for element GeluForward of
// the sum, which is never written.
void BiasGeluForward(const float* in, const float* bias, float* out, int64_t n);
// v = grad_out · GELU'(in + bias) (bias null: in), GeluBackward's value into
// zeros: grad_in = v when overwrite, else grad_in += v; grad_bias += v.
// Either may be null. The fused bias + GELU op's backward in one pass.
void BiasGeluBackward(const float* in, const float* bias, const float* grad_out, float* grad_in,
                      bool overwrite, float* grad_bias, int64_t n);

// SiLU: x·σ(x). Backward accumulates grad_out·σ(x)(1 + x(1 − σ(x))).
void SiluForward(const float* in, float* out, int64_t n);
void SiluBackward(const float* in, const float* grad_out, float* grad_in,
                  int64_t n);

// SwiGLU: out = silu(gate)·up. Backward accumulates into whichever of
// grad_gate and grad_up is non-null, or with overwrite writes the values it
// would add to zeros (the gradients' prior contents are never read).
void SwiGluForward(const float* gate, const float* up, float* out, int64_t n);
void SwiGluBackward(const float* gate, const float* up, const float* grad_out,
                    float* grad_gate, float* grad_up, bool overwrite, int64_t n);

// max of x[0, n), n ≥ 1.
float Max(const float* x, int64_t n);

// out[i] = e^(in[i] − shift) (in place allowed; out may be null) and
// returns Σ e^(in[i] − shift), summed in a fixed order.
float ExpShiftedSum(const float* in, float shift, float* out, int64_t n);

// out[i] = e^(in[i] − shift)·scale, or out[i] += that when accumulate. In
// place (out == in) is fine.
void ScaledExpShifted(const float* in, float shift, float scale, float* out,
                      bool accumulate, int64_t n);

// out[i] = e^(in[i] − shift[i]) (in place allowed): the transposed softmax
// of attention's backward, one lse per column.
void ExpMinus(const float* in, const float* shift, float* out, int64_t n);

// Which implementation this build uses: "highway <target>" or "scalar".
const char* VectorMathName();

}  // namespace smallem::cpu

#endif  // SMALLEM_ENGINE_CPU_VECTOR_MATH_H_
