// `tandem bench --concurrency`: aggregate decode throughput of N sequences batched by the engine
// Scheduler, for each N of a list.
#include "cli/bench_concurrency.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "cli/flag_parser.h"
#include "cli/model_session.h"
#include "engine/facade/engine.h"
#include "engine/model/model.h"
#include "kernels/cpu/matmul_dispatch.h"

namespace tandem::cli {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kMaxConcurrency = 1024;

// CPU seconds used by the whole process so far (all threads).
double process_cpu_seconds() {
  timespec ts{};
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return 0.0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct Options {
  std::string model_path;
  std::vector<int> concurrency;
  int prompt_tokens = 32;
  int gen_tokens = 32;
  int threads = 0;
  kernels::KvType kv_cache_type = kernels::kDefaultKvCacheType;
  bool json = false;
  bool profile = false;
};

void print_usage(std::ostream& out) {
  out << "usage: tandem bench --model M --concurrency N[,N...] [--prompt-tokens N] "
         "[--gen-tokens N]\n"
         "                    [--threads T] [--kv-cache-type f32|f16] [--json] [--profile]\n"
         "Runs N greedy requests together through the engine scheduler (synthetic prompts of\n"
         "--prompt-tokens each, default 32; --gen-tokens each, default 32, at least 2) and prints\n"
         "the aggregate and per-sequence decode tokens per second for each N, with the ratio to\n"
         "the first N of the list.\n"
         "--profile: for each N, where the first pass's time went and where the decode\n"
         "passes' went (attention, router, experts, head, ...: ms per pass and share).\n";
}

Result<Options> parse_options(std::span<const std::string> args, bool& help) {
  static constexpr std::string_view kWithValue[] = {"--model",         "--concurrency",
                                                    "--prompt-tokens", "--gen-tokens",
                                                    "--threads",       "--kv-cache-type"};
  static constexpr std::string_view kSwitches[] = {"--json", "--profile"};
  TANDEM_ASSIGN_OR_RETURN(ParsedFlags parsed, parse_flags(args, kWithValue, kSwitches));
  help = parsed.help;
  Options o;
  for (const ParsedFlag& f : parsed.flags) {
    if (f.name == "--model") {
      o.model_path = f.value;
    } else if (f.name == "--concurrency") {
      TANDEM_ASSIGN_OR_RETURN(o.concurrency, parse_concurrency_list(f.value));
    } else if (f.name == "--json") {
      o.json = true;
    } else if (f.name == "--profile") {
      o.profile = true;
    } else if (f.name == "--kv-cache-type") {
      TANDEM_ASSIGN_OR_RETURN(o.kv_cache_type, parse_kv_cache_type(f.value));
    } else {
      TANDEM_ASSIGN_OR_RETURN(const int v, parse_count(f.name.c_str(), f.value));
      (f.name == "--prompt-tokens" ? o.prompt_tokens
       : f.name == "--gen-tokens"  ? o.gen_tokens
                                   : o.threads) = v;
    }
  }
  if (help) return o;
  if (o.model_path.empty()) return invalid_argument_error("--model is required");
  if (o.concurrency.empty()) return invalid_argument_error("--concurrency is required");
  if (o.prompt_tokens < 1) return invalid_argument_error("--prompt-tokens must be at least 1");
  if (o.gen_tokens < 2) {
    return invalid_argument_error(
        "--gen-tokens must be at least 2 (the first token comes from "
        "the prefill pass)");
  }
  return o;
}

// Deterministic, spread-out prompt ids, different for each sequence.
std::vector<int32_t> synthetic_prompt(size_t seq, size_t length, size_t vocab) {
  std::vector<int32_t> ids(length);
  for (size_t i = 0; i < length; ++i) {
    ids[i] = static_cast<int32_t>((i * 7919 + seq * 104729 + 13) % vocab);
  }
  return ids;
}

// One engine per level, built as the other bench commands build theirs (model_session.h) and
// served through its scheduler.
// `model_error` is set when the engine cannot be built (a model or usage error, not a run failure).
Result<ConcurrencyRow> run_level(const Options& o, int n, bool& model_error) {
  const int64_t per_seq = int64_t{o.prompt_tokens} + o.gen_tokens;
  // Every prompt fits the first forward pass, so that pass is all prefill and the rest all decode.
  engine::EngineOptions options = session_engine_options(
      o.model_path, {.threads = o.threads,
                     .max_batch_tokens = std::max<int64_t>(int64_t{n} * o.prompt_tokens, n),
                     .kv_cache_type = o.kv_cache_type});
  options.limits.max_running = n;
  options.limits.prefill_chunk_tokens = o.prompt_tokens;
  options.queue_capacity = static_cast<size_t>(n);
  // Sequences of per_seq tokens, and a KV pool of exactly n of them (kv_cache_bytes 0).
  options.context_length = static_cast<int>(per_seq);
  options.kv_cache_bytes = 0;
  // Written on the scheduler thread; read here only after stop() joined it.
  std::vector<Clock::time_point> step_end;
  std::vector<double> step_end_cpu;
  step_end.reserve(static_cast<size_t>(o.gen_tokens) + 16);
  step_end_cpu.reserve(static_cast<size_t>(o.gen_tokens) + 16);
  ConcurrencyRow row;
  // --profile: the runner, set before start(); after the first pass its timings go to the decode
  // parts (on the scheduler thread, between passes).
  runtime::ModelRunner* profiled = nullptr;
  options.after_step = [&step_end, &step_end_cpu, &profiled, &row](int64_t) {
    step_end.push_back(Clock::now());
    step_end_cpu.push_back(process_cpu_seconds());
    if (profiled != nullptr && step_end.size() == 1) profiled->set_pass_timings(&row.decode_parts);
  };
  Result<std::unique_ptr<engine::Engine>> built = engine::Engine::create(std::move(options));
  model_error = !built.ok();
  TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<engine::Engine> scheduler, std::move(built));
  const size_t threads = scheduler->runner().pool().n_threads();
  const size_t vocab = scheduler->runner().n_vocab();
  if (o.profile) {
    profiled = &scheduler->runner();
    profiled->set_pass_timings(&row.prefill_parts);
  }

  std::vector<runtime::RequestHandle> handles;
  for (int s = 0; s < n; ++s) {
    runtime::Request request;
    request.id = "bench-" + std::to_string(s);
    request.prompt_token_ids =
        synthetic_prompt(static_cast<size_t>(s), static_cast<size_t>(o.prompt_tokens), vocab);
    request.sampling.temperature = 0.0f;
    request.sampling.max_tokens = o.gen_tokens;
    request.sampling.ignore_eos = true;
    TANDEM_ASSIGN_OR_RETURN(runtime::RequestHandle handle, scheduler->submit(std::move(request)));
    handles.push_back(std::move(handle));
  }

  const Clock::time_point start = Clock::now();
  TANDEM_RETURN_IF_ERROR(scheduler->start());
  row.concurrency = n;
  row.threads = threads;
  Status failure;
  for (runtime::RequestHandle& handle : handles) {
    while (!handle.done()) {
      std::optional<runtime::TokenEvent> event = handle.next(std::chrono::milliseconds(1000));
      if (!event || !event->is_final) continue;
      row.prompt_tokens += event->usage.prompt_tokens;
      row.completion_tokens += event->usage.completion_tokens;
      if (event->finish_reason != runtime::FinishReason::kLength && failure.ok()) {
        failure = event->error.ok()
                      ? internal_error("request " + handle.id() + " ended with '" +
                                       std::string(finish_reason_name(event->finish_reason)) +
                                       "' before its " + std::to_string(o.gen_tokens) + " tokens")
                      : event->error;
      }
    }
  }
  scheduler->stop(runtime::StopMode::kDrain);
  if (profiled != nullptr) profiled->set_pass_timings(nullptr);
  TANDEM_RETURN_IF_ERROR(failure);
  row.steps = scheduler->scheduler().steps();
  if (step_end.empty()) return internal_error("the scheduler ran no forward pass");

  row.prefill_s = std::chrono::duration<double>(step_end.front() - start).count();
  row.decode_s = std::chrono::duration<double>(step_end.back() - step_end.front()).count();
  row.decode_cpu_s = step_end_cpu.back() - step_end_cpu.front();
  row.decode_tokens = row.completion_tokens - n;  // the first pass sampled one token each
  row.decode_tokens_per_s = static_cast<double>(row.decode_tokens) / std::max(row.decode_s, 1e-9);
  row.per_sequence_tokens_per_s = row.decode_tokens_per_s / n;
  row.decode_tokens_per_cpu_s =
      static_cast<double>(row.decode_tokens) / std::max(row.decode_cpu_s, 1e-9);
  row.single_prefill_step = row.steps == o.gen_tokens;
  return row;
}

void print_table(const Options& o, size_t threads, const std::vector<ConcurrencyRow>& rows,
                 std::ostream& out) {
  char line[256];
  out << "model " << o.model_path << ", " << threads << " threads, " << o.prompt_tokens
      << " prompt + " << o.gen_tokens << " generated tokens per sequence, matmul kernels "
      << kernels::active_matmul_variant_name() << "\n";
  out << "concurrency  prompt_tokens  decode_tokens  steps  prefill_s  decode_s  decode_tok/s  "
         "per_seq_tok/s  ratio  decode_cpu_s  tok/cpu_s  cpu_ratio\n";
  for (const ConcurrencyRow& r : rows) {
    const double ratio = r.decode_tokens_per_s / std::max(rows.front().decode_tokens_per_s, 1e-9);
    const double cpu_ratio =
        r.decode_tokens_per_cpu_s / std::max(rows.front().decode_tokens_per_cpu_s, 1e-9);
    std::snprintf(
        line, sizeof line,
        "%11d  %13lld  %13lld  %5lld  %9.6f  %8.6f  %12.2f  %13.2f  %5.2f  %12.6f  %9.2f  %9.2f\n",
        r.concurrency, static_cast<long long>(r.prompt_tokens),
        static_cast<long long>(r.decode_tokens), static_cast<long long>(r.steps), r.prefill_s,
        r.decode_s, r.decode_tokens_per_s, r.per_sequence_tokens_per_s, ratio, r.decode_cpu_s,
        r.decode_tokens_per_cpu_s, cpu_ratio);
    out << line;
  }
  out << "ratio: aggregate decode tokens/s relative to concurrency " << rows.front().concurrency
      << "; cpu_ratio: the same per CPU-second of the process (less sensitive to a shared "
         "machine)\n";
  if (!o.profile) return;
  for (const ConcurrencyRow& r : rows) {
    out << "\nconcurrency " << r.concurrency << ", pass parts, first pass:\n"
        << runtime::format_pass_timings(r.prefill_parts) << "concurrency " << r.concurrency
        << ", pass parts, decode passes:\n"
        << runtime::format_pass_timings(r.decode_parts);
  }
}

// {part name: ms per pass} of the parts that took time.
nlohmann::json pass_parts_json(const runtime::PassTimings& t) {
  nlohmann::json j = nlohmann::json::object();
  if (t.passes == 0) return j;
  for (size_t i = 0; i < runtime::kPassParts; ++i) {
    if (!(t.seconds[i] > 0.0)) continue;
    j[std::string(runtime::pass_part_name(static_cast<runtime::PassPart>(i)))] =
        t.seconds[i] * 1e3 / static_cast<double>(t.passes);
  }
  return j;
}

void print_json(const Options& o, size_t threads, const std::vector<ConcurrencyRow>& rows,
                std::ostream& out) {
  nlohmann::json j;
  j["model"] = o.model_path;
  j["threads"] = threads;
  j["prompt_tokens_per_sequence"] = o.prompt_tokens;
  j["gen_tokens_per_sequence"] = o.gen_tokens;
  j["rows"] = nlohmann::json::array();
  for (const ConcurrencyRow& r : rows) {
    j["rows"].push_back({
        {"concurrency", r.concurrency},
        {"prompt_tokens", r.prompt_tokens},
        {"completion_tokens", r.completion_tokens},
        {"decode_tokens", r.decode_tokens},
        {"steps", r.steps},
        {"prefill_s", r.prefill_s},
        {"decode_s", r.decode_s},
        {"decode_tokens_per_s", r.decode_tokens_per_s},
        {"per_sequence_tokens_per_s", r.per_sequence_tokens_per_s},
        {"ratio", r.decode_tokens_per_s / std::max(rows.front().decode_tokens_per_s, 1e-9)},
        {"decode_cpu_s", r.decode_cpu_s},
        {"decode_tokens_per_cpu_s", r.decode_tokens_per_cpu_s},
        {"single_prefill_step", r.single_prefill_step},
    });
    if (o.profile) {
      j["rows"].back()["pass_ms"] = {{"first_pass", pass_parts_json(r.prefill_parts)},
                                     {"decode_passes", pass_parts_json(r.decode_parts)},
                                     {"decode_pass_count", r.decode_parts.passes}};
    }
  }
  out << j.dump(2) << "\n";
}

}  // namespace

