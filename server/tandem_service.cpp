// The tandem.v1 service: placement, activation statistics, statistics dumps, MoE counters.
#include "server/tandem_service.h"

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <system_error>
#include <utility>
#include <vector>

#include "engine/placement/stats_file.h"
#include "server/api_key_auth.h"
#include "server/stats_dump_path.h"
#include "server/status_mapping.h"
#include "server/wire_message.h"

namespace tandem::server {

namespace {

namespace v1 = tandem::v1;

// One statistics file written at a time in this process (save_stats' temporary file name is
// path + ".tmp." + pid, so two concurrent writers of one path would collide).
std::mutex& dump_mutex() {
  static std::mutex mu;
  return mu;
}

v1::PlacementPolicy to_proto(config::PlacementPolicy policy) {
  switch (policy) {
    case config::PlacementPolicy::kFrequency:
      return v1::PLACEMENT_POLICY_FREQUENCY;
    case config::PlacementPolicy::kUniform:
      return v1::PLACEMENT_POLICY_UNIFORM;
    case config::PlacementPolicy::kBudget:
      return v1::PLACEMENT_POLICY_BUDGET;
  }
  return v1::PLACEMENT_POLICY_UNSPECIFIED;
}

uint32_t to_u32(uint64_t v) {
  return v > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(v);
}

void fill_counters(const MoeCounters& c, v1::MoeCounters* out) {
  out->set_token_layers_gpu_only(c.token_layers_gpu_only);
  out->set_token_layers_cpu_only(c.token_layers_cpu_only);
  out->set_token_layers_split(c.token_layers_split);
  out->set_expert_pairs_gpu(c.expert_pairs_gpu);
  out->set_expert_pairs_cpu(c.expert_pairs_cpu);
}

// The scope a request asked for, UNSPECIFIED replaced by `unspecified`; INVALID_ARGUMENT for a
// value tandem.proto does not define (proto3 enums are open).
Result<v1::StatsScope> resolve_scope(int scope, v1::StatsScope unspecified) {
  if (scope == v1::STATS_SCOPE_UNSPECIFIED) return unspecified;
  if (scope == v1::STATS_SCOPE_LIVE || scope == v1::STATS_SCOPE_MERGED) {
    return static_cast<v1::StatsScope>(scope);
  }
  return invalid_argument_error("scope: " + std::to_string(scope) +
                                " is not a StatsScope (1 = LIVE, 2 = MERGED)");
}

Result<placement::ActivationStats> stats_for(const MoeActivity& activity, v1::StatsScope scope) {
  if (scope == v1::STATS_SCOPE_MERGED) return activity.merged();
  return activity.live();
}

std::string join_layers(const std::vector<uint32_t>& layers) {
  std::string out;
  for (uint32_t l : layers) out += (out.empty() ? "" : ", ") + std::to_string(l);
  return out;
}

// Saves `stats` to `path` under the dump mutex; the written file's size.
Result<uint64_t> save_serialized(const placement::ActivationStats& stats, const std::string& path) {
  std::lock_guard<std::mutex> lock(dump_mutex());
  TANDEM_RETURN_IF_ERROR(placement::save_stats(stats, path));
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) return internal_error(path + ": written, but its size cannot be read: " + ec.message());
  return static_cast<uint64_t>(size);
}

}  // namespace

TandemService::TandemService(ServingContext& context, std::string stats_output_path,
                             TandemServiceOptions options)
    : context_(context),
      stats_output_path_(std::move(stats_output_path)),
      options_(std::move(options)) {}

grpc::ServerUnaryReactor* TandemService::GetPlacement(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* request,
                                                      grpc::ByteBuffer* response) {
  return serve_unary<v1::GetPlacementRequest, v1::GetPlacementResponse>(
      context, check_api_key(context_.auth, *context), *request, response,
      [this](const v1::GetPlacementRequest&, v1::GetPlacementResponse* out) {
        return get_placement(out);
      });
}

