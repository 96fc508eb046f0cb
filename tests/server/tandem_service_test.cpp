// Tests of TandemService over a real in-process gRPC server on 127.0.0.1, called with the
// generated stub: the demo model's placement (its shipped statistics file, recorded by `tandem
// profile`), live and merged statistics, confined dumps, per-request counters, auth and state.
#include "server/tandem_service.h"

#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "base/check.h"
#include "engine/model/checkpoint.h"
#include "engine/placement/placement_startup.h"
#include "engine/placement/stats_file.h"
#include "tests/server/raw_call.h"

namespace tandem::server {
namespace {

namespace fs = std::filesystem;
namespace v1 = tandem::v1;

const std::string kStatsFile =
    std::string(TANDEM_SOURCE_DIR) + "/models/demo/activation-stats.json";

// The demo model and its placement from the shipped statistics with 16 GPU experts, planned once
// (the plan only: no device is needed to report it).
struct DemoModel {
  model::Checkpoint checkpoint;
  placement::StartupPlacement placement;
};

const DemoModel& demo_model() {
  static const DemoModel model = [] {
    Result<model::Checkpoint> checkpoint =
        model::open_model(std::string(TANDEM_SOURCE_DIR) + "/models/demo/demo-moe-q8_0.gguf");
    TANDEM_CHECK(checkpoint.ok());
    Result<placement::StartupPlacement> planned =
        placement::plan_startup_placement({.policy = placement::PlacementPolicy::kFrequency,
                                           .num_gpu_experts = 16,
                                           .stats_path = kStatsFile},
                                          *checkpoint);
    TANDEM_CHECK(planned.ok());
    return DemoModel{std::move(*checkpoint), std::move(*planned)};
  }();
  return model;
}

// The statistics file's counts, read here with nlohmann::json rather than load_stats.
std::vector<std::vector<uint64_t>> file_counts() {
  std::ifstream in(kStatsFile);
  const nlohmann::json j = nlohmann::json::parse(in);
  return j.at("counts").get<std::vector<std::vector<uint64_t>>>();
}

// A scratch directory tree: root/ (the statistics directory) and outside/.
struct ScratchDirs {
  fs::path base;
  fs::path root;
  fs::path outside;
  ScratchDirs() {
    base = fs::temp_directory_path() /
           ("tandem-v1-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    root = base / "stats";
    outside = base / "outside";
    fs::create_directories(root);
    fs::create_directories(outside);
  }
  ~ScratchDirs() {
    std::error_code ec;
    fs::remove_all(base, ec);
  }
  static int& counter() {
    static int n = 0;
    return n;
  }
};

// TandemService on 127.0.0.1:<free port>, over the demo model's placement.
class TestServer {
 public:
  explicit TestServer(std::string stats_output_path, std::vector<std::string> api_keys = {},
                      TandemServiceOptions options = {})
      : activity_(make_activity()) {
    context_.auth.keys = std::move(api_keys);
    context_.placement = &demo_model().placement;
    context_.moe_activity = activity_.get();
    context_.set_state(ServingState::kServing);
    service_ =
        std::make_unique<TandemService>(context_, std::move(stats_output_path), std::move(options));
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    TANDEM_CHECK(server_ != nullptr && port > 0);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                   grpc::InsecureChannelCredentials());
    stub_ = v1::Tandem::NewStub(channel_);
  }
  ~TestServer() { server_->Shutdown(); }

  v1::Tandem::Stub& stub() { return *stub_; }
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }
  MoeActivity& activity() { return *activity_; }
  ServingContext& context() { return context_; }

 private:
  static std::unique_ptr<MoeActivity> make_activity() {
    const placement::StartupPlacement& p = demo_model().placement;
    Result<std::unique_ptr<MoeActivity>> a =
        MoeActivity::create(p.stats->model(), p.stats, p.placement.map);
    TANDEM_CHECK(a.ok());
    return std::move(*a);
  }

