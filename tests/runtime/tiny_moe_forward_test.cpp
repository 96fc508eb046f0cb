// Forward pass against llama.cpp's tiny-moe references (F32 and Q8_0 GGUF).
#include <catch2/catch.hpp>

#include "tests/runtime/runtime_fixture.h"

namespace tandem::runtime::testing {
namespace {

void check_variant(const std::string& variant, float tolerance) {
  const std::string dir = tiny_moe_dir();
  const auto ref = read_json(dir + "ref-" + variant + ".json");
  auto model = load_model(dir + "tiny-moe-" + variant + ".gguf");
  REQUIRE(ref["prompts"].size() == 3);
  for (const auto& p : ref["prompts"]) {
    const std::string name = p["name"];
    INFO(variant << " prompt " << name);
    const auto ids = p["tokens"].get<std::vector<int32_t>>();
    const auto expected = read_f32(dir + p["prompt_logits_file"].get<std::string>());
    auto cache = model->runner->new_kv_cache();
    const auto logits = prefill_all(*model->runner, ids, *cache);
    REQUIRE(logits.size() == expected.size());
    CHECK(max_abs_diff(logits, expected) < tolerance);
    const auto want = p["greedy_tokens"].get<std::vector<int32_t>>();
    CHECK(greedy(*model->runner, ids, want.size()) == want);
  }
}

TEST_CASE("tiny-moe F32 logits and greedy tokens match llama.cpp", "[runtime][forward]") {
  check_variant("f32", 1e-4f);
}

TEST_CASE("tiny-moe Q8_0 logits and greedy tokens match llama.cpp", "[runtime][forward]") {
  check_variant("q8_0", 1e-3f);
}

TEST_CASE("tiny-moe greedy logits along the decode path match llama.cpp", "[runtime][forward]") {
  // Row s of greedy_logits is what greedy token s was picked from: checks the decode steps'
  // logits, not just their argmax.
  const std::string dir = tiny_moe_dir();
  const auto ref = read_json(dir + "ref-f32.json");
  auto model = load_model(dir + "tiny-moe-f32.gguf", 3);
  const auto& p = ref["prompts"][0];
  const auto ids = p["tokens"].get<std::vector<int32_t>>();
  const auto want_tokens = p["greedy_tokens"].get<std::vector<int32_t>>();
  const auto expected = read_f32(dir + p["greedy_logits_file"].get<std::string>());
  const size_t vocab = model->runner->n_vocab();
  auto cache = model->runner->new_kv_cache();
  SequenceInput seq{cache.get(), ids, 0, LogitsWanted::kLast};
  ForwardOutput out;
  REQUIRE(model->runner->forward({&seq, 1}, out).ok());
  for (size_t s = 0; s < want_tokens.size(); ++s) {
    INFO("step " << s);
    CHECK(max_abs_diff(out.row(0, 0), std::span<const float>(expected).subspan(s * vocab, vocab)) <
          1e-4f);
    std::vector<int32_t> one{want_tokens[s]};
    SequenceInput step{cache.get(), one, cache->length(), LogitsWanted::kLast};
    REQUIRE(model->runner->forward({&step, 1}, out).ok());
  }
}

}  // namespace
}  // namespace tandem::runtime::testing
