// Start-up failure -> exit code.
#include "server/exit_codes.h"

namespace tandem::server {

int startup_exit_code(const Status& status, StartupStage stage) {
  switch (status.code()) {
    case StatusCode::kOk:
      return kExitOk;
    case StatusCode::kUnknown:
    case StatusCode::kCancelled:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kAborted:
    case StatusCode::kInternal:
    case StatusCode::kUnavailable:
      return kExitFailure;
    case StatusCode::kResourceExhausted:
      return stage == StartupStage::kEngine ? kExitFailure : kExitBadModel;
    default:
      return kExitBadModel;
  }
}

}  // namespace tandem::server
