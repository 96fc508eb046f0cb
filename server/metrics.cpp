// ServerMetrics: the prometheus-cpp registry with tandemd's metrics and the civetweb listener.
#include "server/metrics.h"

#include <CivetServer.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <vector>

#include "tandem/build_info.h"

namespace tandem::server {
namespace {

// Bucket upper bounds, in seconds. Prometheus estimates quantiles by interpolating inside a bucket,
// so the bounds are dense where the values of a CPU+GPU MoE server actually fall and where
// latency objectives are usually set (100 ms, 250 ms, 1 s, ...), and sparse in the tails.
//
// Time to first token = queue wait + prefill of the whole prompt. A short prompt on a model whose
// hot experts sit on the GPU answers in a few milliseconds (5 ms floor); prefill with CPU experts
// runs at hundreds to a few thousand tokens per second, so a long prompt (tens of thousands of
// tokens) or a full queue takes tens of seconds (60 s ceiling; slower is +Inf, an outage).
const std::vector<double> kTimeToFirstTokenBuckets = {
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0,
    1.5,   2.0,  3.0,   5.0,  7.5,   10,  15,   20,  30,  45,  60};
// Inter-token latency = one decode step of the continuous batch. Experts that are all on the GPU
// decode in ~1-10 ms; CPU experts are bounded by memory bandwidth and land at ~10-200 ms per
// token, hence the dense 10-200 ms range; a step that waits for another sequence's prefill chunk
// or for a stalled worker reaches seconds (10 s ceiling).
const std::vector<double> kInterTokenLatencyBuckets = {
    0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05,
    0.075, 0.1,    0.15,  0.2,    0.3,  0.5,   0.75, 1.0,   2.5,  5.0,  10};
// Whole request, from arrival to the last token: TTFT plus up to thousands of decode steps, so
// from tens of milliseconds (a rejected or one-token request) to tens of minutes (a long
// generation on CPU experts).
const std::vector<double> kRequestDurationBuckets = {0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10,
                                                     20,   30,  60,   120, 300, 600, 1200};

// civetweb reports why it could not bind only through its log callback, and mg_start runs on the
// thread that constructs the Exposer; create() points this at a string for the duration of that
// construction. Messages logged later on the listener's threads are left to civetweb (return 0).
thread_local std::string* t_listener_log = nullptr;

int capture_listener_log(const mg_connection* /*conn*/, const char* message) noexcept {
  if (t_listener_log == nullptr || message == nullptr) return 0;
  try {
    if (!t_listener_log->empty()) t_listener_log->append("; ");
    t_listener_log->append(message);
  } catch (...) {
    // Out of memory while keeping a log line: the bind error still reports civetweb's exception.
  }
  return 1;
}

// Picks the series for `name` among `names`, the last one ("other") when none matches.
template <typename T, size_t N>
T* pick(const std::array<std::string_view, N>& names, const std::array<T*, N>& series,
        std::string_view name) {
  for (size_t i = 0; i + 1 < N; ++i) {
    if (names[i] == name) return series[i];
  }
  return series[N - 1];
}

double clamp_unit(double fraction) {
  return std::clamp(fraction, 0.0, 1.0);
}
// A duration worth recording: finite and not negative (NaN fails both).
bool valid_duration(double seconds) {
  return std::isfinite(seconds) && seconds >= 0;
}
double non_negative(int64_t value) {
  return value < 0 ? 0.0 : static_cast<double>(value);
}

}  // namespace

ServerMetrics::ServerMetrics() : registry_(std::make_shared<prometheus::Registry>()) {
  prometheus::Registry& r = *registry_;

  auto& requests = prometheus::BuildCounter()
                       .Name("tandem_requests_total")
                       .Help("Finished requests by outcome (the finish reason or the error code).")
                       .Register(r);
  for (size_t i = 0; i < kOutcomes.size(); ++i) {
    requests_[i] = &requests.Add({{"outcome", std::string(kOutcomes[i])}});
  }
  queue_depth_ = &prometheus::BuildGauge()
                      .Name("tandem_queue_depth")
                      .Help("Requests waiting for a slot in the running batch.")
                      .Register(r)
                      .Add({});
  running_ = &prometheus::BuildGauge()
                  .Name("tandem_running_sequences")
                  .Help("Sequences in the running batch (prefilling or decoding).")
                  .Register(r)
                  .Add({});
  prompt_tokens_ = &prometheus::BuildCounter()
                        .Name("tandem_prompt_tokens_total")
                        .Help("Prompt tokens of admitted requests.")
                        .Register(r)
                        .Add({});
  generated_tokens_ = &prometheus::BuildCounter()
                           .Name("tandem_generated_tokens_total")
                           .Help("Tokens generated (sampled) for all requests.")
                           .Register(r)
                           .Add({});
  preemptions_ = &prometheus::BuildCounter()
                      .Name("tandem_preemptions_total")
                      .Help("Running sequences preempted for lack of KV blocks (recomputed later).")
                      .Register(r)
                      .Add({});
  prefix_queries_ = &prometheus::BuildCounter()
                         .Name("tandem_prefix_cache_queries_total")
                         .Help("Prompt tokens of admitted requests looked up in the prefix cache.")
                         .Register(r)
                         .Add({});
  prefix_hits_ = &prometheus::BuildCounter()
                      .Name("tandem_prefix_cache_hits_total")
                      .Help("Prompt tokens whose KV the prefix cache served (not computed).")
                      .Register(r)
                      .Add({});
  ttft_ = &prometheus::BuildHistogram()
               .Name("tandem_time_to_first_token_seconds")
               .Help("Time from a request's arrival to its first generated token.")
               .Register(r)
               .Add({}, kTimeToFirstTokenBuckets);
  itl_ = &prometheus::BuildHistogram()
              .Name("tandem_inter_token_latency_seconds")
              .Help("Time between two consecutive generated tokens of one request.")
              .Register(r)
              .Add({}, kInterTokenLatencyBuckets);
  request_duration_ = &prometheus::BuildHistogram()
                           .Name("tandem_request_duration_seconds")
                           .Help("Time from a request's arrival to its end, whatever the outcome.")
                           .Register(r)
                           .Add({}, kRequestDurationBuckets);
  kv_usage_ = &prometheus::BuildGauge()
                   .Name("tandem_kv_cache_usage_ratio")
                   .Help("Fraction of the KV cache in use (0..1).")
                   .Register(r)
                   .Add({});
  auto& kv_blocks = prometheus::BuildGauge()
                        .Name("tandem_kv_cache_blocks")
                        .Help(
                            "KV cache blocks: state=used held by sequences, state=cached kept "
                            "only by the prefix cache, state=total allocated.")
                        .Register(r);
  kv_blocks_used_ = &kv_blocks.Add({{"state", "used"}});
  kv_blocks_cached_ = &kv_blocks.Add({{"state", "cached"}});
  kv_blocks_total_ = &kv_blocks.Add({{"state", "total"}});
  auto& expert_tokens = prometheus::BuildCounter()
                            .Name("tandem_expert_tokens_total")
                            .Help("Token-expert pairs computed, by the device that computed them.")
                            .Register(r);
  auto& expert_seconds =
      prometheus::BuildCounter()
          .Name("tandem_expert_seconds_total")
          .Help("Time the expert workers spent computing, by device (cpu and gpu overlap).")
          .Register(r);
  for (size_t i = 0; i < kDevices.size(); ++i) {
    expert_tokens_[i] = &expert_tokens.Add({{"device", std::string(kDevices[i])}});
    expert_seconds_[i] = &expert_seconds.Add({{"device", std::string(kDevices[i])}});
  }
  gpu_hit_ratio_ = &prometheus::BuildGauge()
                        .Name("tandem_gpu_expert_hit_ratio")
                        .Help("Fraction of routed token-expert pairs whose expert is on the GPU.")
                        .Register(r)
                        .Add({});
  auto& gpu_memory = prometheus::BuildGauge()
                         .Name("tandem_gpu_memory_bytes")
                         .Help(
                             "GPU memory allocated at start, by part (experts, expert_scratch, "
                             "dense_weights, kv_cache, dense_scratch).")
                         .Register(r);
  for (size_t i = 0; i < kGpuMemoryParts.size(); ++i) {
    gpu_memory_[i] = &gpu_memory.Add({{"part", std::string(kGpuMemoryParts[i])}});
  }
  resident_ = &prometheus::BuildGauge()
                   .Name("process_resident_memory_bytes")
                   .Help("Resident memory of the process in bytes.")
                   .Register(r)
                   .Add({});
  auto& resident_kind =
      prometheus::BuildGauge()
          .Name("tandem_resident_memory_bytes")
          .Help("Resident memory by kind: anonymous (own memory) and file (mapped checkpoint).")
          .Register(r);
  resident_anonymous_ = &resident_kind.Add({{"kind", "anonymous"}});
  resident_file_ = &resident_kind.Add({{"kind", "file"}});
  serving_ = &prometheus::BuildGauge()
                  .Name("tandem_serving")
                  .Help("1 while the server accepts requests, 0 while starting or draining.")
                  .Register(r)
                  .Add({});
  prometheus::BuildGauge()
      .Name("tandem_build_info")
      .Help("Always 1; the labels say which build of tandemd this is.")
      .Register(r)
      .Add({{"version", build_info::kVersion}, {"revision", build_info::kGitRevision}})
      .Set(1);
}

ServerMetrics::~ServerMetrics() = default;

Result<std::unique_ptr<ServerMetrics>> ServerMetrics::create(const std::string& host, int port) {
  if (port < 0 || port > 65535) {
    return invalid_argument_error("metrics port " + std::to_string(port) + " is outside 0..65535");
  }
  std::unique_ptr<ServerMetrics> metrics;
  try {
    metrics.reset(new ServerMetrics());
  } catch (const std::exception& e) {
    return internal_error(std::string("cannot set up the metrics registry: ") + e.what());
  }
  if (port == 0) return metrics;

  // civetweb reads listening_ports as a comma-separated list: one address only.
  if (host.empty() || host.find_first_of(", \t\r\n") != std::string::npos) {
    return invalid_argument_error("metrics host '" + host +
                                  "' must be one non-empty address without ',' or spaces");
  }
  const std::string address = host + ":" + std::to_string(port);
  metrics->callbacks_ = std::make_unique<CivetCallbacks>();
  metrics->callbacks_->log_message = &capture_listener_log;
  std::string listener_log;
  t_listener_log = &listener_log;
  try {
    // Two threads serve scrapes; a client that stalls mid-request is dropped after 10 s.
    metrics->exposer_ = std::make_unique<prometheus::Exposer>(
        std::vector<std::string>{"listening_ports", address, "num_threads", "2",
                                 "request_timeout_ms", "10000"},
        metrics->callbacks_.get());
    metrics->exposer_->RegisterCollectable(metrics->registry_);
    const std::vector<int> ports = metrics->exposer_->GetListeningPorts();
    metrics->bound_port_ = ports.empty() ? port : ports.front();
  } catch (const std::exception& e) {
    t_listener_log = nullptr;
    return unavailable_error("metrics listener cannot listen on " + address + ": " +
                             (listener_log.empty() ? std::string(e.what()) : listener_log));
  }
  t_listener_log = nullptr;
  return metrics;
}

std::string ServerMetrics::text() const {
  try {
    return prometheus::TextSerializer().Serialize(registry_->Collect());
  } catch (const std::exception& e) {
    return std::string("# metrics serialization failed: ") + e.what() + "\n";
  }
}

void ServerMetrics::request_finished(std::string_view outcome) {
  pick(kOutcomes, requests_, outcome)->Increment();
}

void ServerMetrics::set_queue_depth(int64_t waiting) {
  queue_depth_->Set(non_negative(waiting));
}

void ServerMetrics::set_running(int64_t running) {
  running_->Set(non_negative(running));
}

void ServerMetrics::add_prompt_tokens(int64_t n) {
  if (n > 0) prompt_tokens_->Increment(static_cast<double>(n));
}

void ServerMetrics::add_preemptions(int64_t n) {
  if (n > 0) preemptions_->Increment(static_cast<double>(n));
}

void ServerMetrics::add_prefix_cache(int64_t queried, int64_t hit) {
  if (queried > 0) prefix_queries_->Increment(static_cast<double>(queried));
  if (hit > 0) prefix_hits_->Increment(static_cast<double>(hit));
}

void ServerMetrics::add_generated_tokens(int64_t n) {
  if (n > 0) generated_tokens_->Increment(static_cast<double>(n));
}

void ServerMetrics::observe_time_to_first_token(double seconds) {
  if (valid_duration(seconds)) ttft_->Observe(seconds);
}

void ServerMetrics::observe_inter_token_latency(double seconds) {
  if (valid_duration(seconds)) itl_->Observe(seconds);
}

void ServerMetrics::observe_request_duration(double seconds) {
  if (valid_duration(seconds)) request_duration_->Observe(seconds);
}

void ServerMetrics::set_kv_usage(double fraction) {
  if (!std::isnan(fraction)) kv_usage_->Set(clamp_unit(fraction));
}

void ServerMetrics::set_gpu_memory(const std::array<uint64_t, kGpuMemoryParts.size()>& bytes) {
  for (size_t i = 0; i < bytes.size(); ++i) gpu_memory_[i]->Set(static_cast<double>(bytes[i]));
}

void ServerMetrics::set_kv_blocks(int64_t used, int64_t cached, int64_t total) {
  kv_blocks_used_->Set(non_negative(used));
  kv_blocks_cached_->Set(non_negative(cached));
  kv_blocks_total_->Set(non_negative(total));
}

void ServerMetrics::add_expert_tokens(std::string_view device, int64_t token_expert_pairs,
                                      double seconds) {
  if (token_expert_pairs > 0) {
    pick(kDevices, expert_tokens_, device)->Increment(static_cast<double>(token_expert_pairs));
  }
  if (valid_duration(seconds)) pick(kDevices, expert_seconds_, device)->Increment(seconds);
}

void ServerMetrics::set_gpu_hit_rate(double fraction) {
  if (!std::isnan(fraction)) gpu_hit_ratio_->Set(clamp_unit(fraction));
}

void ServerMetrics::set_serving(bool serving) {
  serving_->Set(serving ? 1.0 : 0.0);
}

void ServerMetrics::set_resident_memory(const ProcessMemory& memory) {
  resident_->Set(static_cast<double>(memory.resident_bytes));
  resident_anonymous_->Set(static_cast<double>(memory.anonymous_bytes));
  resident_file_->Set(static_cast<double>(memory.file_bytes));
}

}  // namespace tandem::server
