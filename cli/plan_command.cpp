// `tandem plan`: plans an expert placement from statistics (and a model) and prints the report.
#include "cli/plan_command.h"

#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/flag_parser.h"
#include "config/config.h"
#include "config/value_text.h"
#include "engine/model/model.h"
#include "engine/placement/expert_sizes.h"
#include "engine/placement/heatmap_svg.h"
#include "engine/placement/model_identity.h"
#include "engine/placement/placement_report.h"
#include "engine/placement/planner.h"
#include "engine/placement/stats_file.h"

namespace tandem::cli {

namespace {

using config::PlacementPolicy;
using namespace tandem::placement;

constexpr const char* kUsage =
    "usage: tandem plan --stats STATS (--num-gpu-experts K | --gpu-memory BYTES --model M)\n"
    "                   [--model M] [--policy P] [--kv-cache BYTES] [--scratch BYTES] [--json]\n"
    "                   [--heatmap FILE.svg]\n"
    "  Plans which experts go on the GPU and prints, per MoE layer, the GPU experts, their bytes\n"
    "  and the share of recorded activations they cover.\n"
    "  --stats STATS          a Tandem statistics file, or a plain layers x experts table (JSON\n"
    "                         array of arrays, or CSV); may be omitted when --model is given\n"
    "  --num-gpu-experts K    experts on the GPU over all MoE layers (clamped to [0, all])\n"
    "  --gpu-memory BYTES     GPU bytes in all (e.g. 24GiB); experts get what the dense weights,\n"
    "                         KV cache and scratch leave; needs --model\n"
    "  --model M              the checkpoint: checks the statistics belong to it, gives sizes\n"
    "  --policy P             frequency (default with K), uniform, or budget (default with BYTES)\n"
    "  --kv-cache BYTES       KV cache reserved on the GPU (default 1GiB)\n"
    "  --scratch BYTES        scratch reserved on the GPU (default 512MiB)\n"
    "  --json                 one JSON object instead of the table\n"
    "  --heatmap FILE.svg     draw the statistics as a heat map with the GPU experts outlined\n";

struct Options {
  std::string stats_path;
  std::string model_path;
  std::optional<int64_t> num_gpu_experts;
  std::optional<uint64_t> gpu_memory;
  std::optional<PlacementPolicy> policy;
  uint64_t kv_cache = config::RuntimeConfig{}.kv_cache_bytes;
  uint64_t scratch = kDefaultGpuScratchBytes;
  bool json = false;
  std::string heatmap;
};

int usage_error(std::string& err, const std::string& message) {
  err += "tandem plan: " + message + "\n" + kUsage;
  return 2;
}

Result<PlacementPolicy> parse_policy(const std::string& text) {
  const auto names = config::enum_names(PlacementPolicy{});
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == text) return static_cast<PlacementPolicy>(i);
  }
  return invalid_argument_error("unknown policy \"" + text + "\" (frequency, uniform, budget)");
}

// Parses args into `o`; returns an error message, empty on success.
std::string parse(std::span<const std::string> args, Options& o, bool& help) {
  static constexpr std::string_view kWithValue[] = {"--stats",      "--model",  "--num-gpu-experts",
                                                    "--gpu-memory", "--policy", "--kv-cache",
                                                    "--scratch",    "--heatmap"};
  static constexpr std::string_view kSwitches[] = {"--json"};
  Result<ParsedFlags> parsed = parse_flags(args, kWithValue, kSwitches);
  if (!parsed.ok()) return parsed.status().message();
  help = parsed->help;
  if (help) return "";
  for (const ParsedFlag& f : parsed->flags) {
    const std::string& flag = f.name;
    const std::string* value = &f.value;
    if (flag == "--json") {
      o.json = true;
      continue;
    }
    if (flag == "--stats") {
      o.stats_path = *value;
    } else if (flag == "--model") {
      o.model_path = *value;
    } else if (flag == "--heatmap") {
      o.heatmap = *value;
    } else if (flag == "--num-gpu-experts") {
      Result<int64_t> k = config::parse_integer(*value);
      if (!k.ok()) return "--num-gpu-experts: " + k.status().message();
      o.num_gpu_experts = *k;
    } else if (flag == "--policy") {
      Result<PlacementPolicy> p = parse_policy(*value);
      if (!p.ok()) return "--policy: " + p.status().message();
      o.policy = *p;
    } else {
      Result<uint64_t> bytes = config::parse_byte_size(*value);
      if (!bytes.ok()) return flag + ": " + bytes.status().message();
      if (flag == "--gpu-memory") o.gpu_memory = *bytes;
      if (flag == "--kv-cache") o.kv_cache = *bytes;
      if (flag == "--scratch") o.scratch = *bytes;
    }
  }
  if (o.num_gpu_experts && o.gpu_memory) {
    return "give either --num-gpu-experts or --gpu-memory, not both";
  }
  if (!o.num_gpu_experts && !o.gpu_memory) return "give --num-gpu-experts K or --gpu-memory BYTES";
  if (o.gpu_memory && o.model_path.empty()) {
    return "--gpu-memory needs --model (expert sizes come from the checkpoint)";
  }
  if (!o.policy) o.policy = o.gpu_memory ? PlacementPolicy::kBudget : PlacementPolicy::kFrequency;
  if (*o.policy == PlacementPolicy::kBudget && !o.gpu_memory) {
    return "--policy budget needs --gpu-memory BYTES";
  }
  if (*o.policy != PlacementPolicy::kBudget && o.gpu_memory) {
    return "--gpu-memory goes with --policy budget";
  }
  if (o.stats_path.empty() && o.model_path.empty()) return "give --stats STATS (or --model M)";
  if (!o.heatmap.empty()) {
    if (o.stats_path.empty()) return "--heatmap needs --stats";
    if (o.heatmap.size() < 4 || o.heatmap.substr(o.heatmap.size() - 4) != ".svg") {
      return "--heatmap writes SVG: the file name must end in .svg";
    }
  }
  return "";
}

}  // namespace

