// CPU/CUDA parity of share_kv (a borrowing layer's packed qkv, own_keys),
// forward and backward, with f32 or bf16 activations. The op copies and
// adds: f32 results agree exactly, bf16 ones within one bf16 ulp.
#include <cstdint>
#include <string>

#include "engine/backend.h"
#include "gtest/gtest.h"
#include "tests/gpu/op_parity_test_util.h"

namespace smallem {
namespace {

using testing::Bf16ActivationOpsTest;
using testing::kCpu;
using testing::kElementwiseMixes;
using testing::kGpu;
using testing::OpParityTest;
using testing::Pair;
using testing::StorageMix;

constexpr int64_t kRows = 37, kChannels = 96;

TEST_F(OpParityTest, ShareKvForwardAndBackward) {
  Pair q = Random({kRows, kChannels}), source = Random({kRows, 3 * kChannels});
  Pair out = Random({kRows, 3 * kChannels}), g = Random({kRows, 3 * kChannels});
  Pair gq = Random({kRows, kChannels}), gsource = Random({kRows, 3 * kChannels});
  Both([&](Backend& be, testing::Side s) {
    be.ShareKvForward({.q = q[s], .source = source[s], .out = out[s]});
    be.ShareKvBackward({.grad_out = g[s], .grad_q = gq[s], .grad_source = gsource[s]});
  });
  ExpectClose(out, 0.0, "share_kv");
  ExpectClose(gq, 0.0, "share_kv backward: grad_q");
  ExpectClose(gsource, 0.0, "share_kv backward: grad_source");
}

TEST_F(Bf16ActivationOpsTest, ShareKvMatchesTheCpu) {
  for (const StorageMix& mix : kElementwiseMixes) {
    Pair q = RandomStored({kRows, kChannels}, mix.in);
    Pair source = RandomStored({kRows, 3 * kChannels}, mix.in);
    Pair out = RandomStored({kRows, 3 * kChannels}, mix.out);
    Pair g = RandomStored({kRows, 3 * kChannels}, mix.in);
    Pair gq = RandomStored({kRows, kChannels}, mix.out);
    Pair gsource = RandomStored({kRows, 3 * kChannels}, mix.out);
    Both([&](Backend& be, testing::Side s) {
      be.ShareKvForward({.q = q[s], .source = source[s], .out = out[s]});
      be.ShareKvBackward({.grad_out = g[s], .grad_q = gq[s], .grad_source = gsource[s]});
    });
    const std::string what = mix.Name();
    ExpectCloseAct(out, "share_kv, " + what);
    ExpectCloseAct(gq, "share_kv backward: grad_q, " + what);
    ExpectCloseAct(gsource, "share_kv backward: grad_source, " + what);
  }
}

}  // namespace
}  // namespace smallem
