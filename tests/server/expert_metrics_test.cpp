// Tests of ExpertMetricsExport: MoeActivity's expert pairs and seconds per device reach
// tandem_expert_tokens_total / tandem_expert_seconds_total as deltas, read back from the text.
#include "server/expert_metrics.h"
#include "tests/server/metrics_text.h"

#include <catch2/catch.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace tandem::server {
namespace {

using testing::sample;

// One MoE layer of two experts, top-1; expert 1 on the GPU.
std::unique_ptr<MoeActivity> make_activity() {
  placement::ModelIdentity m;
  m.architecture = "qwen3moe";
  m.n_layers = 1;
  m.n_experts = 2;
  m.n_experts_used = 1;
  m.hidden_size = 8;
  m.moe_layers = {true};
  m.fingerprint = "fnv1a64:00000000000000bb";
  placement::DeviceMap map({0}, 2);
  map.set_row(0, 1, placement::Device::kGpu);
  Result<std::unique_ptr<MoeActivity>> a = MoeActivity::create(m, std::nullopt, map);
  INFO(a.status().to_string());
  REQUIRE(a.ok());
  return std::move(*a);
}

// One pass of three tokens of request "r" routed to experts 0, 1, 1 (1 CPU pair, 2 GPU pairs),
// whose CPU worker took `cpu` s and GPU worker `gpu` s.
void pass(MoeActivity& activity, double cpu, double gpu) {
  experts::Routing r;
  r.k = 1;
  r.n_tokens = 3;
  r.experts = {0, 1, 1};
  r.weights = {1.0f, 1.0f, 1.0f};
  const std::string id = "r";
  const std::vector<runtime::RoutedToken> tokens(3, runtime::RoutedToken{&id, true});
  activity.on_forward(std::vector<experts::Routing>{r}, tokens);
  activity.on_expert_seconds(std::vector<double>{cpu, gpu});
}

TEST_CASE("ExpertMetricsExport adds each device's expert pairs and seconds once", "[server]") {
  Result<std::unique_ptr<ServerMetrics>> made = ServerMetrics::create("127.0.0.1", 0);
  REQUIRE(made.ok());
  ServerMetrics& metrics = **made;
  std::unique_ptr<MoeActivity> activity = make_activity();
  activity->on_started("r");
  ExpertMetricsExport exported;

  const auto check = [&](double cpu_pairs, double gpu_pairs, double cpu_s, double gpu_s) {
    const std::string text = metrics.text();
    CHECK(sample(text, "tandem_expert_tokens_total{device=\"cpu\"}") == cpu_pairs);
    CHECK(sample(text, "tandem_expert_tokens_total{device=\"gpu\"}") == gpu_pairs);
    const std::optional<double> cpu = sample(text, "tandem_expert_seconds_total{device=\"cpu\"}");
    const std::optional<double> gpu = sample(text, "tandem_expert_seconds_total{device=\"gpu\"}");
    REQUIRE(cpu.has_value());
    REQUIRE(gpu.has_value());
    CHECK(*cpu == Approx(cpu_s).margin(1e-12));
    CHECK(*gpu == Approx(gpu_s).margin(1e-12));
    CHECK(sample(text, "tandem_expert_seconds_total{device=\"other\"}") == 0);
  };

  exported.update(*activity, metrics);  // nothing yet
  check(0, 0, 0.0, 0.0);
  CHECK(sample(metrics.text(), "tandem_gpu_expert_hit_ratio") == 0);

  pass(*activity, 0.25, 0.5);
  exported.update(*activity, metrics);
  check(1, 2, 0.25, 0.5);
  const std::optional<double> ratio = sample(metrics.text(), "tandem_gpu_expert_hit_ratio");
  REQUIRE(ratio.has_value());
  CHECK(*ratio == Approx(2.0 / 3.0));

  exported.update(*activity, metrics);  // nothing new: nothing added
  check(1, 2, 0.25, 0.5);

  pass(*activity, 0.125, 0.375);
  pass(*activity, 0.5, 0.0);
  exported.update(*activity, metrics);
  check(3, 6, 0.875, 0.875);
}

}  // namespace
}  // namespace tandem::server
