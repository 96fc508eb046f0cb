// Tests of tandemd's start-up exit codes: permanent model errors are told apart from failures a
// restart may cure.
#include "server/exit_codes.h"

#include <catch2/catch.hpp>

namespace tandem::server {
namespace {

TEST_CASE("model and configuration errors have their own exit codes", "[server]") {
  CHECK(kExitOk == 0);
  CHECK(kExitFailure == 1);
  CHECK(kExitBadConfig == 2);
  CHECK(kExitBadModel == 3);
}

TEST_CASE("startup_exit_code: what describes the input is permanent", "[server]") {
  for (const StartupStage stage : {StartupStage::kCheckpoint, StartupStage::kEngine}) {
    for (const StatusCode code :
         {StatusCode::kInvalidArgument, StatusCode::kNotFound, StatusCode::kAlreadyExists,
          StatusCode::kPermissionDenied, StatusCode::kFailedPrecondition, StatusCode::kOutOfRange,
          StatusCode::kUnimplemented, StatusCode::kDataLoss}) {
      INFO(status_code_name(code));
      CHECK(startup_exit_code(Status(code, "x"), stage) == kExitBadModel);
    }
    for (const StatusCode code :
         {StatusCode::kUnknown, StatusCode::kCancelled, StatusCode::kDeadlineExceeded,
          StatusCode::kAborted, StatusCode::kInternal, StatusCode::kUnavailable}) {
      INFO(status_code_name(code));
      CHECK(startup_exit_code(Status(code, "x"), stage) == kExitFailure);
    }
  }
  // A file over a reader's limit is permanent; memory running out while the engine starts is not.
  const Status big(StatusCode::kResourceExhausted, "header length exceeds the limit");
  CHECK(startup_exit_code(big, StartupStage::kCheckpoint) == kExitBadModel);
  CHECK(startup_exit_code(big, StartupStage::kEngine) == kExitFailure);
}

}  // namespace
}  // namespace tandem::server
