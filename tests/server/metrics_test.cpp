// Tests of ServerMetrics: every metric in the Prometheus text format, bad input, threads, and the
// /metrics listener fetched over a raw HTTP/1.1 socket.
#include "server/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tandem/build_info.h"
#include "tests/server/metrics_text.h"

namespace tandem::server {
namespace {

using testing::sample;

std::unique_ptr<ServerMetrics> make_metrics(const std::string& host, int port) {
  Result<std::unique_ptr<ServerMetrics>> created = ServerMetrics::create(host, port);
  INFO(created.status().to_string());
  REQUIRE(created.ok());
  return std::move(created).value();
}

// A port on 127.0.0.1 that nobody listens on right now (the kernel's pick for port 0).
int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  socklen_t len = sizeof(addr);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  ::close(fd);
  return ntohs(addr.sin_port);
}

struct HttpResponse {
  int status = 0;
  std::string headers;
  std::string body;
};

// GET `path` from 127.0.0.1:port with HTTP/1.1 and Connection: close; reads to EOF.
HttpResponse http_get(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  timeval timeout{};
  timeout.tv_sec = 30;  // Only so that a broken listener fails the test instead of hanging it.
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  const std::string request =
      "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  REQUIRE(::send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size()));
  std::string raw;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    raw.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  HttpResponse response;
  const size_t end_of_headers = raw.find("\r\n\r\n");
  REQUIRE(end_of_headers != std::string::npos);
  response.headers = raw.substr(0, end_of_headers);
  response.body = raw.substr(end_of_headers + 4);
  // "HTTP/1.1 200 OK"
  REQUIRE(raw.compare(0, 5, "HTTP/") == 0);
  response.status = std::stoi(raw.substr(raw.find(' ') + 1, 3));
  return response;
}

TEST_CASE("a new ServerMetrics exposes every metric at its starting value", "[server][metrics]") {
  auto metrics = make_metrics("127.0.0.1", 0);
  CHECK(metrics->bound_port() == 0);
  const std::string text = metrics->text();
  for (std::string_view outcome : ServerMetrics::kOutcomes) {
    CHECK(sample(text, "tandem_requests_total{outcome=\"" + std::string(outcome) + "\"}") == 0);
  }
  for (const char* series : {"tandem_queue_depth",
                             "tandem_running_sequences",
                             "tandem_prompt_tokens_total",
                             "tandem_generated_tokens_total",
                             "tandem_time_to_first_token_seconds_count",
                             "tandem_inter_token_latency_seconds_count",
                             "tandem_request_duration_seconds_count",
                             "tandem_kv_cache_usage_ratio",
                             "tandem_kv_cache_blocks{state=\"used\"}",
                             "tandem_kv_cache_blocks{state=\"cached\"}",
                             "tandem_prefix_cache_queries_total",
                             "tandem_prefix_cache_hits_total",
                             "tandem_kv_cache_blocks{state=\"total\"}",
                             "tandem_expert_tokens_total{device=\"cpu\"}",
                             "tandem_expert_tokens_total{device=\"gpu\"}",
                             "tandem_expert_seconds_total{device=\"cpu\"}",
                             "tandem_expert_seconds_total{device=\"gpu\"}",
                             "tandem_gpu_expert_hit_ratio",
                             "tandem_gpu_memory_bytes{part=\"experts\"}",
                             "tandem_gpu_memory_bytes{part=\"kv_cache\"}",
                             "process_resident_memory_bytes",
                             "tandem_resident_memory_bytes{kind=\"anonymous\"}",
                             "tandem_resident_memory_bytes{kind=\"file\"}",
                             "tandem_serving"}) {
    INFO(series);
    CHECK(sample(text, series) == 0);
  }
  // The exposition format's type lines.
  CHECK(text.find("# TYPE tandem_requests_total counter\n") != std::string::npos);
  CHECK(text.find("# TYPE tandem_queue_depth gauge\n") != std::string::npos);
  CHECK(text.find("# TYPE tandem_time_to_first_token_seconds histogram\n") != std::string::npos);
  CHECK(sample(text, std::string("tandem_build_info{revision=\"") + build_info::kGitRevision +
                         "\",version=\"" + build_info::kVersion + "\"}") == 1);
}

TEST_CASE("every update shows in the text", "[server][metrics]") {
  auto metrics = make_metrics("127.0.0.1", 0);
  metrics->request_finished("stop");
  metrics->request_finished("stop");
  metrics->request_finished("length");
  metrics->request_finished("resource_exhausted");
  metrics->request_finished("unauthenticated");
  metrics->set_queue_depth(7);
  metrics->set_running(3);
  metrics->add_prompt_tokens(120);
  metrics->add_prompt_tokens(5);
  metrics->add_generated_tokens(42);
  metrics->add_preemptions(2);
  metrics->add_preemptions(-1);  // ignored
  metrics->add_preemptions(1);
  metrics->observe_time_to_first_token(0.004);  // le 0.005
  metrics->observe_time_to_first_token(0.1);    // le 0.1 (bounds are inclusive)
  metrics->observe_time_to_first_token(0.12);   // le 0.15
  metrics->observe_time_to_first_token(75);     // +Inf only
  metrics->observe_inter_token_latency(0.0005);
  metrics->observe_inter_token_latency(0.033);
  metrics->observe_request_duration(2.0);
  metrics->set_kv_usage(0.375);
  metrics->set_kv_blocks(96, 40, 256);
  metrics->add_prefix_cache(1000, 640);
  metrics->add_prefix_cache(24, 0);
  metrics->add_expert_tokens("cpu", 1000, 0.5);
  metrics->add_expert_tokens("gpu", 3000, 0.25);
  metrics->add_expert_tokens("cpu", 24, 0.25);
  metrics->set_gpu_hit_rate(0.75);
  metrics->set_gpu_memory({3ull << 30, 64ull << 20, 512ull << 20, 1ull << 30, 0});
  metrics->set_serving(true);
  metrics->set_resident_memory(
      {.resident_bytes = 3ull << 30, .anonymous_bytes = 2ull << 30, .file_bytes = 1ull << 30});

  const std::string text = metrics->text();
  CHECK(sample(text, "tandem_requests_total{outcome=\"stop\"}") == 2);
  CHECK(sample(text, "tandem_requests_total{outcome=\"length\"}") == 1);
  CHECK(sample(text, "tandem_requests_total{outcome=\"resource_exhausted\"}") == 1);
  CHECK(sample(text, "tandem_requests_total{outcome=\"unauthenticated\"}") == 1);
  CHECK(sample(text, "tandem_requests_total{outcome=\"abort\"}") == 0);
  CHECK(sample(text, "tandem_preemptions_total") == 3);
  CHECK(sample(text, "tandem_requests_total{outcome=\"other\"}") == 0);
  CHECK(sample(text, "tandem_queue_depth") == 7);
  CHECK(sample(text, "tandem_running_sequences") == 3);
  CHECK(sample(text, "tandem_prompt_tokens_total") == 125);
  CHECK(sample(text, "tandem_generated_tokens_total") == 42);

  CHECK(sample(text, "tandem_time_to_first_token_seconds_count") == 4);
  CHECK(sample(text, "tandem_time_to_first_token_seconds_sum") == Approx(75.224));
  CHECK(sample(text, "tandem_time_to_first_token_seconds_bucket{le=\"0.005\"}") == 1);
  CHECK(sample(text, "tandem_time_to_first_token_seconds_bucket{le=\"0.1\"}") == 2);
  CHECK(sample(text, "tandem_time_to_first_token_seconds_bucket{le=\"0.15\"}") == 3);
  CHECK(sample(text, "tandem_time_to_first_token_seconds_bucket{le=\"60\"}") == 3);
  CHECK(sample(text, "tandem_time_to_first_token_seconds_bucket{le=\"+Inf\"}") == 4);
  CHECK(sample(text, "tandem_inter_token_latency_seconds_bucket{le=\"0.001\"}") == 1);
  CHECK(sample(text, "tandem_inter_token_latency_seconds_bucket{le=\"0.03\"}") == 1);
  CHECK(sample(text, "tandem_inter_token_latency_seconds_bucket{le=\"0.04\"}") == 2);
  CHECK(sample(text, "tandem_inter_token_latency_seconds_bucket{le=\"10\"}") == 2);
  CHECK(sample(text, "tandem_inter_token_latency_seconds_count") == 2);
  CHECK(sample(text, "tandem_request_duration_seconds_bucket{le=\"1\"}") == 0);
  CHECK(sample(text, "tandem_request_duration_seconds_bucket{le=\"2.5\"}") == 1);
  CHECK(sample(text, "tandem_request_duration_seconds_sum") == 2.0);

  CHECK(sample(text, "tandem_kv_cache_usage_ratio") == 0.375);
  CHECK(sample(text, "tandem_kv_cache_blocks{state=\"used\"}") == 96);
  CHECK(sample(text, "tandem_kv_cache_blocks{state=\"cached\"}") == 40);
  CHECK(sample(text, "tandem_prefix_cache_queries_total") == 1024);
  CHECK(sample(text, "tandem_prefix_cache_hits_total") == 640);
  CHECK(sample(text, "tandem_kv_cache_blocks{state=\"total\"}") == 256);
  CHECK(sample(text, "tandem_gpu_memory_bytes{part=\"experts\"}") == 3.0 * (1 << 30));
  CHECK(sample(text, "tandem_gpu_memory_bytes{part=\"expert_scratch\"}") == 64.0 * (1 << 20));
  CHECK(sample(text, "tandem_gpu_memory_bytes{part=\"dense_weights\"}") == 512.0 * (1 << 20));
  CHECK(sample(text, "tandem_gpu_memory_bytes{part=\"kv_cache\"}") == 1.0 * (1 << 30));
  CHECK(sample(text, "tandem_gpu_memory_bytes{part=\"dense_scratch\"}") == 0);
  CHECK(sample(text, "tandem_expert_tokens_total{device=\"cpu\"}") == 1024);
  CHECK(sample(text, "tandem_expert_tokens_total{device=\"gpu\"}") == 3000);
  CHECK(sample(text, "tandem_expert_seconds_total{device=\"cpu\"}") == 0.75);
  CHECK(sample(text, "tandem_expert_seconds_total{device=\"gpu\"}") == 0.25);
  CHECK(sample(text, "tandem_gpu_expert_hit_ratio") == 0.75);
  CHECK(sample(text, "tandem_serving") == 1);
  CHECK(sample(text, "process_resident_memory_bytes") == 3.0 * (1 << 30));
  CHECK(sample(text, "tandem_resident_memory_bytes{kind=\"anonymous\"}") == 2.0 * (1 << 30));
  CHECK(sample(text, "tandem_resident_memory_bytes{kind=\"file\"}") == 1.0 * (1 << 30));

  metrics->set_serving(false);
  metrics->set_queue_depth(0);
  const std::string later = metrics->text();
  CHECK(sample(later, "tandem_serving") == 0);
  CHECK(sample(later, "tandem_queue_depth") == 0);
}

TEST_CASE("the histogram buckets span the documented ranges", "[server][metrics]") {
  auto metrics = make_metrics("127.0.0.1", 0);
  const std::string text = metrics->text();
  // TTFT: 5 ms .. 60 s; ITL: 1 ms .. 10 s; nothing outside.
  CHECK(sample(text, "tandem_time_to_first_token_seconds_bucket{le=\"0.005\"}").has_value());
  CHECK(sample(text, "tandem_time_to_first_token_seconds_bucket{le=\"60\"}").has_value());
  CHECK(text.find("tandem_time_to_first_token_seconds_bucket{le=\"0.001\"}") == std::string::npos);
  CHECK(sample(text, "tandem_inter_token_latency_seconds_bucket{le=\"0.001\"}").has_value());
  CHECK(sample(text, "tandem_inter_token_latency_seconds_bucket{le=\"10\"}").has_value());
  CHECK(text.find("tandem_inter_token_latency_seconds_bucket{le=\"60\"}") == std::string::npos);
}

TEST_CASE("bad values are dropped or clamped, unknown labels count as other", "[server][metrics]") {
  auto metrics = make_metrics("127.0.0.1", 0);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  metrics->request_finished("no_such_outcome");
  metrics->request_finished("");
  metrics->request_finished("STOP");  // Case matters.
  metrics->add_prompt_tokens(-5);
  metrics->add_generated_tokens(0);
  metrics->set_queue_depth(-3);
  metrics->set_running(-1);
  metrics->observe_time_to_first_token(-1.0);
  metrics->observe_time_to_first_token(nan);
  metrics->observe_inter_token_latency(inf);
  metrics->observe_request_duration(nan);
  metrics->set_kv_blocks(-1, -3, -2);
  metrics->add_prefix_cache(-5, -1);
  metrics->add_expert_tokens("tpu", 10, 1.5);
  metrics->add_expert_tokens("cpu", -10, nan);
  metrics->add_expert_tokens("gpu", 5, -1.0);  // The count stays, the bad seconds go.

  std::string text = metrics->text();
  CHECK(sample(text, "tandem_requests_total{outcome=\"other\"}") == 3);
  CHECK(sample(text, "tandem_requests_total{outcome=\"stop\"}") == 0);
  CHECK(sample(text, "tandem_prompt_tokens_total") == 0);
  CHECK(sample(text, "tandem_generated_tokens_total") == 0);
  CHECK(sample(text, "tandem_queue_depth") == 0);
  CHECK(sample(text, "tandem_running_sequences") == 0);
  CHECK(sample(text, "tandem_time_to_first_token_seconds_count") == 0);
  CHECK(sample(text, "tandem_inter_token_latency_seconds_count") == 0);
  CHECK(sample(text, "tandem_request_duration_seconds_count") == 0);
  CHECK(sample(text, "tandem_kv_cache_blocks{state=\"used\"}") == 0);
  CHECK(sample(text, "tandem_kv_cache_blocks{state=\"cached\"}") == 0);
  CHECK(sample(text, "tandem_prefix_cache_queries_total") == 0);
  CHECK(sample(text, "tandem_prefix_cache_hits_total") == 0);
  CHECK(sample(text, "tandem_kv_cache_blocks{state=\"total\"}") == 0);
  CHECK(sample(text, "tandem_expert_tokens_total{device=\"other\"}") == 10);
  CHECK(sample(text, "tandem_expert_seconds_total{device=\"other\"}") == 1.5);
  CHECK(sample(text, "tandem_expert_tokens_total{device=\"cpu\"}") == 0);
  CHECK(sample(text, "tandem_expert_seconds_total{device=\"cpu\"}") == 0);
  CHECK(sample(text, "tandem_expert_tokens_total{device=\"gpu\"}") == 5);
  CHECK(sample(text, "tandem_expert_seconds_total{device=\"gpu\"}") == 0);

  metrics->set_kv_usage(1.5);
  metrics->set_gpu_hit_rate(-0.25);
  text = metrics->text();
  CHECK(sample(text, "tandem_kv_cache_usage_ratio") == 1);
  CHECK(sample(text, "tandem_gpu_expert_hit_ratio") == 0);
  metrics->set_kv_usage(0.5);
  metrics->set_kv_usage(nan);  // Keeps the last good value.
  metrics->set_gpu_hit_rate(0.5);
  metrics->set_gpu_hit_rate(nan);
  text = metrics->text();
  CHECK(sample(text, "tandem_kv_cache_usage_ratio") == 0.5);
  CHECK(sample(text, "tandem_gpu_expert_hit_ratio") == 0.5);
}

TEST_CASE("updates from many threads are all counted", "[server][metrics]") {
  auto metrics = make_metrics("127.0.0.1", 0);
  constexpr int kThreads = 8;
  constexpr int kPerThread = 5000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&metrics, t] {
      for (int i = 0; i < kPerThread; ++i) {
        metrics->request_finished(t % 2 == 0 ? "stop" : "abort");
        metrics->add_generated_tokens(1);
        metrics->add_expert_tokens(t % 2 == 0 ? "cpu" : "gpu", 2, 0.0);
        metrics->observe_inter_token_latency(0.02);
        if (i % 1000 == 0) (void)metrics->text();  // Scrapes race with updates.
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  const std::string text = metrics->text();
  CHECK(sample(text, "tandem_requests_total{outcome=\"stop\"}") == kThreads / 2 * kPerThread);
  CHECK(sample(text, "tandem_requests_total{outcome=\"abort\"}") == kThreads / 2 * kPerThread);
  CHECK(sample(text, "tandem_generated_tokens_total") == kThreads * kPerThread);
  CHECK(sample(text, "tandem_expert_tokens_total{device=\"cpu\"}") == kThreads * kPerThread);
  CHECK(sample(text, "tandem_inter_token_latency_seconds_count") == kThreads * kPerThread);
  CHECK(sample(text, "tandem_inter_token_latency_seconds_bucket{le=\"0.015\"}") == 0);
  CHECK(sample(text, "tandem_inter_token_latency_seconds_bucket{le=\"0.02\"}") ==
        kThreads * kPerThread);
}

TEST_CASE("the listener serves GET /metrics in the Prometheus text format", "[server][metrics]") {
  const int port = free_loopback_port();
  auto metrics = make_metrics("127.0.0.1", port);
  CHECK(metrics->bound_port() == port);
  metrics->request_finished("deadline");
  metrics->add_prompt_tokens(17);
  metrics->set_kv_blocks(3, 1, 64);
  metrics->set_serving(true);

  const HttpResponse response = http_get(port, "/metrics");
  CHECK(response.status == 200);
  // The text exposition format is served as text/plain (prometheus-cpp 1.0 sends no version=,
  // which Prometheus reads as the text format).
  CHECK(response.headers.find("Content-Type: text/plain") != std::string::npos);
  // prometheus-cpp adds its own scrape counters to every endpoint (docs/metrics.md).
  CHECK(sample(response.body, "exposer_scrapes_total").has_value());
  CHECK(sample(response.body, "tandem_requests_total{outcome=\"deadline\"}") == 1);
  CHECK(sample(response.body, "tandem_prompt_tokens_total") == 17);
  CHECK(sample(response.body, "tandem_kv_cache_blocks{state=\"total\"}") == 64);
  CHECK(sample(response.body, "tandem_serving") == 1);

  // A later scrape sees later updates.
  metrics->add_prompt_tokens(3);
  CHECK(sample(http_get(port, "/metrics").body, "tandem_prompt_tokens_total") == 20);
  CHECK(http_get(port, "/other").status == 404);
}

TEST_CASE("a second listener on a taken port fails UNAVAILABLE naming the address",
          "[server][metrics]") {
  const int port = free_loopback_port();
  auto first = make_metrics("127.0.0.1", port);
  const std::string address = "127.0.0.1:" + std::to_string(port);

  Result<std::unique_ptr<ServerMetrics>> second = ServerMetrics::create("127.0.0.1", port);
  REQUIRE_FALSE(second.ok());
  CHECK(second.status().code() == StatusCode::kUnavailable);
  INFO(second.status().message());
  CHECK(second.status().message().find(address) != std::string::npos);
  CHECK(second.status().message().find("in use") != std::string::npos);  // civetweb's reason.
  // The first listener still answers.
  CHECK(http_get(port, "/metrics").status == 200);

  // Destroying the first frees the port.
  first.reset();
  auto third = make_metrics("127.0.0.1", port);
  CHECK(third->bound_port() == port);
}

TEST_CASE("bad listener arguments are errors, not aborts", "[server][metrics]") {
  Result<std::unique_ptr<ServerMetrics>> negative = ServerMetrics::create("127.0.0.1", -1);
  REQUIRE_FALSE(negative.ok());
  CHECK(negative.status().code() == StatusCode::kInvalidArgument);
  Result<std::unique_ptr<ServerMetrics>> huge = ServerMetrics::create("127.0.0.1", 65536);
  REQUIRE_FALSE(huge.ok());
  CHECK(huge.status().code() == StatusCode::kInvalidArgument);
  for (const char* host : {"", "127.0.0.1,8080", "127.0.0.1 "}) {
    INFO(host);
    Result<std::unique_ptr<ServerMetrics>> bad = ServerMetrics::create(host, 9);
    REQUIRE_FALSE(bad.ok());
    CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  }
  // With port 0 the host is not used at all.
  CHECK(ServerMetrics::create("", 0).ok());
}

}  // namespace
}  // namespace tandem::server
