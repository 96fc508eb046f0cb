// Status: the error value passed across every module boundary; codes map 1:1 to gRPC codes.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace tandem {

// The numeric values equal grpc::StatusCode so that server/ maps them with one cast-free switch.
enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

inline constexpr int kStatusCodeCount = 17;

// "INVALID_ARGUMENT" etc., the spelling gRPC uses; "UNKNOWN_CODE" for a value outside the enum.
std::string_view status_code_name(StatusCode code);

// An OK status costs one null pointer; an error holds its code and message on the heap.
// Copyable, movable, thread-compatible (not synchronized).
class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);

  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;
  ~Status() = default;

  static Status ok_status() { return Status(); }

  bool ok() const { return rep_ == nullptr; }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  // Empty for OK.
  const std::string& message() const;
  // "OK" or "INVALID_ARGUMENT: message".
  std::string to_string() const;

  // Returns a copy whose message is "prefix: message" (OK stays OK). For adding context such as a
  // file name on the way up.
  Status with_prefix(std::string_view prefix) const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code() == b.code() && a.message() == b.message();
  }

 private:
  struct Rep {
    StatusCode code;
    std::string message;
  };
  std::unique_ptr<Rep> rep_;
};

// Factory functions, one per non-OK code.
Status cancelled_error(std::string message);
Status unknown_error(std::string message);
Status invalid_argument_error(std::string message);
Status deadline_exceeded_error(std::string message);
Status not_found_error(std::string message);
Status already_exists_error(std::string message);
Status permission_denied_error(std::string message);
Status resource_exhausted_error(std::string message);
Status failed_precondition_error(std::string message);
Status aborted_error(std::string message);
Status out_of_range_error(std::string message);
Status unimplemented_error(std::string message);
Status internal_error(std::string message);
Status unavailable_error(std::string message);
Status data_loss_error(std::string message);
Status unauthenticated_error(std::string message);

}  // namespace tandem

// Returns the status from the enclosing function when it is not OK.
#define TANDEM_RETURN_IF_ERROR(expr)                         \
  do {                                                       \
    ::tandem::Status tandem_status_tmp_ = (expr);            \
    if (!tandem_status_tmp_.ok()) return tandem_status_tmp_; \
  } while (0)
