// Tests of Status: OK is cheap and empty, errors keep code and message, names match gRPC's.
#include "base/status.h"

#include <catch2/catch.hpp>

namespace tandem {
namespace {

TEST_CASE("default Status is OK with an empty message", "[base]") {
  const Status s;
  CHECK(s.ok());
  CHECK(s.code() == StatusCode::kOk);
  CHECK(s.message().empty());
  CHECK(s.to_string() == "OK");
  CHECK(sizeof(Status) == sizeof(void*));
}

TEST_CASE("error factories set their code and keep the message", "[base]") {
  struct Case {
    Status status;
    StatusCode code;
    const char* name;
  };
  const Case cases[] = {
      {cancelled_error("m"), StatusCode::kCancelled, "CANCELLED"},
      {unknown_error("m"), StatusCode::kUnknown, "UNKNOWN"},
      {invalid_argument_error("m"), StatusCode::kInvalidArgument, "INVALID_ARGUMENT"},
      {deadline_exceeded_error("m"), StatusCode::kDeadlineExceeded, "DEADLINE_EXCEEDED"},
      {not_found_error("m"), StatusCode::kNotFound, "NOT_FOUND"},
      {already_exists_error("m"), StatusCode::kAlreadyExists, "ALREADY_EXISTS"},
      {permission_denied_error("m"), StatusCode::kPermissionDenied, "PERMISSION_DENIED"},
      {resource_exhausted_error("m"), StatusCode::kResourceExhausted, "RESOURCE_EXHAUSTED"},
      {failed_precondition_error("m"), StatusCode::kFailedPrecondition, "FAILED_PRECONDITION"},
      {aborted_error("m"), StatusCode::kAborted, "ABORTED"},
      {out_of_range_error("m"), StatusCode::kOutOfRange, "OUT_OF_RANGE"},
      {unimplemented_error("m"), StatusCode::kUnimplemented, "UNIMPLEMENTED"},
      {internal_error("m"), StatusCode::kInternal, "INTERNAL"},
      {unavailable_error("m"), StatusCode::kUnavailable, "UNAVAILABLE"},
      {data_loss_error("m"), StatusCode::kDataLoss, "DATA_LOSS"},
      {unauthenticated_error("m"), StatusCode::kUnauthenticated, "UNAUTHENTICATED"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    CHECK_FALSE(c.status.ok());
    CHECK(c.status.code() == c.code);
    CHECK(c.status.message() == "m");
    CHECK(status_code_name(c.code) == c.name);
    CHECK(c.status.to_string() == std::string(c.name) + ": m");
  }
}

TEST_CASE("a Status built with code OK is OK and drops the message", "[base]") {
  const Status s(StatusCode::kOk, "ignored");
  CHECK(s.ok());
  CHECK(s.message().empty());
}

TEST_CASE("unknown numeric codes have a name that says so", "[base]") {
  CHECK(status_code_name(static_cast<StatusCode>(99)) == "UNKNOWN_CODE");
  CHECK(status_code_name(static_cast<StatusCode>(-1)) == "UNKNOWN_CODE");
}

TEST_CASE("Status copies are deep and moves leave OK behind", "[base]") {
  Status a = not_found_error("file x");
  Status b = a;
  CHECK(b == a);
  Status c = std::move(a);
  CHECK(c.code() == StatusCode::kNotFound);
  CHECK(c.message() == "file x");
  b = Status();
  CHECK(b.ok());
  CHECK(c.message() == "file x");
}

TEST_CASE("with_prefix adds context and keeps the code", "[base]") {
  const Status s = data_loss_error("bad offset").with_prefix("model.gguf");
  CHECK(s.code() == StatusCode::kDataLoss);
  CHECK(s.message() == "model.gguf: bad offset");
  CHECK(Status().with_prefix("x").ok());
}

Status fails_then_never_reached(int* reached) {
  TANDEM_RETURN_IF_ERROR(invalid_argument_error("first"));
  *reached = 1;
  return Status();
}

TEST_CASE("TANDEM_RETURN_IF_ERROR returns the first error", "[base]") {
  int reached = 0;
  const Status s = fails_then_never_reached(&reached);
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK(s.message() == "first");
  CHECK(reached == 0);
}

}  // namespace
}  // namespace tandem