grpc::ServerUnaryReactor* TandemService::GetActivationStats(grpc::CallbackServerContext* context,
                                                            const grpc::ByteBuffer* request,
                                                            grpc::ByteBuffer* response) {
  return serve_unary<v1::GetActivationStatsRequest, v1::GetActivationStatsResponse>(
      context, check_api_key(context_.auth, *context), *request, response,
      [this](const v1::GetActivationStatsRequest& in, v1::GetActivationStatsResponse* out) {
        return get_activation_stats(in, out);
      });
}

grpc::ServerUnaryReactor* TandemService::DumpActivationStats(grpc::CallbackServerContext* context,
                                                             const grpc::ByteBuffer* request,
                                                             grpc::ByteBuffer* response) {
  return serve_unary<v1::DumpActivationStatsRequest, v1::DumpActivationStatsResponse>(
      context, check_api_key(context_.auth, *context), *request, response,
      [this](const v1::DumpActivationStatsRequest& in, v1::DumpActivationStatsResponse* out) {
        return dump_stats(in, out);
      });
}

grpc::ServerUnaryReactor* TandemService::GetRequestMoeCounters(grpc::CallbackServerContext* context,
                                                               const grpc::ByteBuffer* request,
                                                               grpc::ByteBuffer* response) {
  return serve_unary<v1::GetRequestMoeCountersRequest, v1::GetRequestMoeCountersResponse>(
      context, check_api_key(context_.auth, *context), *request, response,
      [this](const v1::GetRequestMoeCountersRequest& in, v1::GetRequestMoeCountersResponse* out) {
        return get_request_moe_counters(in, out);
      });
}

grpc::Status TandemService::admit() const {
  switch (context_.current_state()) {
    case ServingState::kLoading:
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the model is loading");
    case ServingState::kDraining:
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down");
    case ServingState::kServing:
      break;
  }
  if (context_.placement == nullptr || context_.moe_activity == nullptr) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        "the placement and activity statistics are not available");
  }
  return grpc::Status::OK;
}

grpc::Status TandemService::get_placement(v1::GetPlacementResponse* response) const {
  grpc::Status admitted = admit();
  if (!admitted.ok()) return admitted;
  const placement::PlacementReport& report = startup().report;
  const placement::ModelIdentity& model = activity().model();
  response->set_policy(to_proto(report.used));
  response->set_fell_back_to_uniform(report.fell_back_to_uniform);
  response->set_num_gpu_experts(to_u32(report.n_gpu_experts));
  response->set_num_moe_layers(to_u32(report.layers.size()));
  response->set_num_experts_per_layer(to_u32(report.n_experts));
  response->set_experts_per_token(to_u32(model.n_experts_used));
  response->set_gpu_expert_bytes(report.gpu_expert_bytes);
  // The report's cpu_expert_bytes counts the experts not on the GPU; every expert stays in CPU
  // memory, so the proto's field holds both.
  response->set_cpu_expert_bytes(report.cpu_expert_bytes + report.gpu_expert_bytes);
  response->set_gpu_budget_bytes(
      report.used == config::PlacementPolicy::kBudget ? report.expert_budget_bytes : 0);
  response->set_coverage(report.coverage.value_or(0.0));
  for (const placement::LayerPlacement& layer : report.layers) {
    v1::LayerPlacement* out = response->add_layers();
    out->set_layer(layer.layer);
    for (uint32_t e : layer.gpu_experts) out->add_gpu_expert_ids(e);
    out->set_gpu_bytes(layer.gpu_bytes);
    out->set_coverage(report.coverage.has_value() && layer.activations > 0
                          ? layer.covered / layer.activations
                          : 0.0);
  }
  if (startup().stats_loaded) response->set_statistics_path(options_.statistics_path);
  response->set_statistics_tokens(startup().stats.has_value() ? startup().stats->tokens() : 0);
  response->set_gpu_device(context_.gpu_device);
  return grpc::Status::OK;
}

