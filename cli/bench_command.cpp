// `tandem bench`: prefill and decode throughput of the CPU forward pass.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <numeric>
#include <string>
#include <vector>

#include "base/byte_text.h"
#include "base/process_memory.h"
#include "cli/bench_bandwidth.h"
#include "cli/bench_concurrency.h"
#include "cli/bench_split_experts.h"
#include "cli/commands.h"
#include "cli/model_session.h"
#include "engine/experts/moe_layer_timings.h"
#include "engine/runtime/pass_timings.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/matmul_dispatch.h"

namespace tandem::cli {
namespace {

void print_bench_usage(std::FILE* out) {
  std::fprintf(
      out,
      "usage: tandem bench --model M [--prompt-tokens N] [--gen-tokens N] [--threads T]\n"
      "Times one prefill of N synthetic prompt tokens (default 128) and N greedy decode\n"
      "steps (default 32); prints tokens per second for each.\n"
      "--gpu-experts K: K experts (uniform over the MoE layers) run on a CUDA expert\n"
      "worker, the rest on the CPU (CUDA builds only; default 0); the start-up self-check\n"
      "runs first, as in tandemd.\n"
      "--split-cpu-experts K: the same K experts on a second CPU worker with its own\n"
      "pool of --split-threads T threads (default 1), running beside the first.\n"
      "--dense-gpu: attention, norms, routers, shared experts, the head and the KV\n"
      "cache on CUDA device 0, as tandemd's runtime.dense_device (CUDA builds only).\n"
      "--kv-cache-type f32|f16: the KV cache's element type, as tandemd's\n"
      "runtime.kv_cache_type (default f16).\n"
      "--repeat N: one untimed warm-up (the prompt, then one decode step) and N timed\n"
      "runs, each on a fresh cache; prints the mean and standard deviation of each rate,\n"
      "as llama-bench does with -r N (default 1: one timed run, no warm-up).\n"
      "--profile: where a pass's time goes (attention, router, experts, head, ...: ms\n"
      "per pass and share), and per MoE layer, tokens, pairs and ms of each worker's\n"
      "share, the joined ms and overlap = (ms0 + ms1 - joined) / min(ms0, ms1), for\n"
      "the prefill and for the decode steps.\n"
      "With --concurrency N[,N...]: N sequences decoding together through the scheduler\n"
      "(tandem bench --concurrency 1 --help for its flags).\n");
}

}  // namespace

int run_bench(std::span<char*> args) {
  for (const char* a : args) {
    const std::string_view arg = a;
    if (arg == "--concurrency" || arg.starts_with("--concurrency=")) {
      const std::vector<std::string> strings(args.begin(), args.end());
      return bench_concurrency_main(strings, std::cout, std::cerr);
    }
  }
  std::string model_path;
  int prompt_tokens = 128;
  int gen_tokens = 32;
  int threads = 0;
  int gpu_experts = 0;
  int split_experts = 0;
  int split_threads = 1;
  int repeat = 1;
  // The flags that take a non-negative count, and where each one goes.
  auto count_flag = [&](std::string_view flag) -> int* {
    if (flag == "--prompt-tokens") return &prompt_tokens;
    if (flag == "--gen-tokens") return &gen_tokens;
    if (flag == "--threads") return &threads;
    if (flag == "--gpu-experts") return &gpu_experts;
    if (flag == "--split-cpu-experts") return &split_experts;
    if (flag == "--split-threads") return &split_threads;
    if (flag == "--repeat") return &repeat;
    return nullptr;
  };
  bool profile = false;
  bool dense_gpu = false;
  kernels::KvType kv_cache_type = kernels::kDefaultKvCacheType;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (arg == "--help" || arg == "-h") {
      print_bench_usage(stdout);
      return 0;
    } else if (arg == "--profile") {
      profile = true;
    } else if (arg == "--dense-gpu") {
      dense_gpu = true;
    } else if (arg == "--model" && i + 1 < args.size()) {
      model_path = args[++i];
    } else if (arg == "--kv-cache-type" && i + 1 < args.size()) {
      auto type = parse_kv_cache_type(args[++i]);
      if (!type.ok()) {
        std::fprintf(stderr, "tandem bench: %s\n", type.status().message().c_str());
        return 2;
      }
      kv_cache_type = *type;
    } else if (int* count = count_flag(arg); count != nullptr && i + 1 < args.size()) {
      auto v = parse_count(args[i], args[i + 1]);
      ++i;
      if (!v.ok()) {
        std::fprintf(stderr, "tandem bench: %s\n", v.status().message().c_str());
        return 2;
      }
      *count = *v;
    } else {
      std::fprintf(stderr, "tandem bench: unexpected argument '%s'\n", args[i]);
      print_bench_usage(stderr);
      return 2;
    }
  }
  if (gpu_experts > 0 && split_experts > 0) {
    std::fprintf(stderr,
                 "tandem bench: --gpu-experts and --split-cpu-experts exclude each other\n");
    return 2;
  }
  if (model_path.empty() || prompt_tokens < 1 || repeat < 1) {
    print_bench_usage(stderr);
    return 2;
  }
  const auto load_start = std::chrono::steady_clock::now();
  auto session = open_session(model_path, {.threads = threads,
                                           .gpu_experts = gpu_experts,
                                           .dense_gpu = dense_gpu,
                                           .max_batch_tokens = std::max(1, prompt_tokens),
                                           .kv_cache_type = kv_cache_type,
                                           .keep_copied_sources = split_experts > 0});
  if (!session.ok()) {
    // The engine names tandemd's settings; say which flags asked for them.
    std::string asked;
    if (gpu_experts > 0) asked += "--gpu-experts " + std::to_string(gpu_experts) + ": ";
    if (dense_gpu) asked += "--dense-gpu: ";
    std::fprintf(stderr, "tandem bench: %s%s\n", asked.c_str(),
                 session.status().to_string().c_str());
    return 2;
  }
  const double load_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  runtime::ModelRunner& runner = (*session)->runner();
  const engine::GpuServing& gpu = (*session)->engine->gpu();
  auto split = attach_split_cpu_experts(**session, split_experts, split_threads);
  if (!split.ok()) {
    std::fprintf(stderr, "tandem bench: %s\n", split.status().to_string().c_str());
    return 2;
  }
  experts::MoeLayerTimings prefill_timings;
  experts::MoeLayerTimings decode_timings;
  runtime::PassTimings prefill_parts;
  runtime::PassTimings decode_parts;
  const size_t need = static_cast<size_t>(prompt_tokens) + static_cast<size_t>(gen_tokens);
  if (need > runner.context_length()) {
    std::fprintf(stderr, "tandem bench: %zu tokens exceed the context limit %zu\n", need,
                 runner.context_length());
    return 2;
  }
  // Deterministic spread-out ids.
  std::vector<int32_t> ids(static_cast<size_t>(prompt_tokens));
  const size_t vocab = runner.n_vocab();
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((i * 7919 + 13) % vocab);

