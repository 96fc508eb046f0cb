// `tandem profile`: runs prompts through a model and records which experts the router chose.
#include "cli/profile_command.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/flag_parser.h"
#include "cli/model_session.h"
#include "config/value_text.h"
#include "engine/model/model.h"
#include "engine/placement/activation_stats.h"
#include "engine/placement/model_identity.h"
#include "engine/placement/stats_file.h"
#include "engine/runtime/runtime.h"
#include "engine/tokenizer/tokenizer.h"

namespace tandem::cli {
namespace {

using placement::ActivationRecorder;
using placement::ActivationStats;

constexpr const char* kUsage =
    "usage: tandem profile --model M --prompts FILE --output STATS [--merge]\n"
    "                      [--max-tokens-per-prompt N] [--threads T]\n"
    "  Runs each prompt through the model and records how often the router chose each expert,\n"
    "  for `tandem plan` and placement.stats_path.\n"
    "  --prompts FILE               one prompt per line, or JSONL with a \"text\" field per line\n"
    "                               (blank lines skipped)\n"
    "  --output STATS               the statistics file to write (replaced unless --merge)\n"
    "  --merge                      add to the counts already in STATS (same model only)\n"
    "  --max-tokens-per-prompt N    also greedy-generate up to N tokens per prompt (default 0)\n"
    "  --threads T                  forward threads (default 0: all cores)\n";

struct Options {
  std::string model;
  std::string prompts;
  std::string output;
  bool merge = false;
  int64_t max_tokens = 0;
  int64_t threads = 0;
};

std::string parse(std::span<const std::string> args, Options& o, bool& help) {
  static constexpr std::string_view kWithValue[] = {"--model", "--prompts", "--output",
                                                    "--max-tokens-per-prompt", "--threads"};
  static constexpr std::string_view kSwitches[] = {"--merge"};
  Result<ParsedFlags> parsed = parse_flags(args, kWithValue, kSwitches);
  if (!parsed.ok()) return parsed.status().message();
  help = parsed->help;
  if (help) return "";
  for (const ParsedFlag& f : parsed->flags) {
    const std::string& flag = f.name;
    const std::string* value = &f.value;
    if (flag == "--merge") {
      o.merge = true;
      continue;
    }
    if (flag == "--model") {
      o.model = *value;
    } else if (flag == "--prompts") {
      o.prompts = *value;
    } else if (flag == "--output") {
      o.output = *value;
    } else {
      Result<int64_t> n = config::parse_integer(*value);
      if (!n.ok() || *n < 0 || *n > (int64_t{1} << 20)) {
        return flag + " wants a non-negative integer, not \"" + *value + "\"";
      }
      (flag == "--threads" ? o.threads : o.max_tokens) = *n;
    }
  }
  if (o.model.empty()) return "give --model M";
  if (o.prompts.empty()) return "give --prompts FILE";
  if (o.output.empty()) return "give --output STATS";
  return "";
}

// The prompts of a file: JSONL when the first non-blank line starts with '{', else one prompt
// per line. Errors name the file and line.
Result<std::vector<std::string>> read_prompts(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found_error("cannot read prompts file " + path);
  std::vector<std::string> prompts;
  std::optional<bool> jsonl;
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    if (!jsonl) jsonl = line[line.find_first_not_of(" \t")] == '{';
    if (!*jsonl) {
      prompts.push_back(line);
      continue;
    }
    const std::string where = path + ":" + std::to_string(number) + ": ";
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      return invalid_argument_error(where + "not a JSON object (" + e.what() + ")");
    }
    if (!j.is_object()) return invalid_argument_error(where + "not a JSON object");
    const auto text = j.find("text");
    if (text == j.end() || !text->is_string()) {
      return invalid_argument_error(where + "no string field \"text\"");
    }
    prompts.push_back(text->get<std::string>());
  }
  if (in.bad()) return internal_error("error reading " + path);
  if (prompts.empty()) return invalid_argument_error(path + ": no prompts");
  return prompts;
}

// Counts every layer's routing of the last forward call.
void record_routing(const runtime::ForwardOutput& out, ActivationRecorder& recorder) {
  for (size_t layer = 0; layer < out.routing.size(); ++layer) {
    const experts::Routing& r = out.routing[layer];
    if (r.n_tokens == 0) continue;
    recorder.record(layer, std::span<const int32_t>(r.experts).first(r.n_tokens * r.k));
  }
}

