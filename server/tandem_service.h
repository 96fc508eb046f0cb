// TandemService: the tandem.v1 gRPC service (placement, live activation statistics, statistics
// dumps, per-request MoE counters), and the statistics dump tandemd's shutdown writes.
#pragma once

#include <string>

#include <grpcpp/grpcpp.h>

#include "base/status.h"
#include "engine/placement/placement_startup.h"
#include "server/moe_activity.h"
#include "server/serving_context.h"
#include "tandem/v1/tandem.grpc.pb.h"

namespace tandem::server {

// Facts about the placement the StartupPlacement does not carry.
struct TandemServiceOptions {
  // The statistics input the placement was planned from (placement.stats_path), reported as
  // GetPlacementResponse.statistics_path when StartupPlacement::stats_loaded; else ignored.
  std::string statistics_path;
};

// Every method is registered raw (wire_message.h). Every RPC first checks the API key
// (check_api_key: UNAUTHENTICATED), then parses the request (INVALID_ARGUMENT naming what does not
// parse), then answers UNAVAILABLE while the context is loading or draining (tandem.proto:
// "UNAVAILABLE while the model is loading or the server drains"), then does its work:
// - GetPlacement: the startup placement; every field of GetPlacementResponse.
// - GetActivationStats: scope UNSPECIFIED means LIVE; `layers` empty = every MoE layer, else
//   sorted and deduplicated; a non-MoE (or out-of-range) layer is INVALID_ARGUMENT naming it; a
//   scope value the proto does not define is INVALID_ARGUMENT.
// - DumpActivationStats: scope UNSPECIFIED means MERGED; the path is confined by
//   resolve_stats_dump_path (stats_dump_path.h): a client path outside the directory of
//   `stats_output_path` is PERMISSION_DENIED, relative paths are relative to that directory (not
//   the working directory), no configured output is FAILED_PRECONDITION. The file is written
//   atomically (save_stats: temporary file, then rename); dumps (these and dump_activation_stats)
//   are serialized by one process-wide mutex, as save_stats' temporary file name is per process.
//   Blocking file I/O on the gRPC callback thread (a statistics file is a few KiB to a few MiB).
// - GetRequestMoeCounters: an empty request_id, or one longer than Generate accepts
//   (context.mapping_limits.max_request_id_bytes, 256 bytes), is INVALID_ARGUMENT; an id
//   MoeActivity does not hold (never started, or finished and evicted) is NOT_FOUND; RUNNING or
//   FINISHED otherwise (never QUEUED: see MoeActivity).
//
// Owned by tandemd's main. `context` (with its placement and activity) must outlive the service,
// and the service must outlive the grpc::Server it is registered with. Its methods are called by
// gRPC threads, concurrently.
using RawTandemService = tandem::v1::Tandem::WithRawCallbackMethod_GetPlacement<
    tandem::v1::Tandem::WithRawCallbackMethod_GetActivationStats<
        tandem::v1::Tandem::WithRawCallbackMethod_DumpActivationStats<
            tandem::v1::Tandem::WithRawCallbackMethod_GetRequestMoeCounters<
                tandem::v1::Tandem::Service>>>>;

class TandemService final : public RawTandemService {
 public:
  // The placement and the activity recorder are read from context.placement and
  // context.moe_activity once the context is serving (tandemd registers the service before the
  // model has loaded).
  TandemService(ServingContext& context, std::string stats_output_path,
                TandemServiceOptions options = {});

  grpc::ServerUnaryReactor* GetPlacement(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetActivationStats(grpc::CallbackServerContext* context,
                                               const grpc::ByteBuffer* request,
                                               grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* DumpActivationStats(grpc::CallbackServerContext* context,
                                                const grpc::ByteBuffer* request,
                                                grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetRequestMoeCounters(grpc::CallbackServerContext* context,
                                                  const grpc::ByteBuffer* request,
                                                  grpc::ByteBuffer* response) override;

 private:
  // The serving state (after the key check and the parse); OK when the call may proceed.
  grpc::Status admit() const;
  // The typed work of each method, admit() included.
  grpc::Status get_placement(tandem::v1::GetPlacementResponse* response) const;
  grpc::Status get_activation_stats(const tandem::v1::GetActivationStatsRequest& request,
                                    tandem::v1::GetActivationStatsResponse* response) const;
  grpc::Status dump_stats(const tandem::v1::DumpActivationStatsRequest& request,
                          tandem::v1::DumpActivationStatsResponse* response) const;
  grpc::Status get_request_moe_counters(const tandem::v1::GetRequestMoeCountersRequest& request,
                                        tandem::v1::GetRequestMoeCountersResponse* response) const;

  // Valid once admit() returned OK.
  const placement::StartupPlacement& startup() const { return *context_.placement; }
  MoeActivity& activity() const { return *context_.moe_activity; }

  ServingContext& context_;
  const std::string stats_output_path_;
  const TandemServiceOptions options_;
};

// Writes `activity`'s MERGED statistics to `path` atomically (save_stats: a temporary file in the
// same directory, then rename; no fsync). For tandemd's shutdown, with the configured
// placement.stats_output_path (trusted: not confined). INVALID_ARGUMENT for an empty path;
// save_stats' or merged()'s error otherwise. Blocking I/O; any thread.
Status dump_activation_stats(const MoeActivity& activity, const std::string& path);

}  // namespace tandem::server
