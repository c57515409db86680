// CPU/CUDA parity of latent attention's qkv packing (kernels/latent_qkv.cu),
// forward and backward, on odd shapes, with f32 or bf16 activations.
// Skips without a GPU.
#include <cstdint>
#include <string>
#include <tuple>

#include "engine/backend.h"
#include "gtest/gtest.h"
#include "tests/gpu/op_parity_test_util.h"

namespace smallem {
namespace {

using testing::Bf16ActivationOpsTest;
using testing::kCpu;
using testing::kElementwiseMixes;
using testing::kF32Tolerance;
using testing::Pair;
using testing::Side;
using testing::StorageMix;

// Runs forward and backward of one case on both sides: rows × heads of
// head_dim channels, rope_dim of them rotary; inputs and grad_out stored as
// mix.in, out and the (randomly started) gradients as mix.out.
class LatentQkvParityTest : public Bf16ActivationOpsTest {
 protected:
  void Check(int64_t rows, int64_t heads, int64_t head_dim, int64_t rope_dim,
             const StorageMix& mix, bool f32) {
    const int64_t c = heads * head_dim, kv_width = heads * (2 * head_dim - rope_dim);
    Pair q = RandomStored({rows, c}, mix.in), kv = RandomStored({rows, kv_width}, mix.in);
    Pair k_rope = RandomStored({rows, rope_dim}, mix.in);
    Pair out = RandomStored({rows, 3 * c}, mix.out), g = RandomStored({rows, 3 * c}, mix.in);
    Pair gq = RandomStored({rows, c}, mix.out), gkv = RandomStored({rows, kv_width}, mix.out);
    Pair gk = RandomStored({rows, rope_dim}, mix.out);
    Both([&](Backend& be, Side s) {
      be.LatentQkvForward({.q = q[s], .kv = kv[s], .k_rope = k_rope[s], .out = out[s],
                           .heads = heads, .head_dim = head_dim, .rope_dim = rope_dim});
      be.LatentQkvBackward({.grad_out = g[s], .grad_q = gq[s], .grad_kv = gkv[s],
                            .grad_k_rope = gk[s], .heads = heads, .head_dim = head_dim,
                            .rope_dim = rope_dim});
    });
    const std::string what = " (" + std::to_string(rows) + " rows, H " +
                             std::to_string(heads) + ", D " + std::to_string(head_dim) +
                             ", R " + std::to_string(rope_dim) + ", " + mix.Name() + ")";
    if (f32) {
      ExpectClose(out, 0.0, "latent_qkv" + what);  // a copy: exact
      ExpectClose(gq, kF32Tolerance, "latent_qkv grad_q" + what);
      ExpectClose(gkv, kF32Tolerance, "latent_qkv grad_kv" + what);
      ExpectClose(gk, kF32Tolerance, "latent_qkv grad_k_rope" + what);
    } else {
      ExpectCloseAct(out, "latent_qkv" + what);
      ExpectCloseAct(gq, "latent_qkv grad_q" + what);
      ExpectCloseAct(gkv, "latent_qkv grad_kv" + what);
      ExpectCloseAct(gk, "latent_qkv grad_k_rope" + what);
    }
  }
};

TEST_F(LatentQkvParityTest, ForwardAndBackwardMatchTheCpuInF32) {
  for (auto [rows, heads, d, r] :
       {std::tuple<int64_t, int64_t, int64_t, int64_t>{7, 3, 6, 2}, {11, 5, 10, 4},
        {129, 8, 64, 32}}) {
    Check(rows, heads, d, r, StorageMix{DType::kF32, DType::kF32}, /*f32=*/true);
  }
}

TEST_F(LatentQkvParityTest, Bf16ActivationsMatchTheCpu) {
  for (const StorageMix& mix : kElementwiseMixes) Check(13, 3, 10, 4, mix, /*f32=*/false);
}

}  // namespace
}  // namespace smallem
