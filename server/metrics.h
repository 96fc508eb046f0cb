// ServerMetrics: tandemd's Prometheus metrics (request outcomes, queue, tokens, latencies, KV
// cache, expert split) and the optional HTTP listener that serves them on GET /metrics.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/process_memory.h"
#include "base/result.h"

namespace prometheus {
class Counter;
class Exposer;
class Gauge;
class Histogram;
class Registry;
}  // namespace prometheus
struct CivetCallbacks;

namespace tandem::server {

// One per process, owned by tandemd's main. create() and the destructor run on the owning thread;
// every other method may be called from any thread at any time while the object lives (the
// scheduler thread, gRPC handler threads, the HTTP listener's own threads). The update methods
// never allocate after construction: every labelled series is created up front.
//
// Bad input is never fatal: negative counts and durations, NaN, and out-of-range fractions are
// dropped or clamped as each method says. Metric names and meanings are in docs/metrics.md.
class ServerMetrics {
 public:
  // The request outcomes counted by request_finished(); anything else counts as "other".
  // clang-format off
  static constexpr std::array<std::string_view, 11> kOutcomes = {
      "stop", "length", "abort", "deadline", "error", "invalid_argument", "resource_exhausted",
      "unavailable", "already_exists", "unauthenticated", "other"};
  // clang-format on
  // The devices counted by add_expert_tokens(); anything else counts as "other".
  static constexpr std::array<std::string_view, 3> kDevices = {"cpu", "gpu", "other"};
  // The parts of tandem_gpu_memory_bytes, in placement::GpuMemoryDemand's order.
  static constexpr std::array<std::string_view, 5> kGpuMemoryParts = {
      "experts", "expert_scratch", "dense_weights", "kv_cache", "dense_scratch"};

  // port > 0: starts an HTTP listener on host:port serving GET /metrics (Prometheus text format),
  // with its own two threads. host is an IPv4 address or a host name ("0.0.0.0" = every
  // interface). port == 0: no listener (metrics are still counted; text() still works).
  // INVALID_ARGUMENT for a port outside 0..65535 or an empty host or one with ',' or spaces;
  // UNAVAILABLE naming host:port and the reason when it cannot bind. Never throws.
  static Result<std::unique_ptr<ServerMetrics>> create(const std::string& host, int port);

  ServerMetrics(const ServerMetrics&) = delete;
  ServerMetrics& operator=(const ServerMetrics&) = delete;
  // Stops the listener (waits for an in-flight scrape), then frees the metrics.
  ~ServerMetrics();

  // The port the listener is bound to; 0 without a listener.
  int bound_port() const { return bound_port_; }
  // The current exposition text, as GET /metrics returns it.
  std::string text() const;

  // tandem_requests_total{outcome}: one finished request. Unknown outcomes count as "other".
  void request_finished(std::string_view outcome);
  // tandem_queue_depth / tandem_running_sequences; negative values are stored as 0.
  void set_queue_depth(int64_t waiting);
  void set_running(int64_t running);
  // tandem_prompt_tokens_total / tandem_generated_tokens_total; n <= 0 is ignored.
  void add_prompt_tokens(int64_t n);
  void add_generated_tokens(int64_t n);
  // tandem_preemptions_total; n <= 0 is ignored.
  void add_preemptions(int64_t n);
  // tandem_prefix_cache_queries_total / tandem_prefix_cache_hits_total: prompt tokens looked up in
  // the prefix cache at admission, and of them the ones served from it; n <= 0 is ignored.
  void add_prefix_cache(int64_t queried, int64_t hit);
  // Histograms in seconds; negative, infinite and NaN values are ignored.
  void observe_time_to_first_token(double seconds);
  void observe_inter_token_latency(double seconds);
  void observe_request_duration(double seconds);
  // tandem_kv_cache_usage_ratio, clamped to 0..1; NaN is ignored.
  void set_kv_usage(double fraction);
  // tandem_kv_cache_blocks{state="used"|"cached"|"total"}: held by sequences, kept only by the
  // prefix cache (reusable, evicted when needed), all; negative values are stored as 0.
  void set_kv_blocks(int64_t used, int64_t cached, int64_t total);
  // tandem_expert_tokens_total{device} and tandem_expert_seconds_total{device}: token-expert
  // pairs computed on a device and the time its worker spent on them. device is "cpu" or "gpu";
  // anything else counts as "other". A negative count, or negative/infinite/NaN seconds, is
  // ignored (each on its own).
  void add_expert_tokens(std::string_view device, int64_t token_expert_pairs, double seconds);
  // tandem_gpu_expert_hit_ratio, clamped to 0..1; NaN is ignored.
  void set_gpu_hit_rate(double fraction);
  // tandem_gpu_memory_bytes{part}: device bytes tandemd allocated at start, by part (indexed as
  // kGpuMemoryParts); all 0 when nothing runs on the GPU. Set once after start-up.
  void set_gpu_memory(const std::array<uint64_t, kGpuMemoryParts.size()>& bytes);
  // tandem_serving: 1 while the server accepts requests, 0 before start-up ends and while it
  // drains.
  void set_serving(bool serving);
  // process_resident_memory_bytes (the Prometheus name) and tandem_resident_memory_bytes{kind}:
  // kind "anonymous" (the process's own memory: repacked weights, KV cache, heap) and "file"
  // (mapped checkpoint pages).
  void set_resident_memory(const ProcessMemory& memory);

 private:
  ServerMetrics();

  // Declared first so that it is destroyed last, after the listener that reads it.
  std::shared_ptr<prometheus::Registry> registry_;
  // Owned by registry_; set once in the constructor.
  std::array<prometheus::Counter*, kOutcomes.size()> requests_{};
  prometheus::Gauge* queue_depth_ = nullptr;
  prometheus::Gauge* running_ = nullptr;
  prometheus::Counter* prompt_tokens_ = nullptr;
  prometheus::Counter* generated_tokens_ = nullptr;
  prometheus::Counter* preemptions_ = nullptr;
  prometheus::Counter* prefix_queries_ = nullptr;
  prometheus::Counter* prefix_hits_ = nullptr;
  prometheus::Histogram* ttft_ = nullptr;
  prometheus::Histogram* itl_ = nullptr;
  prometheus::Histogram* request_duration_ = nullptr;
  prometheus::Gauge* kv_usage_ = nullptr;
  prometheus::Gauge* kv_blocks_used_ = nullptr;
  prometheus::Gauge* kv_blocks_cached_ = nullptr;
  prometheus::Gauge* kv_blocks_total_ = nullptr;
  std::array<prometheus::Counter*, kDevices.size()> expert_tokens_{};
  std::array<prometheus::Counter*, kDevices.size()> expert_seconds_{};
  prometheus::Gauge* gpu_hit_ratio_ = nullptr;
  std::array<prometheus::Gauge*, kGpuMemoryParts.size()> gpu_memory_{};
  prometheus::Gauge* serving_ = nullptr;
  prometheus::Gauge* resident_ = nullptr;
  prometheus::Gauge* resident_anonymous_ = nullptr;
  prometheus::Gauge* resident_file_ = nullptr;

  std::unique_ptr<CivetCallbacks> callbacks_;
  // Declared last so that it is destroyed first: no scrape runs while the metrics go away.
  std::unique_ptr<prometheus::Exposer> exposer_;
  int bound_port_ = 0;
};

}  // namespace tandem::server
