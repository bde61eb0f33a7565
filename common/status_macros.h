#ifndef PSTRAIN_COMMON_STATUS_MACROS_H_
#define PSTRAIN_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Propagates a non-OK absl::Status out of the enclosing function.
#define PSTRAIN_RETURN_IF_ERROR(expr)                  \
  do {                                                 \
    ::absl::Status pstrain_status_ = (expr);           \
    if (!pstrain_status_.ok()) return pstrain_status_; \
  } while (0)

#define PSTRAIN_STATUS_CONCAT_INNER_(a, b) a##b
#define PSTRAIN_STATUS_CONCAT_(a, b) PSTRAIN_STATUS_CONCAT_INNER_(a, b)

// PSTRAIN_ASSIGN_OR_RETURN(auto x, FunctionReturningStatusOr());
#define PSTRAIN_ASSIGN_OR_RETURN(lhs, expr) \
  PSTRAIN_ASSIGN_OR_RETURN_IMPL_(PSTRAIN_STATUS_CONCAT_(pstrain_statusor_, __LINE__), lhs, expr)

#define PSTRAIN_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                   \
  if (!statusor.ok()) return std::move(statusor).status();  \
  lhs = std::move(statusor).value()

#endif  // PSTRAIN_COMMON_STATUS_MACROS_H_
