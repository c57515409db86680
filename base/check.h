// CHECK macros for broken invariants: print file, line, the condition and an
// optional streamed message, then abort. Bad input is never a CHECK — it is
// an absl::Status with a message a person can act on.
//
// (Debian's abseil 20220623 predates absl/log, so the engine carries these.)
#ifndef SMALLEM_BASE_CHECK_H_
#define SMALLEM_BASE_CHECK_H_

#include <sstream>

namespace smallem::internal {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  [[noreturn]] ~CheckFailure();
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

// Lets `CHECK(x) << "msg"` compile to nothing when x holds.
struct Voidify {
  void operator&(std::ostream&) {}
};

}  // namespace smallem::internal

#define CHECK(condition)                                 \
  (condition) ? (void)0                                  \
              : ::smallem::internal::Voidify() &         \
                    ::smallem::internal::CheckFailure(   \
                        __FILE__, __LINE__, #condition)  \
                        .stream()

#define SMALLEM_CHECK_OP(a, op, b) CHECK((a)op(b)) << "(" << (a) << " vs " << (b) << ") "
#define CHECK_EQ(a, b) SMALLEM_CHECK_OP(a, ==, b)
#define CHECK_NE(a, b) SMALLEM_CHECK_OP(a, !=, b)
#define CHECK_LT(a, b) SMALLEM_CHECK_OP(a, <, b)
#define CHECK_LE(a, b) SMALLEM_CHECK_OP(a, <=, b)
#define CHECK_GT(a, b) SMALLEM_CHECK_OP(a, >, b)
#define CHECK_GE(a, b) SMALLEM_CHECK_OP(a, >=, b)

#endif  // SMALLEM_BASE_CHECK_H_