Result<std::vector<int>> parse_concurrency_list(const std::string& text) {
  std::vector<int> values;
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] == ',' || text[i] == ' ') {
      ++i;
      continue;
    }
    int value = 0;
    const auto [ptr, ec] = std::from_chars(text.data() + i, text.data() + text.size(), value);
    if (ec != std::errc() || value < 1 || value > kMaxConcurrency ||
        (ptr != text.data() + text.size() && *ptr != ',' && *ptr != ' ')) {
      return invalid_argument_error("--concurrency wants a list of integers in [1, " +
                                    std::to_string(kMaxConcurrency) + "] such as 1,4,16, not '" +
                                    text + "'");
    }
    values.push_back(value);
    i = static_cast<size_t>(ptr - text.data());
  }
  if (values.empty()) return invalid_argument_error("--concurrency: empty list");
  return values;
}

int bench_concurrency_main(std::span<const std::string> args, std::ostream& out,
                           std::ostream& err) {
  bool help = false;
  Result<Options> options = parse_options(args, help);
  if (help) {
    print_usage(out);
    return 0;
  }
  if (!options.ok()) {
    err << "tandem bench: " << options.status().message() << "\n";
    print_usage(err);
    return 2;
  }
  const Options& o = *options;
  std::vector<ConcurrencyRow> rows;
  for (int n : o.concurrency) {
    bool model_error = false;
    Result<ConcurrencyRow> row = run_level(o, n, model_error);
    if (!row.ok()) {
      err << "tandem bench: concurrency " << n << ": " << row.status().to_string() << "\n";
      return model_error || row.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
    }
    if (!row->single_prefill_step) {
      err << "tandem bench: warning: concurrency " << n << " took " << row->steps << " steps, not "
          << o.gen_tokens << "; prefill spilled into the decode figures\n";
    }
    rows.push_back(*row);
  }
  const size_t threads = rows.front().threads;
  if (o.json) {
    print_json(o, threads, rows, out);
  } else {
    print_table(o, threads, rows, out);
  }
  return 0;
}

}  // namespace tandem::cli
