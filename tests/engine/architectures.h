// Every architecture option of the model, for tests parameterized over them
// (tests/engine/model_test.cc, tests/gpu/model_parity_test.cc).
#ifndef SMALLEM_TESTS_ENGINE_ARCHITECTURES_H_
#define SMALLEM_TESTS_ENGINE_ARCHITECTURES_H_

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "runspec/model_config.h"

namespace smallem {

// "layer_gelu_learned_bias": the test-name suffix, and what gtest prints for
// a failing case's parameter (found by argument-dependent lookup, hence in
// smallem itself).
inline std::string ArchitectureName(const Architecture& a) {
  return std::string(NormName(a.norm)) + "_" + FeedForwardName(a.feed_forward) + "_" +
         PositionsName(a.positions) + (a.bias ? "_bias" : "_nobias");
}
inline void PrintTo(const Architecture& a, std::ostream* os) { *os << ArchitectureName(a); }

namespace testing {

// norm layer|rms × feed_forward gelu|swiglu × positions learned|rope × bias
// on|off: the 16 options.
inline std::vector<Architecture> AllArchitectures() {
  std::vector<Architecture> archs;
  for (NormKind n : {NormKind::kLayer, NormKind::kRms}) {
    for (FeedForwardKind f : {FeedForwardKind::kGelu, FeedForwardKind::kSwiGlu}) {
      for (PositionKind p : {PositionKind::kLearned, PositionKind::kRope}) {
        for (bool bias : {true, false}) {
          archs.push_back(Architecture{.norm = n, .feed_forward = f, .positions = p, .bias = bias});
        }
      }
    }
  }
  return archs;
}

inline std::string ArchName(const ::testing::TestParamInfo<Architecture>& info) {
  return ArchitectureName(info.param);
}

}  // namespace testing
}  // namespace smallem

#endif  // SMALLEM_TESTS_ENGINE_ARCHITECTURES_H_
