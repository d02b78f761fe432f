// Result<T>: a value or an error Status.
#pragma once

#include <cassert>
#include <optional>
#include <utility>

#include "kiln/status.h"

namespace kiln {

/// Holds either a T or an error Status (never an OK Status without a value).
template <class T>
class [[nodiscard]] Result {
 public:
  /// A value.
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  /// An error; `status` must not be OK.
  Result(Status status) : status_(std::move(status)) {  // NOLINT
    assert(!status_.is_ok());
    if (status_.is_ok()) status_ = Status(StatusCode::kInternal, "Result built from an OK status");
  }

  /// True when it holds a value: the same spelling as Status::is_ok().
  bool is_ok() const { return value_.has_value(); }
  /// The older spelling of is_ok(), kept while src/kernels, src/ir and the
  /// tests move over; new code writes is_ok().
  bool ok() const { return is_ok(); }
  const Status& status() const& { return status_; }
  Status status() && { return std::move(status_); }

  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }

  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace kiln

#define KILN_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return std::move(tmp).status();    \
  lhs = std::move(tmp).value()

/// `KILN_ASSIGN_OR_RETURN(auto x, f());` declares x from a Result or returns
/// its error. (It declares a variable, so it cannot be a do-while block.)
#define KILN_ASSIGN_OR_RETURN(lhs, expr) \
  KILN_ASSIGN_OR_RETURN_IMPL_(KILN_CONCAT_(kiln_result_, __LINE__), lhs, expr)