  // One prefill of the prompt and `steps` greedy decode steps on a fresh cache: the seconds of
  // each, or the error.
  using Clock = std::chrono::steady_clock;
  struct Timing {
    double prefill_s = 0.0;
    double decode_s = 0.0;
  };
  // record: the MoE timings of --profile come from this run.
  auto run_once = [&](int steps, bool record) -> Result<Timing> {
    TANDEM_ASSIGN_OR_RETURN(std::unique_ptr<runtime::KvCache> cache,
                            (*session)->engine->sequence_cache(need));
    runtime::ForwardOutput out;
    runtime::SequenceInput seq{cache.get(), ids, 0, runtime::LogitsWanted::kLast};
    if (record) {
      runner.set_moe_timings(&prefill_timings);
      runner.set_pass_timings(&prefill_parts);
    }
    const auto t0 = Clock::now();
    TANDEM_RETURN_IF_ERROR(runner.forward({&seq, 1}, out));
    Timing t;
    t.prefill_s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (record) {
      runner.set_moe_timings(&decode_timings);
      runner.set_pass_timings(&decode_parts);
    }
    const auto t1 = Clock::now();
    std::vector<int32_t> one(1);
    for (int i = 0; i < steps; ++i) {
      const auto row = out.row(0, 0);
      one[0] = static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
      runtime::SequenceInput step{cache.get(), one, cache->length(), runtime::LogitsWanted::kLast};
      TANDEM_RETURN_IF_ERROR(runner.forward({&step, 1}, out));
    }
    t.decode_s = std::chrono::duration<double>(Clock::now() - t1).count();
    runner.set_moe_timings(nullptr);
    runner.set_pass_timings(nullptr);
    return t;
  };
  if (repeat > 1) {
    // llama-bench's warm-up: the prompt, then one decode step.
    if (Result<Timing> warm = run_once(std::min(gen_tokens, 1), false); !warm.ok()) {
      std::fprintf(stderr, "tandem bench: %s\n", warm.status().to_string().c_str());
      return 1;
    }
  }
  std::vector<Timing> runs;
  for (int r = 0; r < repeat; ++r) {
    Result<Timing> t = run_once(gen_tokens, profile && r == 0);
    if (!t.ok()) {
      std::fprintf(stderr, "tandem bench: %s\n", t.status().to_string().c_str());
      return 1;
    }
    runs.push_back(*t);
  }
  // Before the bandwidth probe, whose buffer would count too.
  const Result<ProcessMemory> memory = read_process_memory();
  const double bandwidth = measure_read_bandwidth(runner.pool(), uint64_t{1} << 30, 3);
  std::printf("model %s, %zu threads, matmul kernels %s, KV cache %s\n", model_path.c_str(),
              runner.pool().n_threads(), std::string(kernels::active_matmul_variant_name()).c_str(),
              std::string(kernels::kv_type_name(runner.kv_layout().type)).c_str());
  std::printf("cpu: %s; %s; measured read bandwidth %.1f GB/s (%zu threads, 1 GiB)\n",
              kernels::cpu_identity_string(kernels::cpu_identity()).c_str(),
              kernels::cpu_features_string(kernels::cpu_features()).c_str(), bandwidth / 1e9,
              runner.pool().n_threads());
  if (memory.ok()) {
    std::printf(
        "load: %.2f s; memory after the runs: %s resident (%s own, %s of mapped file pages), "
        "peak %s\n",
        load_s, format_bytes(memory->resident_bytes).c_str(),
        format_bytes(memory->anonymous_bytes).c_str(), format_bytes(memory->file_bytes).c_str(),
        format_bytes(memory->peak_bytes).c_str());
  }
  constexpr double kMiB = 1024.0 * 1024.0;
  if (gpu.experts != nullptr) {
    std::printf("gpu experts: %llu on %s, %.1f MiB of device memory\n",
                static_cast<unsigned long long>(gpu.allocated.n_experts), gpu.device_label.c_str(),
                static_cast<double>(gpu.allocated.experts + gpu.allocated.expert_scratch) / kMiB);
  }
  if (gpu.dense_on_gpu) {
    std::printf(
        "dense parts and KV cache on %s, %.1f MiB of device memory\n", gpu.device_label.c_str(),
        static_cast<double>(gpu.allocated.dense + gpu.allocated.kv + gpu.allocated.dense_scratch) /
            kMiB);
  }
  if (split->worker != nullptr) {
    std::printf("split: %llu experts on a second CPU worker with %zu threads\n",
                static_cast<unsigned long long>(split->n_experts), split->pool->n_threads());
  }
  // Rates of the timed runs: one run as "N tokens in S s = R tokens/s", several as their mean
  // and sample standard deviation (llama-bench's "avg +- stdev").
  const auto report = [&](const char* what, int tokens, double Timing::*seconds) {
    std::vector<double> rates;
    double total_s = 0.0;
    for (const Timing& t : runs) {
      rates.push_back(tokens / std::max(t.*seconds, 1e-9));
      total_s += t.*seconds;
    }
    const double mean = std::accumulate(rates.begin(), rates.end(), 0.0) / rates.size();
    if (runs.size() == 1) {
      std::printf("%s %d tokens in %.3f s = %.1f tokens/s\n", what, tokens, total_s, mean);
      return mean;
    }
    double var = 0.0;
    for (double r : rates) var += (r - mean) * (r - mean);
    const double sd = std::sqrt(var / static_cast<double>(rates.size() - 1));
    std::printf("%s %d tokens, %zu runs after a warm-up: %.1f +- %.1f tokens/s (%.3f s a run)\n",
                what, tokens, runs.size(), mean, sd, total_s / runs.size());
    return mean;
  };
  report("prefill:", prompt_tokens, &Timing::prefill_s);
  if (gen_tokens > 0) {
    const double tps = report("decode: ", gen_tokens, &Timing::decode_s);
    const double bytes = static_cast<double>(decode_weight_bytes(**session));
    std::printf(
        "decode reads %.3f GB of weights per token: %.1f GB/s = %.0f %% of the measured "
        "bandwidth\n",
        bytes / 1e9, bytes * tps / 1e9, 100.0 * bytes * tps / bandwidth);
  }
  if (profile) {
    const char* second = gpu.experts != nullptr ? "gpu" : "cpu2";
    const char* dense_note =
        gpu.dense_on_gpu ? " (dense parts on the GPU: host-side times, see pass_timings.h)" : "";
    std::printf("\nPass parts, prefill (%d tokens in one pass)%s:\n%s", prompt_tokens, dense_note,
                runtime::format_pass_timings(prefill_parts).c_str());
    if (gen_tokens > 0) {
      std::printf("\nPass parts, decode (%d steps of 1 token)%s:\n%s", gen_tokens, dense_note,
                  runtime::format_pass_timings(decode_parts).c_str());
    }
    std::printf("\nMoE layers, prefill (%d tokens in one pass):\n%s", prompt_tokens,
                experts::format_moe_timings(prefill_timings, "cpu", second).c_str());
    if (gen_tokens > 0) {
      std::printf("\nMoE layers, decode (%d steps of 1 token, summed):\n%s", gen_tokens,
                  experts::format_moe_timings(decode_timings, "cpu", second).c_str());
    }
  }
  return 0;
}

}  // namespace tandem::cli