class Progress {
 public:
  Progress(const ProfileProgress& sink, std::string& err, size_t total)
      : sink_(sink), err_(err), total_(total) {}

  void update(size_t done, uint64_t tokens, double seconds) {
    char line[160];
    const int percent = static_cast<int>(done * 100 / total_);
    if (sink_.write && sink_.tty) {
      constexpr int kWidth = 30;
      const int filled = static_cast<int>(done * kWidth / total_);
      std::snprintf(line, sizeof line, "\r[%s%s] %3d%% %zu/%zu prompts, %llu tokens, %.1f tok/s",
                    std::string(static_cast<size_t>(filled), '#').c_str(),
                    std::string(static_cast<size_t>(kWidth - filled), ' ').c_str(), percent, done,
                    total_, static_cast<unsigned long long>(tokens),
                    seconds > 0 ? static_cast<double>(tokens) / seconds : 0.0);
      sink_.write(line);
      if (done == total_) sink_.write("\n");
      return;
    }
    if (percent / 10 <= last_decile_ && done != total_) return;
    if (done == total_ && last_decile_ == 10) return;
    last_decile_ = percent / 10;
    std::snprintf(line, sizeof line, "profile: %zu/%zu prompts (%d%%), %llu tokens\n", done, total_,
                  percent, static_cast<unsigned long long>(tokens));
    if (sink_.write) {
      sink_.write(line);
    } else {
      err_ += line;
    }
  }

 private:
  const ProfileProgress& sink_;
  std::string& err_;
  size_t total_;
  int last_decile_ = 0;
};

std::string percent(uint64_t part, uint64_t whole) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%",
                whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole));
  return text;
}

// Per MoE layer: the most and least chosen expert and their share of the layer's selections.
std::string summary_table(const ActivationStats& stats) {
  std::string text = "layer  most used             least used\n";
  for (size_t row = 0; row < stats.n_rows(); ++row) {
    uint64_t total = 0;
    uint64_t most = 0;
    uint64_t least = 0;
    for (uint64_t e = 0; e < stats.n_experts(); ++e) {
      total += stats.count(row, e);
      if (stats.count(row, e) > stats.count(row, most)) most = e;
      if (stats.count(row, e) < stats.count(row, least)) least = e;
    }
    char line[160];
    std::snprintf(line, sizeof line, "%5u  expert %-4llu %7s    expert %-4llu %7s\n",
                  stats.moe_layer_ids()[row], static_cast<unsigned long long>(most),
                  percent(stats.count(row, most), total).c_str(),
                  static_cast<unsigned long long>(least),
                  percent(stats.count(row, least), total).c_str());
    text += line;
  }
  return text;
}

}  // namespace

