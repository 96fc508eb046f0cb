// gpr_log -> spdlog.
#include "server/grpc_core_log.h"

#include <grpc/support/log.h>
#include <spdlog/spdlog.h>

namespace tandem::server {
namespace {

void forward(gpr_log_func_args* args) {
  spdlog::level::level_enum level = spdlog::level::debug;
  if (args->severity == GPR_LOG_SEVERITY_INFO) level = spdlog::level::info;
  if (args->severity == GPR_LOG_SEVERITY_ERROR) level = spdlog::level::err;
  spdlog::log(level, "grpc: {} ({}:{})", args->message != nullptr ? args->message : "",
              args->file != nullptr ? args->file : "?", args->line);
}

}  // namespace

void route_grpc_core_logs() {
  // gRPC still filters by its own verbosity first (GRPC_VERBOSITY, ERROR when unset).
  gpr_set_log_function(&forward);
}

}  // namespace tandem::server
