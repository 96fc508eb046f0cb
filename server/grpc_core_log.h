// gRPC core's own log lines (gpr_log: "cannot bind", keepalive and transport errors) sent
// through spdlog, so they carry the configured format (a JSON line in logging.format json) and
// level instead of gRPC's plain-text stderr lines.
#pragma once

namespace tandem::server {

// Installs the forwarding function; call after configure_logging and before the first gRPC
// object is created. Severities map to spdlog's debug, info and error; gRPC's own threshold
// (GRPC_VERBOSITY, default ERROR) still applies first. Idempotent.
void route_grpc_core_logs();

}  // namespace tandem::server
