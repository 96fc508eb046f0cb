// Status: code names, construction and formatting.
#include "base/status.h"

#include <array>

namespace tandem {

namespace {
constexpr std::array<std::string_view, kStatusCodeCount> kCodeNames = {
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
};
const std::string kEmpty;
}  // namespace

std::string_view status_code_name(StatusCode code) {
  const int i = static_cast<int>(code);
  if (i < 0 || i >= kStatusCodeCount) return "UNKNOWN_CODE";
  return kCodeNames[static_cast<size_t>(i)];
}

Status::Status(StatusCode code, std::string message) {
  // An "error" with code OK is OK: keep the one representation of success.
  if (code != StatusCode::kOk) rep_ = std::make_unique<Rep>(Rep{code, std::move(message)});
}

Status::Status(const Status& other)
    : rep_(other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr) {}

Status& Status::operator=(const Status& other) {
  if (this != &other) rep_ = other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr;
  return *this;
}

const std::string& Status::message() const {
  return rep_ ? rep_->message : kEmpty;
}

std::string Status::to_string() const {
  if (ok()) return "OK";
  std::string out(status_code_name(rep_->code));
  out += ": ";
  out += rep_->message;
  return out;
}

Status Status::with_prefix(std::string_view prefix) const {
  if (ok()) return Status();
  std::string msg(prefix);
  msg += ": ";
  msg += rep_->message;
  return Status(rep_->code, std::move(msg));
}

#define TANDEM_DEFINE_ERROR_FACTORY(fn, code)            \
  Status fn(std::string message) {                       \
    return Status(StatusCode::code, std::move(message)); \
  }

TANDEM_DEFINE_ERROR_FACTORY(cancelled_error, kCancelled)
TANDEM_DEFINE_ERROR_FACTORY(unknown_error, kUnknown)
TANDEM_DEFINE_ERROR_FACTORY(invalid_argument_error, kInvalidArgument)
TANDEM_DEFINE_ERROR_FACTORY(deadline_exceeded_error, kDeadlineExceeded)
TANDEM_DEFINE_ERROR_FACTORY(not_found_error, kNotFound)
TANDEM_DEFINE_ERROR_FACTORY(already_exists_error, kAlreadyExists)
TANDEM_DEFINE_ERROR_FACTORY(permission_denied_error, kPermissionDenied)
TANDEM_DEFINE_ERROR_FACTORY(resource_exhausted_error, kResourceExhausted)
TANDEM_DEFINE_ERROR_FACTORY(failed_precondition_error, kFailedPrecondition)
TANDEM_DEFINE_ERROR_FACTORY(aborted_error, kAborted)
TANDEM_DEFINE_ERROR_FACTORY(out_of_range_error, kOutOfRange)
TANDEM_DEFINE_ERROR_FACTORY(unimplemented_error, kUnimplemented)
TANDEM_DEFINE_ERROR_FACTORY(internal_error, kInternal)
TANDEM_DEFINE_ERROR_FACTORY(unavailable_error, kUnavailable)
TANDEM_DEFINE_ERROR_FACTORY(data_loss_error, kDataLoss)
TANDEM_DEFINE_ERROR_FACTORY(unauthenticated_error, kUnauthenticated)

#undef TANDEM_DEFINE_ERROR_FACTORY

}  // namespace tandem
