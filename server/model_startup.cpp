// tandemd's model start: checkpoint + placement, with their startup log lines.
#include "server/model_startup.h"

#include <spdlog/spdlog.h>

#include <sstream>
#include <string>

#include "engine/model/architecture.h"

namespace tandem::server {

namespace {

std::string mib(uint64_t bytes) {
  std::ostringstream out;
  out.precision(1);
  out << std::fixed << static_cast<double>(bytes) / (1024.0 * 1024.0) << " MiB";
  return out.str();
}

void log_model(const model::Checkpoint& checkpoint) {
  const model::ModelSpec& spec = *checkpoint.spec;
  const model::CheckpointSizes sizes = model::checkpoint_sizes(checkpoint);
  spdlog::info("model: {} ({}), {} layers, {} experts top-{}, hidden {}, vocab {}, context {}",
               checkpoint.path, model::architecture_name(spec.architecture), spec.n_layers,
               spec.n_experts, spec.n_experts_used, spec.hidden_size, spec.vocab_size,
               spec.context_length);
  spdlog::info("model: {} in all: experts {}, dense {}, embeddings {}", mib(sizes.total),
               mib(sizes.experts), mib(sizes.dense), mib(sizes.embeddings));
}

}  // namespace

Result<StartedModel> start_model(const config::Config& config) {
  if (config.model.path.empty()) {
    return failed_precondition_error(
        "no model configured: set model.path (YAML), TANDEM_MODEL_PATH or --model.path");
  }
  TANDEM_ASSIGN_OR_RETURN(model::Checkpoint checkpoint, model::open_model(config.model.path));
  log_model(checkpoint);
  TANDEM_ASSIGN_OR_RETURN(placement::StartupPlacement planned,
                          placement::plan_startup_placement(config.placement, checkpoint,
                                                            config.runtime.kv_cache_bytes));
  std::istringstream table(placement::format_report_table(planned.report));
  for (std::string line; std::getline(table, line);) spdlog::info("{}", line);
  if (planned.report.n_gpu_experts > 0) {
    spdlog::warn(
        "placement puts {} experts on the GPU, but the CUDA expert worker is not built yet: "
        "every expert would run on the CPU",
        planned.report.n_gpu_experts);
  }
  return StartedModel{std::move(checkpoint), std::move(planned)};
}

}  // namespace tandem::server
