// CUDA/CPU parity of the mixture-of-experts ops (skipped without a GPU):
// routing (identical choices, order and offsets), the bias update, dispatch,
// combine and the grouped product with their gradients, odd shapes; the
// grouped product also on groups around its kernel's 64-row tiles, empty
// groups and bf16 activations.
#include <cstdint>
#include <string>
#include <vector>

#include "tests/gpu/op_parity_test_util.h"

namespace smallem {
namespace {

using testing::ActivationParityTest;
using testing::kBf16StorageUlp;
using testing::kCpu;
using testing::kF32Tolerance;
using testing::kGpu;
using testing::Pair;
using testing::Side;
using testing::StorageMix;

class MoeParityTest : public ActivationParityTest {
 protected:
  Pair Ints(Shape shape) {
    return I32(shape, std::vector<int32_t>(static_cast<size_t>(shape.numel()), 0));
  }
  std::vector<int32_t> ReadInts(Side side, const Tensor& t) {
    std::vector<int32_t> host(static_cast<size_t>(t.numel()));
    backend(side).CopyToHost(host.data(), t.data, t.bytes());
    return host;
  }
  void ExpectSameInts(const Pair& p, const char* what) {
    EXPECT_EQ(ReadInts(kCpu, p[kCpu]), ReadInts(kGpu, p[kGpu])) << what;
  }
  // An f32 result to kF32Tolerance; a bf16 one a bf16 ulp looser (both sides
  // round the f32 result once, and may straddle a rounding boundary).
  void ExpectCloseStored(const Pair& p, const std::string& what) {
    const bool bf16 = p[kCpu].dtype == DType::kBF16;
    ExpectClose(Widened(p), kF32Tolerance + (bf16 ? kBf16StorageUlp : 0.0),
                what + (bf16 ? " (bf16)" : " (f32)"));
  }
};

TEST_F(MoeParityTest, RouteChoosesSortsAndBalancesAlike) {
  const int64_t n = 37, e = 7, k = 3;
  Pair logits = Random({n, e}, 3.0f), bias = Random({e}, 0.5f);
  Pair experts = Ints({n, k}), order = Ints({n * k}), position = Ints({n * k});
  Pair offsets = Ints({e + 1}), gates = Zeros({n, k}), load = Random({e});
  Pair grad_gates = Random({n, k}), grad_logits = Random({n, e}), last = Zeros({e});
  Both([&](Backend& be, Side s) {
    be.MoeRouteForward({.logits = logits[s], .bias = bias[s], .experts = experts[s],
                        .gates = gates[s], .order = order[s], .position = position[s],
                        .offsets = offsets[s], .load = load[s], .top_k = k});
    be.MoeRouteBackward({.logits = logits[s], .experts = experts[s], .gates = gates[s],
                         .offsets = offsets[s], .grad_gates = grad_gates[s],
                         .grad_logits = grad_logits[s], .aux_coefficient = 0.1f});
    be.MoeBalance({.bias = bias[s], .load = load[s], .last_load = last[s], .rate = 0.01f});
  });
  ExpectSameInts(experts, "experts");
  ExpectSameInts(order, "order");
  ExpectSameInts(position, "position");
  ExpectSameInts(offsets, "offsets");
  ExpectClose(gates, kF32Tolerance, "gates");
  ExpectClose(grad_logits, kF32Tolerance, "grad_logits");
  ExpectClose(bias, kF32Tolerance, "balanced bias");
  ExpectClose(last, kF32Tolerance, "last_load");
}

TEST_F(MoeParityTest, DispatchGroupedProductAndCombineWithGradients) {
  const int64_t n = 11, c = 7, e = 5, k = 2, m = 9;
  Pair logits = Random({n, e}, 3.0f);
  Pair experts = Ints({n, k}), order = Ints({n * k}), position = Ints({n * k});
  Pair offsets = Ints({e + 1}), gates = Zeros({n, k});
  Pair x = Random({n, c}), rows = Zeros({n * k, c}), w = Random({e, m, c});
  Pair h = Zeros({n * k, m}), w2 = Random({e, c, m}), y = Zeros({n * k, c}), out = Zeros({n, c});
  Pair g_out = Random({n, c}), g_y = Random({n * k, c}), g_gates = Random({n, k});
  Pair g_h = Random({n * k, m}), g_w2 = Random({e, c, m}), g_rows = Random({n * k, c});
  Pair g_w = Random({e, m, c}), g_x = Random({n, c});
  Both([&](Backend& be, Side s) {
    be.MoeRouteForward({.logits = logits[s], .experts = experts[s], .gates = gates[s],
                        .order = order[s], .position = position[s], .offsets = offsets[s],
                        .top_k = k});
    be.MoeDispatchForward({.x = x[s], .order = order[s], .out = rows[s], .top_k = k});
    be.GroupedMatmulForward({.x = rows[s], .weight = w[s], .offsets = offsets[s], .out = h[s]});
    be.GroupedMatmulForward({.x = h[s], .weight = w2[s], .offsets = offsets[s], .out = y[s]});
    be.MoeCombineForward({.rows = y[s], .gates = gates[s], .position = position[s],
                          .out = out[s]});
    be.MoeCombineBackward({.rows = y[s], .gates = gates[s], .position = position[s],
                           .grad_out = g_out[s], .grad_rows = g_y[s],
                           .grad_gates = g_gates[s]});
    be.GroupedMatmulBackward({.x = h[s], .weight = w2[s], .offsets = offsets[s],
                              .grad_out = g_y[s], .grad_x = g_h[s], .grad_weight = g_w2[s]});
    be.GroupedMatmulBackward({.x = rows[s], .weight = w[s], .offsets = offsets[s],
                              .grad_out = g_h[s], .grad_x = g_rows[s], .grad_weight = g_w[s]});
    be.MoeDispatchBackward({.grad_out = g_rows[s], .position = position[s], .grad_x = g_x[s],
                            .top_k = k});
  });
  ExpectClose(rows, kF32Tolerance, "dispatch");
  ExpectClose(h, kF32Tolerance, "grouped product");
  ExpectClose(out, kF32Tolerance, "combine");
  ExpectClose(g_gates, kF32Tolerance, "combine grad_gates");
  ExpectClose(g_w2, kF32Tolerance, "grouped grad_weight");
  ExpectClose(g_w, kF32Tolerance, "grouped grad_weight (first)");
  ExpectClose(g_x, kF32Tolerance, "dispatch grad_x");
}

// The grouped product on its own, offsets given: groups of 0, 1, 63, 64, 65
// and 130 rows around the kernel's 64-row tiles, empty groups first, inside
// and last, m and k off the tile too (1, 17, 33, 65, 130), every mix of f32
// and bf16 activations; grad_x both added to and overwritten, grad_weight
// added to (an empty group's left as it was).
TEST_F(MoeParityTest, GroupedProductOnTileEdgesAndEmptyGroups) {
  struct Case {
    std::vector<int32_t> sizes;
    int64_t m, k;
  };
  const Case cases[] = {{{0, 1, 63, 64, 65, 0, 130, 0}, 65, 130}, {{17, 0, 1}, 1, 17},
                        {{5, 0}, 33, 1}};
  const StorageMix mixes[] = {{DType::kF32, DType::kF32},
                              {DType::kBF16, DType::kBF16},
                              {DType::kBF16, DType::kF32},
                              {DType::kF32, DType::kBF16}};
  for (const Case& c : cases) {
    const int64_t groups = static_cast<int64_t>(c.sizes.size());
    std::vector<int32_t> bounds{0};
    for (int32_t size : c.sizes) bounds.push_back(bounds.back() + size);
    const int64_t rows = bounds.back();
    for (const StorageMix& mix : mixes) {
      const std::string what = "m " + std::to_string(c.m) + ", k " + std::to_string(c.k) +
                               ", " + std::to_string(groups) + " groups, " + mix.Name();
      Pair offsets = I32({groups + 1}, bounds), w = Random({groups, c.m, c.k});
      Pair x = RandomStored({rows, c.k}, mix.in), g_out = RandomStored({rows, c.m}, mix.in);
      Pair out = RandomStored({rows, c.m}, mix.out), g_x = RandomStored({rows, c.k}, mix.out);
      Pair g_x_new = RandomStored({rows, c.k}, mix.out), g_w = Random({groups, c.m, c.k});
      Both([&](Backend& be, Side s) {
        be.GroupedMatmulForward({.x = x[s], .weight = w[s], .offsets = offsets[s], .out = out[s]});
        be.GroupedMatmulBackward({.x = x[s], .weight = w[s], .offsets = offsets[s],
                                  .grad_out = g_out[s], .grad_x = g_x[s], .grad_weight = g_w[s]});
        be.GroupedMatmulBackward({.x = x[s], .weight = w[s], .offsets = offsets[s],
                                  .grad_out = g_out[s], .grad_x = g_x_new[s],
                                  .overwrite_x = true});
      });
      ExpectCloseStored(out, "grouped product, " + what);
      ExpectCloseStored(g_x, "grouped grad_x added, " + what);
      ExpectCloseStored(g_x_new, "grouped grad_x overwritten, " + what);
      ExpectClose(g_w, kF32Tolerance, "grouped grad_weight, " + what);
    }
  }
}

}  // namespace
}  // namespace smallem