grpc::Status TandemService::get_activation_stats(const v1::GetActivationStatsRequest& request,
                                                 v1::GetActivationStatsResponse* response) const {
  grpc::Status admitted = admit();
  if (!admitted.ok()) return admitted;
  const Result<v1::StatsScope> scope = resolve_scope(request.scope(), v1::STATS_SCOPE_LIVE);
  if (!scope.ok()) return to_grpc_status(scope.status());

  const placement::ModelIdentity& model = activity().model();
  std::vector<uint32_t> layers(request.layers().begin(), request.layers().end());
  std::sort(layers.begin(), layers.end());
  layers.erase(std::unique(layers.begin(), layers.end()), layers.end());
  for (uint32_t layer : layers) {
    if (layer >= model.n_layers || !model.moe_layers[layer]) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "layers: " + std::to_string(layer) + " is not a MoE layer (MoE layers: " +
                              join_layers(model.moe_layer_ids()) + ")");
    }
  }
  const Result<placement::ActivationStats> stats = stats_for(activity(), *scope);
  if (!stats.ok()) return to_grpc_status(stats.status());
  if (layers.empty()) layers = stats->moe_layer_ids();

  response->set_scope(*scope);
  response->set_num_experts_per_layer(to_u32(stats->n_experts()));
  response->set_tokens(stats->tokens());
  response->set_model_fingerprint(stats->model().fingerprint);
  for (uint32_t layer : layers) {
    const auto row = static_cast<size_t>(stats->row_of(layer));
    v1::LayerActivations* out = response->add_layers();
    out->set_layer(layer);
    out->mutable_counts()->Reserve(static_cast<int>(stats->n_experts()));
    for (uint64_t e = 0; e < stats->n_experts(); ++e) out->add_counts(stats->count(row, e));
  }
  return grpc::Status::OK;
}

grpc::Status TandemService::dump_stats(const v1::DumpActivationStatsRequest& request,
                                       v1::DumpActivationStatsResponse* response) const {
  grpc::Status admitted = admit();
  if (!admitted.ok()) return admitted;
  const Result<v1::StatsScope> scope = resolve_scope(request.scope(), v1::STATS_SCOPE_MERGED);
  if (!scope.ok()) return to_grpc_status(scope.status());
  const Result<std::string> path = resolve_stats_dump_path(stats_output_path_, request.path());
  if (!path.ok()) return to_grpc_status(path.status());
  const Result<placement::ActivationStats> stats = stats_for(activity(), *scope);
  if (!stats.ok()) return to_grpc_status(stats.status());
  const Result<uint64_t> bytes = save_serialized(*stats, *path);
  if (!bytes.ok()) return to_grpc_status(bytes.status());
  response->set_path(*path);
  response->set_tokens(stats->tokens());
  response->set_bytes_written(*bytes);
  return grpc::Status::OK;
}

grpc::Status TandemService::get_request_moe_counters(
    const v1::GetRequestMoeCountersRequest& request,
    v1::GetRequestMoeCountersResponse* response) const {
  grpc::Status admitted = admit();
  if (!admitted.ok()) return admitted;
  if (request.request_id().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "request_id: must not be empty");
  }
  // The bound Generate applies (hardening row B8): a longer id was never accepted, and echoing it
  // in the NOT_FOUND message could exceed the client's metadata limit.
  const size_t max_id = context_.mapping_limits.max_request_id_bytes;
  if (request.request_id().size() > max_id) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "request_id: " + std::to_string(request.request_id().size()) +
                            " bytes; the limit is " + std::to_string(max_id));
  }
  const std::optional<RequestMoeSnapshot> snapshot = activity().request(request.request_id());
  if (!snapshot.has_value()) {
    return grpc::Status(
        grpc::StatusCode::NOT_FOUND,
        "request_id: no running or recently finished request '" + request.request_id() + "'");
  }
  response->set_request_id(request.request_id());
  response->set_state(snapshot->state == RequestActivityState::kFinished
                          ? v1::REQUEST_STATE_FINISHED
                          : v1::REQUEST_STATE_RUNNING);
  response->set_prompt_tokens(snapshot->prompt_tokens);
  response->set_generated_tokens(snapshot->generated_tokens);
  fill_counters(snapshot->prefill, response->mutable_prefill());
  fill_counters(snapshot->decode, response->mutable_decode());
  return grpc::Status::OK;
}

Status dump_activation_stats(const MoeActivity& activity, const std::string& path) {
  if (path.empty()) return invalid_argument_error("no statistics output path given");
  TANDEM_ASSIGN_OR_RETURN(placement::ActivationStats stats, activity.merged());
  return save_serialized(stats, path).status();
}

}  // namespace tandem::server