int plan_main(std::span<const std::string> args, std::string& out, std::string& err) {
  Options o;
  bool help = false;
  if (std::string problem = parse(args, o, help); help) {
    out += kUsage;
    return 0;
  } else if (!problem.empty()) {
    return usage_error(err, problem);
  }

  std::optional<StatsInput> input;
  if (!o.stats_path.empty()) {
    Result<StatsInput> read = read_stats_input(o.stats_path);
    if (!read.ok()) {
      err += "tandem plan: " + read.status().message() + "\n";
      return 2;
    }
    input = std::move(read).value();
  }

  std::optional<model::Checkpoint> checkpoint;
  std::optional<ExpertSizes> sizes;
  std::optional<ExpertTable> table;
  std::vector<uint32_t> layers;
  uint64_t n_experts = 0;
  PlanRequest request;
  request.policy = *o.policy;
  request.num_gpu_experts = o.num_gpu_experts.value_or(0);
  if (!o.model_path.empty()) {
    Result<model::Checkpoint> opened = model::open_model(o.model_path);
    if (!opened.ok()) {
      err += "tandem plan: " + opened.status().message() + "\n";
      return 2;
    }
    checkpoint = std::move(opened).value();
    Result<ModelIdentity> identity = model_identity(*checkpoint);
    Result<ExpertSizes> s = expert_sizes(*checkpoint);
    if (!identity.ok() || !s.ok()) {
      err += "tandem plan: " + (identity.ok() ? s.status() : identity.status()).message() + "\n";
      return 2;
    }
    sizes = std::move(s).value();
    layers = identity->moe_layer_ids();
    n_experts = identity->n_experts;
    if (input) {
      Result<ExpertTable> fitted = conform_to_model(*input, *identity);
      if (!fitted.ok()) {
        err += "tandem plan: " + o.stats_path + ": " + fitted.status().message() + "\n";
        return 2;
      }
      table = std::move(fitted).value();
    }
    if (o.gpu_memory) {
      request.gpu_memory_budget = *o.gpu_memory;
      request.gpu_reserved_bytes = gpu_reserved_bytes(*checkpoint, o.kv_cache, o.scratch);
    }
  } else {
    table = input->table;
    layers = table->layers;
    n_experts = table->n_experts;
  }

  const ExpertTable* stats = table ? &*table : nullptr;
  const ExpertSizes* sz = sizes ? &*sizes : nullptr;
  Result<Placement> placement = plan_placement(request, layers, n_experts, stats, sz);
  if (!placement.ok()) {
    err += "tandem plan: " + placement.status().message() + "\n";
    return 2;
  }
  const PlacementReport report = make_report(*placement, stats, sz);

  if (!o.heatmap.empty()) {
    const std::string title =
        "expert activations" +
        (input && input->stats ? " (" + input->stats->model().architecture + ", " +
                                     std::to_string(input->stats->tokens()) + " tokens)"
                               : std::string()) +
        ": " + std::to_string(report.n_gpu_experts) + " GPU experts";
    std::ofstream svg(o.heatmap, std::ios::binary | std::ios::trunc);
    svg << heatmap_svg(*table, &placement->map, title);
    svg.close();
    if (!svg) {
      err += "tandem plan: cannot write " + o.heatmap + "\n";
      return 1;
    }
  }

  if (o.json) {
    nlohmann::json j = report_json(report);
    j["k_requested"] =
        o.num_gpu_experts ? nlohmann::json(*o.num_gpu_experts) : nlohmann::json(nullptr);
    j["gpu_memory_budget"] = o.gpu_memory ? nlohmann::json(*o.gpu_memory) : nlohmann::json(nullptr);
    j["gpu_reserved_bytes"] = request.gpu_reserved_bytes;
    if (input) {
      j["stats"] = {{"path", o.stats_path},
                    {"kind", input->kind},
                    {"tokens", input->stats ? nlohmann::json(input->stats->tokens())
                                            : nlohmann::json(nullptr)}};
    } else {
      j["stats"] = nullptr;
    }
    out += j.dump(2) + "\n";
  } else {
    if (input) {
      out += "statistics: " + o.stats_path + " (" + input->kind +
             (input->stats ? ", " + std::to_string(input->stats->tokens()) + " tokens" : "") +
             ")\n";
    }
    if (o.gpu_memory) {
      out += "GPU budget: " + std::to_string(*o.gpu_memory) + " bytes, reserved " +
             std::to_string(request.gpu_reserved_bytes) +
             " bytes (dense weights, KV cache, scratch)\n";
    }
    out += format_report_table(report);
  }
  return 0;
}

int run_plan(std::span<char*> args) {
  std::vector<std::string> strings(args.begin(), args.end());
  std::string out;
  std::string err;
  const int rc = plan_main(strings, out, err);
  std::fputs(out.c_str(), stdout);
  std::fputs(err.c_str(), stderr);
  return rc;
}

}  // namespace tandem::cli
