// run_daemon: the serving lifetime of tandemd (see docs/api.md and docs/deployment.md).
#include "server/daemon_run.h"

#include <chrono>
#include <memory>
#include <thread>

#include <spdlog/spdlog.h>

#include "base/byte_text.h"
#include "base/process_memory.h"
#include "engine/placement/model_identity.h"
#include "engine/placement/planner.h"
#include "server/embedded_default.h"
#include "server/engine_config.h"
#include "server/exit_codes.h"
#include "server/expert_metrics.h"
#include "server/grpc_server.h"
#include "server/metrics.h"
#include "server/moe_activity.h"
#include "server/shutdown_signals.h"
#include "server/stats_dump_path.h"
#include "server/tandem_service.h"
#include "server/vllm_engine_service.h"

namespace tandem::server {
namespace {

constexpr auto kGaugeInterval = std::chrono::seconds(1);
// After the engine stopped, how long the last abort completions get to reach their clients.
constexpr auto kFinalFlush = std::chrono::seconds(2);

// Counters already exported, so that each update adds only what is new.
struct Exported {
  ExpertMetricsExport experts;
  int64_t preemptions = 0;
  int64_t prefix_queries = 0;
  int64_t prefix_hits = 0;
};

void update_gauges(const engine::Engine& engine, const MoeActivity& activity,
                   ServerMetrics& metrics, Exported& seen) {
  const runtime::SchedulerLoad load = engine.load();
  metrics.add_preemptions(load.preemptions - seen.preemptions);
  seen.preemptions = load.preemptions;
  metrics.add_prefix_cache(load.prefix_query_tokens - seen.prefix_queries,
                           load.prefix_hit_tokens - seen.prefix_hits);
  seen.prefix_queries = load.prefix_query_tokens;
  seen.prefix_hits = load.prefix_hit_tokens;
  metrics.set_queue_depth(load.waiting);
  metrics.set_running(load.running);
  metrics.set_kv_blocks(load.kv_used_blocks, load.kv_cached_blocks, load.kv_total_blocks);
  metrics.set_kv_usage(load.kv_total_blocks > 0 ? static_cast<double>(load.kv_used_blocks) /
                                                      static_cast<double>(load.kv_total_blocks)
                                                : 0.0);
  seen.experts.update(activity, metrics);
  if (const Result<ProcessMemory> memory = read_process_memory(); memory.ok()) {
    metrics.set_resident_memory(*memory);
  }
}

// Stops admission, lets in-flight requests finish for up to `grace`, then ends the rest.
void drain(ServingContext& context, GrpcServer& server, ServerMetrics& metrics,
           engine::Engine& engine, std::chrono::seconds grace) {
  context.set_state(ServingState::kDraining);
  server.set_serving(false);
  metrics.set_serving(false);
  engine.close_admission();
  const auto deadline = std::chrono::steady_clock::now() + grace;
  size_t in_flight = engine.in_flight();
  spdlog::info("draining {} in-flight request(s) for up to {} s", in_flight, grace.count());
  while (in_flight > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    in_flight = engine.in_flight();
  }
  if (in_flight > 0) {
    spdlog::warn("{} request(s) still running after {} s: ending them with finish_reason abort",
                 in_flight, grace.count());
  }
  engine.stop(runtime::StopMode::kAbort);
  server.shutdown(std::chrono::duration_cast<std::chrono::milliseconds>(kFinalFlush));
}

int refuse_start(const Status& status, int exit_code) {
  spdlog::error("cannot start: {}", status.to_string());
  return exit_code;
}

}  // namespace

int run_daemon(config::Config config, const std::string& executable_path) {
  ShutdownSignals& signals = ShutdownSignals::install();
  signals.set_exit_at_once(true);  // nothing to drain until the model serves

  // Files the configuration names are checked before anything slow starts.
  const Status stats_output = check_stats_output_path(config.placement.stats_output_path);
  if (!stats_output.ok()) return refuse_start(stats_output, kExitBadConfig);

  Result<std::string> embedded = apply_embedded_default(config, executable_path);
  if (!embedded.ok()) {
    return refuse_start(embedded.status(),
                        startup_exit_code(embedded.status(), StartupStage::kCheckpoint));
  }
  if (!embedded->empty()) {
    spdlog::info("no model.path configured: serving the embedded demo model from {}", *embedded);
  }

  Result<std::unique_ptr<ServerMetrics>> metrics =
      ServerMetrics::create(config.metrics.host, config.metrics.port);
  if (!metrics.ok()) {
    spdlog::error("cannot start: metrics.host/metrics.port: {}", metrics.status().to_string());
    return kExitFailure;
  }
  ServingContext context;
  context.auth = auth_policy(config.server);
  context.metrics = metrics->get();
  VllmEngineService vllm_service(context);
  TandemService tandem_service(
      context, config.placement.stats_output_path,
      TandemServiceOptions{.statistics_path = config.placement.stats_path});
  Result<std::unique_ptr<GrpcServer>> server =
      GrpcServer::start(config.server, {&vllm_service, &tandem_service});
  if (!server.ok()) {
    // INVALID_ARGUMENT: a certificate or key file the configuration names cannot be read.
    return refuse_start(server.status(), server.status().code() == StatusCode::kInvalidArgument
                                             ? kExitBadConfig
                                             : kExitFailure);
  }
  std::string auth_note;
  if (!config.server.api_keys.empty()) {
    auth_note = ", API keys required";
    for (size_t i = 0; i < config.server.trusted_peers.size(); ++i) {
      auth_note += (i == 0 ? " except from " : ", ") + config.server.trusted_peers[i];
    }
  }
  spdlog::info("gRPC listening on {}:{} ({}{}); health NOT_SERVING while the model loads",
               config.server.host, (*server)->port(), (*server)->tls() ? "TLS" : "plaintext",
               auth_note);
  if (config.metrics.port != 0) {
    spdlog::info("metrics on http://{}:{}/metrics", config.metrics.host, config.metrics.port);
  }

  if (const Status format = config.model.path.empty()
                                ? Status()
                                : check_model_format(config.model.format, config.model.path);
      !format.ok()) {
    return refuse_start(format, startup_exit_code(format, StartupStage::kCheckpoint));
  }
  engine::EngineOptions options = engine_options(config);
  // The live statistics recorder, made once the placement is known: it counts on top of the
  // statistics the placement was planned from.
  std::unique_ptr<MoeActivity> activity;
  options.routing_observer =
      [&activity](const model::Checkpoint& checkpoint,
                  const placement::StartupPlacement& planned) -> Result<runtime::RoutingObserver*> {
    TANDEM_ASSIGN_OR_RETURN(const placement::ModelIdentity identity,
                            placement::model_identity(checkpoint));
    TANDEM_ASSIGN_OR_RETURN(activity,
                            MoeActivity::create(identity, planned.stats, planned.placement.map));
    return activity.get();
  };
  engine::EngineStage stage = engine::EngineStage::kDevices;
  Result<std::unique_ptr<engine::Engine>> built =
      engine::Engine::create(std::move(options), &stage);
  if (!built.ok()) return refuse_start(built.status(), engine_exit_code(built.status(), stage));
  engine::Engine& engine = **built;
  const placement::GpuMemoryDemand& on_gpu = engine.gpu().allocated;
  (*metrics)->set_gpu_memory(
      {on_gpu.experts, on_gpu.expert_scratch, on_gpu.dense, on_gpu.kv, on_gpu.dense_scratch});
  context.served = &engine;
  context.tokenizer = engine.tokenizer();
  context.model = served_model_info(config, engine);
  context.mapping_limits.context_length = context.model.context_length;
  context.placement = &engine.placement();
  context.moe_activity = activity.get();
  context.gpu_device = engine.gpu().device_label;
  const Status started = engine.start();
  if (!started.ok()) return refuse_start(started, kExitFailure);
  signals.set_exit_at_once(false);
  context.set_state(ServingState::kServing);
  (*server)->set_serving(true);
  (*metrics)->set_serving(true);
  const ServedModelInfo& info = context.model;
  spdlog::info("serving model '{}' ({} tokens of context) on {}:{}", info.served_model_name,
               info.context_length, config.server.host, (*server)->port());
  if (const Result<ProcessMemory> memory = read_process_memory(); memory.ok()) {
    (*metrics)->set_resident_memory(*memory);
    spdlog::info("memory: {} resident ({} own, {} of mapped file pages)",
                 format_bytes(memory->resident_bytes), format_bytes(memory->anonymous_bytes),
                 format_bytes(memory->file_bytes));
  }
  if (!info.tokenizer_path.empty()) {
    spdlog::info(
        "OpenAI gateway: smg launch --host 127.0.0.1 --port 30000 --worker-urls grpc://{}:{} "
        "--policy round_robin --tokenizer-path {}   (docs/api.md)",
        config.server.host, (*server)->port(), info.tokenizer_path);
  }

  Exported exported;
  bool failure_reported = false;
  while (!signals.wait(std::chrono::duration_cast<std::chrono::milliseconds>(kGaugeInterval))) {
    update_gauges(engine, *activity, **metrics, exported);
    // The scheduler checks the files after every forward pass; this catches a change while
    // idle, so health turns NOT_SERVING before the next request arrives.
    if (!failure_reported) {
      if (const Status files = engine.check_files(); !files.ok()) engine.fail(files);
      if (const Status failure = engine.failure(); !failure.ok()) {
        failure_reported = true;
        (*server)->set_serving(false);
        (*metrics)->set_serving(false);
        spdlog::error("not serving any more: {}", failure.message());
      }
    }
  }
  drain(context, **server, **metrics, engine,
        std::chrono::seconds(config.server.shutdown_grace_seconds));
  if (!config.placement.stats_output_path.empty()) {
    const Status written = dump_activation_stats(*activity, config.placement.stats_output_path);
    if (written.ok()) {
      spdlog::info("activation statistics written to {}", config.placement.stats_output_path);
    } else {
      spdlog::error("cannot write the activation statistics: {}", written.to_string());
    }
  }
  spdlog::info("tandemd stopped");
  return kExitOk;
}

}  // namespace tandem::server
