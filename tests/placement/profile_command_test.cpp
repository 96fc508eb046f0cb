// Tests of `tandem profile` (profile_main) and plan_startup_placement on the tiny-moe model.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/plan_command.h"
#include "cli/profile_command.h"
#include "engine/model/model.h"
#include "engine/placement/model_identity.h"
#include "engine/placement/placement_startup.h"
#include "engine/placement/stats_file.h"
#include "engine/runtime/runtime.h"

namespace tandem::cli {
namespace {

using nlohmann::json;
using placement::ActivationStats;

const std::string kData = std::string(TANDEM_SHARED_DIR) + "/data/tiny-moe";
const std::string kTinyF32 = kData + "/tiny-moe-f32.gguf";
const std::string kTinyQ8 = kData + "/tiny-moe-q8_0.gguf";

struct Run {
  int rc;
  std::string out;
  std::string err;
};

Run profile(std::vector<std::string> args) {
  Run r;
  r.rc = profile_main(args, r.out, r.err);
  return r;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("tandem_profile_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

std::string write(const std::string& name, const std::string& text) {
  const std::string path = temp_path(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// llama.cpp's reference for the f32 model: prompt text, its token ids and greedy continuation.
struct RefPrompt {
  std::string text;
  std::vector<int32_t> tokens;
  std::vector<int32_t> greedy;
};

RefPrompt ref_prompt(const std::string& name) {
  std::ifstream in(kData + "/ref-f32.json");
  const json ref = json::parse(in);
  for (const json& p : ref["prompts"]) {
    if (p["name"] == name) {
      return {p["text"].get<std::string>(), p["tokens"].get<std::vector<int32_t>>(),
              p["greedy_tokens"].get<std::vector<int32_t>>()};
    }
  }
  FAIL("no prompt " << name);
  return {};
}

// Counts the routing of `sequences` (each: ids fed as a prefill, then `extra` ids one at a time)
// straight from ForwardOutput::routing: [layer][expert].
std::vector<std::vector<uint64_t>> count_routing(
    const std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>>& sequences) {
  model::Checkpoint c = model::open_model(kTinyF32).value();
  auto runner = runtime::ModelRunner::create(*c.spec, *c.weights, {.threads = 1}).value();
  std::vector<std::vector<uint64_t>> counts(2, std::vector<uint64_t>(8, 0));
  runtime::ForwardOutput out;
  for (const auto& [prompt, extra] : sequences) {
    auto cache = runner->new_kv_cache();
    std::vector<std::vector<int32_t>> steps{prompt};
    for (int32_t id : extra) steps.push_back({id});
    for (const auto& step : steps) {
      runtime::SequenceInput seq{cache.get(), step, cache->length(), runtime::LogitsWanted::kLast};
      REQUIRE(runner->forward({&seq, 1}, out, {.record_routing = true}).ok());
      REQUIRE(out.routing.size() == 2);
      for (size_t layer = 0; layer < 2; ++layer) {
        REQUIRE(out.routing[layer].n_tokens == step.size());
        REQUIRE(out.routing[layer].k == 2);
        for (int32_t e : out.routing[layer].experts) ++counts[layer][static_cast<size_t>(e)];
      }
    }
  }
  return counts;
}

void check_counts(const ActivationStats& stats, const std::vector<std::vector<uint64_t>>& want) {
  REQUIRE(stats.n_rows() == 2);
  for (size_t row = 0; row < 2; ++row) {
    for (uint64_t e = 0; e < 8; ++e) {
      INFO("layer " << row << " expert " << e);
      CHECK(stats.count(row, e) == want[row][e]);
    }
  }
}

uint64_t row_sum(const ActivationStats& stats, size_t row) {
  uint64_t sum = 0;
  for (uint64_t e = 0; e < stats.n_experts(); ++e) sum += stats.count(row, e);
  return sum;
}

TEST_CASE("profile: line prompts give llama.cpp's token count and the routing counts",
          "[placement]") {
  const RefPrompt fox = ref_prompt("fox");
  REQUIRE(fox.tokens.size() == 20);
  // Two prompts per line, a blank line between them (skipped).
  const std::string prompts = write("lines.txt", fox.text + "\n\n" + fox.text + "\n");
  const std::string stats_path = temp_path("lines.json");
  std::filesystem::remove(stats_path);
  Run r1 = profile(
      {"--model", kTinyF32, "--prompts", prompts, "--output", stats_path, "--threads", "1"});
  INFO(r1.err);
  REQUIRE(r1.rc == 0);
  CHECK_THAT(r1.out, Catch::Contains("profiled 2 prompts: 40 tokens (40 prompt, 0 generated)"));
  CHECK_THAT(r1.err, Catch::Contains("profile: 2/2 prompts (100%), 40 tokens"));
  const ActivationStats s1 = placement::load_stats(stats_path).value();
  CHECK(s1.tokens() == 2 * fox.tokens.size());
  CHECK(row_sum(s1, 0) == s1.tokens() * 2);
  CHECK(row_sum(s1, 1) == s1.tokens() * 2);
  CHECK(s1.model().fingerprint ==
        placement::model_identity(model::open_model(kTinyF32).value()).value().fingerprint);
  check_counts(s1, count_routing({{fox.tokens, {}}, {fox.tokens, {}}}));

  // Two threads record exactly the same.
  const std::string stats2 = temp_path("lines2.json");
  Run r2 = profile({"--model", kTinyF32, "--prompts", prompts, "--output", stats2, "--threads=2"});
  REQUIRE(r2.rc == 0);
  const ActivationStats s2 = placement::load_stats(stats2).value();
  CHECK(std::vector<uint64_t>(s2.counts().begin(), s2.counts().end()) ==
        std::vector<uint64_t>(s1.counts().begin(), s1.counts().end()));

  // --merge adds the same counts again; without --merge the file is replaced.
  Run merged = profile({"--model", kTinyF32, "--prompts", prompts, "--output", stats_path,
                        "--merge", "--threads", "1"});
  REQUIRE(merged.rc == 0);
  CHECK_THAT(merged.out, Catch::Contains("80 tokens, merged with 40 earlier"));
  const ActivationStats sm = placement::load_stats(stats_path).value();
  CHECK(sm.tokens() == 2 * s1.tokens());
  for (size_t i = 0; i < sm.counts().size(); ++i) CHECK(sm.counts()[i] == 2 * s1.counts()[i]);
  REQUIRE(profile({"--model", kTinyF32, "--prompts", prompts, "--output", stats_path}).rc == 0);
  CHECK(placement::load_stats(stats_path).value().tokens() == s1.tokens());

  // --merge into statistics of another model is refused with the loader's message.
  Run other =
      profile({"--model", kTinyQ8, "--prompts", prompts, "--output", stats_path, "--merge"});
  CHECK(other.rc == 2);
  CHECK_THAT(other.err, Catch::Contains("statistics are for another model"));
  CHECK(placement::load_stats(stats_path).value().tokens() == s1.tokens());  // untouched

  // `tandem plan` reads the result.
  std::string out;
  std::string err;
  const std::vector<std::string> plan_args{"--stats",           stats_path, "--model", kTinyF32,
                                           "--num-gpu-experts", "3",        "--json"};
  REQUIRE(plan_main(plan_args, out, err) == 0);
  const json j = json::parse(out);
  CHECK(j["n_gpu_experts"] == 3);
  CHECK(j["stats"]["tokens"] == 40);
  for (const auto& p : {prompts, stats_path, stats2}) std::filesystem::remove(p);
}

TEST_CASE("profile: JSONL prompts, greedy tokens, and the summary", "[placement]") {
  const RefPrompt fox = ref_prompt("fox");
  const RefPrompt chat = ref_prompt("chat");
  const std::string prompts =
      write("p.jsonl", json({{"text", fox.text}, {"id", 1}}).dump() + "\n   \n" +
                           json({{"text", chat.text}}).dump() + "\n");
  const std::string stats_path = temp_path("jsonl.json");
  Run r = profile({"--model", kTinyF32, "--prompts", prompts, "--output", stats_path});
  INFO(r.err);
  REQUIRE(r.rc == 0);
  const ActivationStats s = placement::load_stats(stats_path).value();
  CHECK(s.tokens() == fox.tokens.size() + chat.tokens.size());
  check_counts(s, count_routing({{fox.tokens, {}}, {chat.tokens, {}}}));
  // The summary names each layer's most and least chosen expert with its share.
  CHECK_THAT(r.out, Catch::Contains("layer  most used"));
  for (size_t row = 0; row < 2; ++row) {
    const auto c = s.counts().subspan(row * 8, 8);
    const auto most = std::max_element(c.begin(), c.end()) - c.begin();
    char share[32];
    std::snprintf(share, sizeof share, "%.1f%%",
                  100.0 * static_cast<double>(c[static_cast<size_t>(most)]) /
                      static_cast<double>(row_sum(s, row)));
    CHECK_THAT(r.out, Catch::Contains(std::to_string(row) + "  expert " + std::to_string(most)));
    CHECK_THAT(r.out, Catch::Contains(share));
  }

  // Greedy generation: the fox prompt plus llama.cpp's first 3 greedy tokens.
  const std::string one = write("one.jsonl", json({{"text", fox.text}}).dump() + "\n");
  Run g = profile({"--model", kTinyF32, "--prompts", one, "--output", stats_path,
                   "--max-tokens-per-prompt", "3"});
  REQUIRE(g.rc == 0);
  CHECK_THAT(g.out, Catch::Contains("23 tokens (20 prompt, 3 generated)"));
  const ActivationStats sg = placement::load_stats(stats_path).value();
  CHECK(sg.tokens() == 23);
  check_counts(sg, count_routing({{fox.tokens, {fox.greedy.begin(), fox.greedy.begin() + 3}}}));
  for (const auto& p : {prompts, one, stats_path}) std::filesystem::remove(p);
}

TEST_CASE("profile: a terminal gets a redrawn progress bar", "[placement]") {
  const RefPrompt fox = ref_prompt("fox");
  const std::string prompts = write("tty.txt", fox.text + "\n" + fox.text + "\n");
  const std::string stats_path = temp_path("tty.json");
  std::string shown;
  ProfileProgress progress;
  progress.tty = true;
  progress.write = [&shown](std::string_view text) { shown += text; };
  std::string out;
  std::string err;
  const std::vector<std::string> args{"--model", kTinyF32,   "--prompts",
                                      prompts,   "--output", stats_path};
  REQUIRE(profile_main(args, out, err, progress) == 0);
  CHECK(err.empty());
  CHECK_THAT(shown, Catch::StartsWith("\r[###############               ]  50% 1/2 prompts, 20 "
                                      "tokens"));
  CHECK_THAT(shown, Catch::Contains("\r[##############################] 100% 2/2 prompts, 40 "
                                    "tokens"));
  CHECK(shown.back() == '\n');
  for (const auto& p : {prompts, stats_path}) std::filesystem::remove(p);
}

TEST_CASE("profile: bad input exits 2 naming the problem", "[placement]") {
  const std::string out_path = temp_path("never.json");
  std::filesystem::remove(out_path);
  auto fails = [&](const std::vector<std::string>& args, const std::string& message) {
    Run r = profile(args);
    INFO(r.err);
    CHECK(r.rc == 2);
    CHECK_THAT(r.err, Catch::Contains(message));
  };
  const std::string bad = write("bad.jsonl", "{\"text\": \"a\"}\n\n{\"text\": 3}\n");
  fails({"--model", kTinyF32, "--prompts", bad, "--output", out_path}, "bad.jsonl:3: no string");
  const std::string broken = write("broken.jsonl", "{\"text\": \"a\"}\n{\"text\": \n");
  fails({"--model", kTinyF32, "--prompts", broken, "--output", out_path},
        "broken.jsonl:2: not a JSON object");
  const std::string blank = write("blank.txt", "\n  \n");
  fails({"--model", kTinyF32, "--prompts", blank, "--output", out_path}, "no prompts");
  fails({"--model", kTinyF32, "--prompts", temp_path("missing.txt"), "--output", out_path},
        "cannot read prompts file");
  fails({"--model", kTinyF32, "--output", out_path}, "give --prompts FILE");
  fails({"--model", kTinyF32, "--prompts", blank, "--output", out_path, "--threads", "-1"},
        "--threads wants a non-negative integer");
  fails({"--model", kTinyF32, "--prompts", blank, "--output", out_path, "--bogus"},
        "unknown argument");
  const std::string good = write("good.txt", "hello\n");
  fails({"--model", temp_path("nope.gguf"), "--prompts", good, "--output", out_path}, "nope.gguf");
  CHECK_FALSE(std::filesystem::exists(out_path));
  for (const auto& p : {bad, broken, blank, good}) std::filesystem::remove(p);
}

TEST_CASE("startup placement: statistics from profile, missing file, wrong model", "[placement]") {
  const RefPrompt fox = ref_prompt("fox");
  const RefPrompt chat = ref_prompt("chat");
  const std::string prompts = write("startup.jsonl", json({{"text", fox.text}}).dump() + "\n" +
                                                         json({{"text", chat.text}}).dump());
  const std::string stats_path = temp_path("startup.json");
  REQUIRE(profile({"--model", kTinyF32, "--prompts", prompts, "--output", stats_path}).rc == 0);
  const ActivationStats stats = placement::load_stats(stats_path).value();
  const model::Checkpoint f32 = model::open_model(kTinyF32).value();

  placement::StartupPlacementOptions pc;
  pc.policy = placement::PlacementPolicy::kFrequency;
  pc.num_gpu_experts = 3;
  pc.stats_path = stats_path;
  auto placed = placement::plan_startup_placement(pc, f32);
  REQUIRE(placed.ok());
  CHECK(placed->stats_loaded);
  REQUIRE(placed->stats);
  CHECK(placed->stats->tokens() == stats.tokens());
  CHECK_FALSE(placed->placement.fell_back_to_uniform);
  CHECK(placed->warnings.empty());
  // The 3 most chosen (layer, expert) pairs; ties by layer then expert.
  std::vector<std::tuple<uint64_t, uint32_t, uint32_t>> order;
  for (uint32_t row = 0; row < 2; ++row) {
    for (uint32_t e = 0; e < 8; ++e) order.emplace_back(~stats.count(row, e), row, e);
  }
  std::sort(order.begin(), order.end());
  std::vector<std::pair<uint32_t, uint32_t>> want;
  for (size_t i = 0; i < 3; ++i) want.emplace_back(std::get<1>(order[i]), std::get<2>(order[i]));
  std::sort(want.begin(), want.end());
  CHECK(placed->placement.map.gpu_experts() == want);
  REQUIRE(placed->report.coverage);
  double covered = 0;
  for (const auto& [layer, e] : want) covered += static_cast<double>(stats.count(layer, e));
  CHECK(*placed->report.coverage == Approx(covered / static_cast<double>(stats.total())));

  // A missing statistics file: uniform, with a warning naming it.
  pc.stats_path = temp_path("absent.json");
  pc.num_gpu_experts = 4;
  auto fallback = placement::plan_startup_placement(pc, f32);
  REQUIRE(fallback.ok());
  CHECK(fallback->placement.fell_back_to_uniform);
  CHECK_FALSE(fallback->stats_loaded);
  REQUIRE_FALSE(fallback->warnings.empty());
  CHECK_THAT(fallback->warnings[0], Catch::Contains("absent.json not found"));
  CHECK(fallback->placement.map.gpu_experts() ==
        std::vector<std::pair<uint32_t, uint32_t>>{{0, 0}, {0, 1}, {1, 0}, {1, 1}});

  // Statistics of another model (same shapes, other tensor types): refused.
  const model::Checkpoint q8 = model::open_model(kTinyQ8).value();
  pc.stats_path = stats_path;
  auto wrong = placement::plan_startup_placement(pc, q8);
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.status().code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(wrong.status().message(), Catch::Contains(stats_path));
  CHECK_THAT(wrong.status().message(), Catch::Contains("fingerprint"));

  // A malformed file is an error too, and budget needs a budget.
  const std::string junk = write("junk.json", "{\"format\": \"nope\"}");
  pc.stats_path = junk;
  CHECK_FALSE(placement::plan_startup_placement(pc, f32).ok());
  pc.stats_path = stats_path;
  pc.policy = placement::PlacementPolicy::kBudget;
  auto no_budget = placement::plan_startup_placement(pc, f32);
  REQUIRE_FALSE(no_budget.ok());
  CHECK_THAT(no_budget.status().message(), Catch::Contains("gpu_memory_budget"));
  // With GPU bytes to fill: an expert is 3 x 64 x 32 F32 = 24,576 bytes, so 500 reserved out of
  // 500 + 2.5 experts' bytes leaves room for two.
  const uint64_t expert = 3 * 64 * 32 * 4;
  auto budget =
      placement::plan_startup_placement(pc, f32, {.usable = 500 + 5 * expert / 2, .reserved = 500});
  REQUIRE(budget.ok());
  CHECK(budget->placement.expert_budget_bytes == 5 * expert / 2);
  CHECK(budget->placement.map.n_gpu() == 2);
  for (const auto& p : {prompts, stats_path, junk}) std::filesystem::remove(p);
}

}  // namespace
}  // namespace tandem::cli