  ServingContext context_;
  std::unique_ptr<MoeActivity> activity_;
  std::unique_ptr<TandemService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Tandem::Stub> stub_;
};

// One forward pass of two tokens of `id` (prefill) through the demo model's 4 MoE layers: token
// 0 picks experts {0, 1}, token 1 picks {2, 3} in every layer.
void feed(MoeActivity& activity, const std::string& id) {
  std::vector<experts::Routing> routing(4);
  for (experts::Routing& r : routing) {
    r.n_tokens = 2;
    r.k = 2;
    r.experts = {0, 1, 2, 3};
    r.weights = {0.5f, 0.5f, 0.5f, 0.5f};
  }
  const std::vector<runtime::RoutedToken> tokens = {{&id, true}, {&id, true}};
  activity.on_forward(routing, tokens);
}

TEST_CASE("GetPlacement reports the demo model's startup placement", "[server][grpc]") {
  TestServer server("", {}, TandemServiceOptions{kStatsFile});
  grpc::ClientContext ctx;
  v1::GetPlacementResponse r;
  REQUIRE(server.stub().GetPlacement(&ctx, v1::GetPlacementRequest(), &r).ok());
  CHECK(r.policy() == v1::PLACEMENT_POLICY_FREQUENCY);
  CHECK_FALSE(r.fell_back_to_uniform());
  CHECK(r.num_gpu_experts() == 16);
  CHECK(r.num_moe_layers() == 4);
  CHECK(r.num_experts_per_layer() == 16);
  CHECK(r.experts_per_token() == 2);
  CHECK(r.gpu_budget_bytes() == 0);
  // `tandem plan --stats models/demo/activation-stats.json --num-gpu-experts 16` reports 66.01%.
  CHECK(r.coverage() == Approx(0.6601).margin(5e-5));
  CHECK(r.statistics_path() == kStatsFile);
  CHECK(r.statistics_tokens() == 51525);  // the file's "tokens"
  CHECK(r.gpu_device().empty());
  // All experts have one size: the GPU holds 16 of the 64 that the CPU holds.
  CHECK(r.gpu_expert_bytes() > 0);
  CHECK(r.cpu_expert_bytes() == 4 * r.gpu_expert_bytes());

  const std::vector<std::vector<uint64_t>> counts = file_counts();
  REQUIRE(r.layers_size() == 4);
  uint32_t total_gpu = 0;
  uint64_t all = 0;
  uint64_t covered = 0;
  for (int i = 0; i < r.layers_size(); ++i) {
    const v1::LayerPlacement& layer = r.layers(i);
    CHECK(layer.layer() == static_cast<uint32_t>(i));
    const std::vector<uint32_t> ids(layer.gpu_expert_ids().begin(), layer.gpu_expert_ids().end());
    CHECK(std::is_sorted(ids.begin(), ids.end()));
    total_gpu += static_cast<uint32_t>(ids.size());
    // The layer's coverage is its GPU experts' share of the file's counts for that layer.
    uint64_t layer_all = 0;
    uint64_t layer_gpu = 0;
    for (uint64_t c : counts[i]) layer_all += c;
    for (uint32_t e : ids) layer_gpu += counts[i][e];
    CHECK(layer.coverage() == Approx(static_cast<double>(layer_gpu) / layer_all));
    CHECK(layer.gpu_bytes() * 16 == r.gpu_expert_bytes() * ids.size());
    all += layer_all;
    covered += layer_gpu;
  }
  CHECK(total_gpu == 16);
  CHECK(r.coverage() == Approx(static_cast<double>(covered) / all));
  // frequency: the 16 largest counts of the file; its smallest GPU count is at least the
  // largest CPU count.
  uint64_t min_gpu = UINT64_MAX;
  uint64_t max_cpu = 0;
  for (int i = 0; i < 4; ++i) {
    for (uint32_t e = 0; e < 16; ++e) {
      const bool gpu =
          std::find(r.layers(i).gpu_expert_ids().begin(), r.layers(i).gpu_expert_ids().end(), e) !=
          r.layers(i).gpu_expert_ids().end();
      if (gpu) min_gpu = std::min(min_gpu, counts[i][e]);
      if (!gpu) max_cpu = std::max(max_cpu, counts[i][e]);
    }
  }
  CHECK(min_gpu >= max_cpu);

  TestServer with_gpu("");
  with_gpu.context().gpu_device = "cuda:0";
  grpc::ClientContext ctx2;
  v1::GetPlacementResponse r2;
  REQUIRE(with_gpu.stub().GetPlacement(&ctx2, v1::GetPlacementRequest(), &r2).ok());
  CHECK(r2.gpu_device() == "cuda:0");
}

TEST_CASE("GetActivationStats reports live and merged counts, filtered by layer",
          "[server][grpc]") {
  TestServer server("");
  feed(server.activity(), "r1");
  const std::vector<std::vector<uint64_t>> counts = file_counts();

  grpc::ClientContext ctx;
  v1::GetActivationStatsResponse live;
  REQUIRE(server.stub().GetActivationStats(&ctx, v1::GetActivationStatsRequest(), &live).ok());
  CHECK(live.scope() == v1::STATS_SCOPE_LIVE);
  CHECK(live.tokens() == 2);
  CHECK(live.num_experts_per_layer() == 16);
  CHECK(live.model_fingerprint() == "fnv1a64:2b183d92c953566c");  // the file's
  REQUIRE(live.layers_size() == 4);
  for (const v1::LayerActivations& layer : live.layers()) {
    REQUIRE(layer.counts_size() == 16);
    for (int e = 0; e < 16; ++e) CHECK(layer.counts(e) == (e < 4 ? 1u : 0u));
  }

  v1::GetActivationStatsRequest merged_req;
  merged_req.set_scope(v1::STATS_SCOPE_MERGED);
  merged_req.add_layers(3);
  merged_req.add_layers(1);
  merged_req.add_layers(3);
  grpc::ClientContext ctx2;
  v1::GetActivationStatsResponse merged;
  REQUIRE(server.stub().GetActivationStats(&ctx2, merged_req, &merged).ok());
  CHECK(merged.scope() == v1::STATS_SCOPE_MERGED);
  CHECK(merged.tokens() == 51525 + 2);
  REQUIRE(merged.layers_size() == 2);
  CHECK(merged.layers(0).layer() == 1);
  CHECK(merged.layers(1).layer() == 3);
  for (int i = 0; i < 2; ++i) {
    const auto layer = static_cast<size_t>(merged.layers(i).layer());
    for (int e = 0; e < 16; ++e) {
      CHECK(merged.layers(i).counts(e) == counts[layer][e] + (e < 4 ? 1u : 0u));
    }
  }

  v1::GetActivationStatsRequest bad_layer;
  bad_layer.add_layers(0);
  bad_layer.add_layers(4);
  grpc::ClientContext ctx3;
  v1::GetActivationStatsResponse ignored;
  const grpc::Status not_moe = server.stub().GetActivationStats(&ctx3, bad_layer, &ignored);
  CHECK(not_moe.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_THAT(not_moe.error_message(), Catch::Contains("layers: 4 is not a MoE layer"));

  v1::GetActivationStatsRequest bad_scope;
  bad_scope.set_scope(static_cast<v1::StatsScope>(9));
  grpc::ClientContext ctx4;
  const grpc::Status scope = server.stub().GetActivationStats(&ctx4, bad_scope, &ignored);
  CHECK(scope.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_THAT(scope.error_message(), Catch::Contains("scope"));
}

grpc::Status dump(TestServer& server, const std::string& path, v1::DumpActivationStatsResponse* r,
                  v1::StatsScope scope = v1::STATS_SCOPE_UNSPECIFIED) {
  v1::DumpActivationStatsRequest req;
  req.set_path(path);
  req.set_scope(scope);
  grpc::ClientContext ctx;
  return server.stub().DumpActivationStats(&ctx, req, r);
}

TEST_CASE("DumpActivationStats writes inside the statistics directory only", "[server][grpc]") {
  ScratchDirs dirs;
  const fs::path configured = dirs.root / "out.json";
  TestServer server(configured.string());
  feed(server.activity(), "r1");
  const fs::path root = fs::canonical(dirs.root);

  SECTION("empty path: the configured file, merged, loads back") {
    v1::DumpActivationStatsResponse r;
    REQUIRE(dump(server, "", &r).ok());
    CHECK(r.path() == (root / "out.json").string());
    CHECK(r.tokens() == 51525 + 2);
    CHECK(r.bytes_written() == fs::file_size(configured));
    const Result<placement::ActivationStats> back = placement::load_stats(r.path());
    REQUIRE(back.ok());
    CHECK(back->tokens() == 51525 + 2);
    CHECK(back->count(0, 0) == file_counts()[0][0] + 1);
    CHECK(back->count(2, 15) == file_counts()[2][15]);
  }
  SECTION("relative paths are relative to the statistics directory; scope LIVE") {
    fs::create_directories(dirs.root / "sub");
    v1::DumpActivationStatsResponse r;
    REQUIRE(dump(server, "sub/live.json", &r, v1::STATS_SCOPE_LIVE).ok());
    CHECK(r.path() == (root / "sub" / "live.json").string());
    CHECK(r.tokens() == 2);
    const Result<placement::ActivationStats> back = placement::load_stats(r.path());
    REQUIRE(back.ok());
    CHECK(back->tokens() == 2);
    CHECK(back->count(3, 3) == 1);
  }
  SECTION("escapes are PERMISSION_DENIED and write nothing") {
    v1::DumpActivationStatsResponse r;
    const grpc::Status up = dump(server, "../outside/x.json", &r);
    CHECK(up.error_code() == grpc::StatusCode::PERMISSION_DENIED);
    const grpc::Status absolute = dump(server, (dirs.outside / "x.json").string(), &r);
    CHECK(absolute.error_code() == grpc::StatusCode::PERMISSION_DENIED);
    CHECK_THAT(absolute.error_message(), Catch::Contains("outside the statistics directory"));
    fs::create_directory_symlink(dirs.outside, dirs.root / "link");
    const grpc::Status through_link = dump(server, "link/x.json", &r);
    CHECK(through_link.error_code() == grpc::StatusCode::PERMISSION_DENIED);
    const grpc::Status dotdot = dump(server, "sub/../../outside/y.json", &r);
    CHECK(dotdot.error_code() == grpc::StatusCode::PERMISSION_DENIED);
    CHECK(fs::is_empty(dirs.outside));
  }
  SECTION("a symlinked file is replaced, its target outside is untouched") {
    const fs::path target = dirs.outside / "target.json";
    std::ofstream(target) << "keep";
    fs::create_symlink(target, dirs.root / "evil.json");
    v1::DumpActivationStatsResponse r;
    REQUIRE(dump(server, "evil.json", &r).ok());
    CHECK_FALSE(fs::is_symlink(dirs.root / "evil.json"));
    std::ifstream in(target);
    std::string text;
    std::getline(in, text);
    CHECK(text == "keep");
    CHECK(placement::load_stats((dirs.root / "evil.json").string()).ok());
  }
  SECTION("bad paths are INVALID_ARGUMENT") {
    v1::DumpActivationStatsResponse r;
    CHECK(dump(server, "missing-dir/x.json", &r).error_code() ==
          grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(dump(server, "sub/..", &r).error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    fs::create_directories(dirs.root / "adir");
    CHECK(dump(server, "adir", &r).error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(dump(server, std::string("a\0b", 3), &r).error_code() ==
          grpc::StatusCode::INVALID_ARGUMENT);
  }
}

TEST_CASE("DumpActivationStats without a configured output is FAILED_PRECONDITION",
          "[server][grpc]") {
  TestServer server("");
  v1::DumpActivationStatsResponse r;
  const grpc::Status s = dump(server, "x.json", &r);
  CHECK(s.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK_THAT(s.error_message(), Catch::Contains("stats_output_path"));
}

TEST_CASE("GetRequestMoeCounters follows a request from start to finish", "[server][grpc]") {
  TestServer server("");
  auto ask = [&](const std::string& id, v1::GetRequestMoeCountersResponse* r) {
    v1::GetRequestMoeCountersRequest req;
    req.set_request_id(id);
    grpc::ClientContext ctx;
    return server.stub().GetRequestMoeCounters(&ctx, req, r);
  };
  v1::GetRequestMoeCountersResponse r;
  CHECK(ask("r1", &r).error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK(ask("", &r).error_code() == grpc::StatusCode::INVALID_ARGUMENT);

  server.activity().on_started("r1");
  feed(server.activity(), "r1");
  REQUIRE(ask("r1", &r).ok());
  CHECK(r.request_id() == "r1");
  CHECK(r.state() == v1::REQUEST_STATE_RUNNING);
  CHECK(r.prompt_tokens() == 2);
  CHECK(r.generated_tokens() == 0);
  // Expected from the placement: experts {0,1} and {2,3} in each of the 4 layers.
  const placement::DeviceMap& map = demo_model().placement.placement.map;
  uint64_t gpu = 0;
  uint64_t gpu_only = 0;
  uint64_t cpu_only = 0;
  uint64_t split = 0;
  for (uint32_t layer = 0; layer < 4; ++layer) {
    for (uint32_t first : {0u, 2u}) {
      const int n = (map.at(layer, first) == placement::Device::kGpu) +
                    (map.at(layer, first + 1) == placement::Device::kGpu);
      gpu += static_cast<uint64_t>(n);
      gpu_only += n == 2;
      cpu_only += n == 0;
      split += n == 1;
    }
  }
  CHECK(r.prefill().expert_pairs_gpu() == gpu);
  CHECK(r.prefill().expert_pairs_cpu() == 16 - gpu);
  CHECK(r.prefill().token_layers_gpu_only() == gpu_only);
  CHECK(r.prefill().token_layers_cpu_only() == cpu_only);
  CHECK(r.prefill().token_layers_split() == split);
  CHECK(r.decode().expert_pairs_gpu() + r.decode().expert_pairs_cpu() == 0);

  server.activity().on_finished("r1");
  REQUIRE(ask("r1", &r).ok());
  CHECK(r.state() == v1::REQUEST_STATE_FINISHED);
}

TEST_CASE("GetRequestMoeCounters bounds request_id as Generate does, without echoing it",
          "[server][grpc]") {
  TestServer server("");
  auto ask = [&](const std::string& id) {
    v1::GetRequestMoeCountersRequest req;
    req.set_request_id(id);
    grpc::ClientContext ctx;
    v1::GetRequestMoeCountersResponse r;
    return server.stub().GetRequestMoeCounters(&ctx, req, &r);
  };
  const size_t limit = GenerateMappingLimits{}.max_request_id_bytes;
  REQUIRE(limit == 256);
  CHECK(ask(std::string(limit, 'a')).error_code() == grpc::StatusCode::NOT_FOUND);
  for (const size_t n : {limit + 1, size_t{20000}}) {
    const grpc::Status long_id = ask(std::string(n, 'b'));
    CHECK(long_id.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(long_id.error_message() ==
          "request_id: " + std::to_string(n) + " bytes; the limit is 256");
  }
}

TEST_CASE("tandem.v1 requests that do not parse get INVALID_ARGUMENT after the key check",
          "[server][grpc]") {
  TestServer server("", {"key-0123456789"});
  // GetRequestMoeCountersRequest.request_id (field 1) holding a lone continuation byte.
  const std::string bad_utf8(
      "\x0A\x03"
      "a\x80"
      "b",
      5);
  const std::string method = "/tandem.v1.Tandem/GetRequestMoeCounters";
  CHECK(raw_unary_call(server.channel(), method, bad_utf8).status.error_code() ==
        grpc::StatusCode::UNAUTHENTICATED);
  const RawReply r = raw_unary_call(server.channel(), method, bad_utf8, "key-0123456789");
  CHECK(r.status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(r.status.error_message() ==
        "the request is not a valid tandem.v1.GetRequestMoeCountersRequest: field 'request_id' "
        "is not valid UTF-8 (byte 1 of the string); proto3 strings must be UTF-8");
  for (const char* m : {"GetPlacement", "GetActivationStats", "DumpActivationStats"}) {
    INFO(m);
    const RawReply g = raw_unary_call(server.channel(), std::string("/tandem.v1.Tandem/") + m,
                                      std::string("\xFF", 1), "key-0123456789");
    CHECK(g.status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_THAT(g.status.error_message(), Catch::Contains("malformed protobuf at byte 0"));
  }
}

TEST_CASE("tandem.v1 checks the API key first and is UNAVAILABLE while loading or draining",
          "[server][grpc]") {
  TestServer server("", {"key-0123456789"});
  auto placement_call = [&](const char* key) {
    grpc::ClientContext ctx;
    if (key != nullptr) ctx.AddMetadata("authorization", std::string("Bearer ") + key);
    v1::GetPlacementResponse r;
    return server.stub().GetPlacement(&ctx, v1::GetPlacementRequest(), &r);
  };
  CHECK(placement_call(nullptr).error_code() == grpc::StatusCode::UNAUTHENTICATED);
  CHECK(placement_call("wrong-key-00000").error_code() == grpc::StatusCode::UNAUTHENTICATED);
  CHECK(placement_call("key-0123456789").ok());

  for (ServingState state : {ServingState::kLoading, ServingState::kDraining}) {
    server.context().set_state(state);
    // The key is checked before the state.
    CHECK(placement_call(nullptr).error_code() == grpc::StatusCode::UNAUTHENTICATED);
    CHECK(placement_call("key-0123456789").error_code() == grpc::StatusCode::UNAVAILABLE);
    grpc::ClientContext c1;
    c1.AddMetadata("authorization", "Bearer key-0123456789");
    v1::GetActivationStatsResponse s;
    CHECK(server.stub().GetActivationStats(&c1, {}, &s).error_code() ==
          grpc::StatusCode::UNAVAILABLE);
    grpc::ClientContext c2;
    c2.AddMetadata("authorization", "Bearer key-0123456789");
    v1::DumpActivationStatsResponse d;
    CHECK(server.stub().DumpActivationStats(&c2, {}, &d).error_code() ==
          grpc::StatusCode::UNAVAILABLE);
    grpc::ClientContext c3;
    c3.AddMetadata("authorization", "Bearer key-0123456789");
    v1::GetRequestMoeCountersRequest req;
    req.set_request_id("x");
    v1::GetRequestMoeCountersResponse m;
    CHECK(server.stub().GetRequestMoeCounters(&c3, req, &m).error_code() ==
          grpc::StatusCode::UNAVAILABLE);
  }
}

TEST_CASE("dump_activation_stats writes the merged statistics for shutdown", "[server]") {
  ScratchDirs dirs;
  TestServer server("");
  feed(server.activity(), "r1");
  const std::string path = (dirs.root / "final.json").string();
  REQUIRE(dump_activation_stats(server.activity(), path).ok());
  REQUIRE(dump_activation_stats(server.activity(), path).ok());  // replaces
  const Result<placement::ActivationStats> back = placement::load_stats(path);
  REQUIRE(back.ok());
  CHECK(back->tokens() == 51525 + 2);
  CHECK(back->count(1, 2) == file_counts()[1][2] + 1);
  CHECK(dump_activation_stats(server.activity(), "").code() == StatusCode::kInvalidArgument);
  const Status missing_dir =
      dump_activation_stats(server.activity(), (dirs.base / "nope" / "x.json").string());
  CHECK_FALSE(missing_dir.ok());
}

}  // namespace
}  // namespace tandem::server
