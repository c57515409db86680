// RETURN_IF_ERROR and ASSIGN_OR_RETURN for absl::Status code (abseil 20220623
// has no public versions).
//
//   RETURN_IF_ERROR(txn.Commit());
//   ASSIGN_OR_RETURN(SqliteStatement s, db.Prepare("..."));
//
// The left side of ASSIGN_OR_RETURN must not contain a top-level comma.
#ifndef SMALLEM_BASE_STATUS_MACROS_H_
#define SMALLEM_BASE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define SMALLEM_STATUS_CONCAT_INNER(a, b) a##b
#define SMALLEM_STATUS_CONCAT(a, b) SMALLEM_STATUS_CONCAT_INNER(a, b)

#ifndef RETURN_IF_ERROR
#define RETURN_IF_ERROR(expr)                                   \
  do {                                                          \
    if (::absl::Status smallem_status_ = (expr); !smallem_status_.ok()) \
      return smallem_status_;                                   \
  } while (0)
#endif

#ifndef ASSIGN_OR_RETURN
#define ASSIGN_OR_RETURN(lhs, expr) \
  SMALLEM_ASSIGN_OR_RETURN_IMPL(SMALLEM_STATUS_CONCAT(smallem_statusor_, __LINE__), lhs, expr)
#define SMALLEM_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return std::move(tmp).status();      \
  lhs = std::move(*tmp)
#endif

#endif  // SMALLEM_BASE_STATUS_MACROS_H_
