// Result<T>: a value or a non-OK Status (std::expected is not available on the g++ 12 floor).
#pragma once

#include <optional>
#include <utility>

#include "base/check.h"
#include "base/status.h"

namespace tandem {

template <typename T>
class [[nodiscard]] Result {
 public:
  // Implicit from a value and from an error so that `return value;` and `return error;` both work.
  Result(T value) : value_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  Result(Status status) : status_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    TANDEM_CHECK_MSG(!status_.ok(), "Result constructed from an OK status without a value");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  // Accessing the value of an error is a bug and aborts.
  T& value() & {
    TANDEM_CHECK_MSG(ok(), status_.message().c_str());
    return *value_;
  }
  const T& value() const& {
    TANDEM_CHECK_MSG(ok(), status_.message().c_str());
    return *value_;
  }
  T&& value() && {
    TANDEM_CHECK_MSG(ok(), status_.message().c_str());
    return std::move(*value_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace tandem

#define TANDEM_CONCAT_INNER_(a, b) a##b
#define TANDEM_CONCAT_(a, b) TANDEM_CONCAT_INNER_(a, b)

// TANDEM_ASSIGN_OR_RETURN(auto x, make_x()); returns the error from the enclosing function.
#define TANDEM_ASSIGN_OR_RETURN(lhs, expr) \
  TANDEM_ASSIGN_OR_RETURN_IMPL_(TANDEM_CONCAT_(tandem_result_, __LINE__), lhs, expr)
#define TANDEM_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()