int profile_main(std::span<const std::string> args, std::string& out, std::string& err,
                 const ProfileProgress& progress_sink) {
  Options o;
  bool help = false;
  if (std::string problem = parse(args, o, help); help) {
    out += kUsage;
    return 0;
  } else if (!problem.empty()) {
    err += "tandem profile: " + problem + "\n" + kUsage;
    return 2;
  }
  auto fail = [&err](const Status& status, int rc) {
    err += "tandem profile: " + status.message() + "\n";
    return rc;
  };

  Result<std::vector<std::string>> prompts = read_prompts(o.prompts);
  if (!prompts.ok()) return fail(prompts.status(), 2);
  Result<std::unique_ptr<ModelSession>> session =
      open_session(o.model, static_cast<int>(o.threads));
  if (!session.ok()) return fail(session.status(), 2);
  Result<placement::ModelIdentity> identity = placement::model_identity((*session)->checkpoint());
  if (!identity.ok()) return fail(identity.status(), 2);
  Result<ActivationStats> stats = ActivationStats::create(*identity);
  if (!stats.ok()) return fail(stats.status(), 2);

  // Refuse statistics of another model before spending time on the prompts.
  std::optional<ActivationStats> earlier;
  if (o.merge && std::filesystem::exists(o.output)) {
    Result<ActivationStats> loaded = placement::load_stats_for(o.output, *identity);
    if (!loaded.ok()) return fail(loaded.status(), 2);
    earlier = std::move(loaded).value();
  }

  Result<tokenizer::Tokenizer> tok = load_tokenizer(o.model);
  if (!tok.ok()) return fail(tok.status(), 2);
  tokenizer::EncodeOptions encode_options;
  encode_options.add_special = true;
  encode_options.parse_special = true;
  std::vector<std::vector<int32_t>> ids;
  for (size_t i = 0; i < prompts->size(); ++i) {
    Result<std::vector<int32_t>> enc = tok->encode((*prompts)[i], encode_options);
    if (!enc.ok()) {
      return fail(Status(enc.status().code(),
                         "prompt " + std::to_string(i + 1) + ": " + enc.status().message()),
                  2);
    }
    ids.push_back(std::move(enc).value());
  }

  runtime::ModelRunner& model = (*session)->runner();
  std::optional<int32_t> eos;
  if (model.spec().eos_token_id) eos = static_cast<int32_t>(*model.spec().eos_token_id);
  if (tok->eos_id()) eos = tok->eos_id();

  ActivationRecorder recorder(*stats);
  Progress progress(progress_sink, err, ids.size());
  runtime::ForwardOutput fwd;
  const runtime::ForwardOptions forward_options{.record_routing = true};
  uint64_t prompt_tokens = 0;
  uint64_t generated_tokens = 0;
  size_t truncated = 0;
  size_t skipped = 0;
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < ids.size(); ++i) {
    std::vector<int32_t>& prompt = ids[i];
    auto cache = model.new_kv_cache();
    if (prompt.empty()) {
      ++skipped;
    } else {
      if (prompt.size() > cache->max_positions()) {
        prompt.resize(cache->max_positions());
        ++truncated;
      }
      std::vector<int32_t> step = prompt;
      // Forward call `produced` runs the prompt (0) or the produced-th generated token; it
      // needs logits only when another token follows.
      for (int64_t produced = 0;; ++produced) {
        runtime::SequenceInput seq{
            cache.get(), step, cache->length(),
            produced < o.max_tokens ? runtime::LogitsWanted::kLast : runtime::LogitsWanted::kNone};
        const Status s = model.forward({&seq, 1}, fwd, forward_options);
        if (!s.ok()) {
          return fail(Status(s.code(), "prompt " + std::to_string(i + 1) + ": " + s.message()), 1);
        }
        record_routing(fwd, recorder);
        recorder.add_tokens(step.size());
        (produced == 0 ? prompt_tokens : generated_tokens) += step.size();
        if (produced >= o.max_tokens || cache->length() >= cache->max_positions()) break;
        const auto row = fwd.row(0, 0);
        const auto next =
            static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
        if (eos && next == *eos) break;
        step.assign(1, next);
      }
    }
    recorder.fold_into(*stats);
    progress.update(
        i + 1, prompt_tokens + generated_tokens,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const uint64_t new_tokens = stats->tokens();
  ActivationStats result = std::move(stats).value();
  if (earlier) {
    const Status merged = earlier->merge(result);
    if (!merged.ok()) return fail(merged, 2);
    result = std::move(*earlier);
  }
  if (const Status saved = placement::save_stats(result, o.output); !saved.ok()) {
    return fail(saved, 1);
  }

  char line[256];
  std::snprintf(line, sizeof line,
                "profiled %zu prompts: %llu tokens (%llu prompt, %llu generated) in %.2f s\n",
                ids.size(), static_cast<unsigned long long>(new_tokens),
                static_cast<unsigned long long>(prompt_tokens),
                static_cast<unsigned long long>(generated_tokens), seconds);
  out += line;
  if (truncated > 0) {
    out += std::to_string(truncated) + " prompt(s) cut to the context length (" +
           std::to_string(model.context_length()) + " tokens)\n";
  }
  if (skipped > 0) out += std::to_string(skipped) + " prompt(s) gave no tokens and were skipped\n";
  if (recorder.ignored() > 0) {
    out += std::to_string(recorder.ignored()) + " routing ids were out of range and ignored\n";
  }
  out += "statistics: " + o.output + " (" + std::to_string(result.tokens()) + " tokens" +
         (result.tokens() != new_tokens
              ? ", merged with " + std::to_string(result.tokens() - new_tokens) + " earlier"
              : std::string()) +
         ")\n";
  out += summary_table(result);
  return 0;
}

int run_profile(std::span<char*> args) {
  std::vector<std::string> strings(args.begin(), args.end());
  std::string out;
  std::string err;
  ProfileProgress progress;
  progress.tty = ::isatty(STDERR_FILENO) != 0;
  progress.write = [](std::string_view text) {
    std::fwrite(text.data(), 1, text.size(), stderr);
    std::fflush(stderr);
  };
  const int rc = profile_main(strings, out, err, progress);
  std::fputs(out.c_str(), stdout);
  std::fputs(err.c_str(), stderr);
  return rc;
}

}  // namespace tandem::cli
