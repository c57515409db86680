#include "engine/op.h"

#include <iterator>

namespace smallem {
namespace {

constexpr const char* kOpNames[] = {
#define SMALLEM_OP_NAME(op, name) name,
    SMALLEM_OPS(SMALLEM_OP_NAME)
#undef SMALLEM_OP_NAME
};
static_assert(std::size(kOpNames) == kOpCount, "every Op needs a name");

// The Op of every Backend method. Naming an Op that does not exist fails to
// compile; an Op that no method names fails EveryOpHasAMethod.
constexpr Op kMethodOps[] = {
#define SMALLEM_METHOD_OP(Method, Params, op) Op::op,
    SMALLEM_BACKEND_OPS(SMALLEM_METHOD_OP)
#undef SMALLEM_METHOD_OP
};

constexpr bool EveryOpHasAMethod() {
  for (int op = 0; op < kOpCount; ++op) {
    bool found = false;
    for (Op method_op : kMethodOps) found |= static_cast<int>(method_op) == op;
    if (!found) return false;
  }
  return true;
}
static_assert(EveryOpHasAMethod(), "every Op needs a Backend method in SMALLEM_BACKEND_OPS");

}  // namespace

const char* OpName(Op op) { return kOpNames[static_cast<int>(op)]; }

}  // namespace smallem
