#include "engine/op.h"

namespace smallem {
namespace {

constexpr const char* kOpNames[] = {
    "matmul",   "add",       "mul",       "gelu",      "silu",
    "swiglu",   "bias_add",  "layer_norm", "rms_norm", "rope",
    "attention", "embedding", "cross_entropy", "sum", "sum_squares",
    "adamw",    "row_sum_squares", "row_scale", "gather_sequences",
};
static_assert(sizeof(kOpNames) / sizeof(kOpNames[0]) == kOpCount,
              "every Op needs a name");

}  // namespace

const char* OpName(Op op) { return kOpNames[static_cast<int>(op)]; }

}  // namespace smallem
