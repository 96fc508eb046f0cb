// Tests of the trained demo model (models/demo): both formats load, agree with each other, and
// reproduce the continuations that transformers computed at export (tests/fixtures/demo).
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "engine/model/gguf_file.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/runtime/runtime_fixture.h"

namespace tandem::runtime::testing {
namespace {

std::string demo_path(const std::string& rel) {
  return std::string(TANDEM_SOURCE_DIR) + "/models/demo/" + rel;
}

nlohmann::json demo_expected() {
  return read_json(std::string(TANDEM_SOURCE_DIR) + "/tests/fixtures/demo/expected.json");
}

std::vector<int32_t> ids_of(const nlohmann::json& a) {
  return a.get<std::vector<int32_t>>();
}

// expected.json was computed by transformers in float32 from the BF16 checkpoint; the F32 GGUF
// holds the same (bf16-representable) values, so both formats must match it as closely as the
// HF fixtures do (1e-4, see hf_forward_test.cpp) with float activations (BF16 weights otherwise
// meet BF16 activations, hf_forward_test's bf16 case). The smallest greedy margin is 2.2e-3.
TEST_CASE("demo model: GGUF F32 and HF BF16 match transformers' logits and greedy tokens",
          "[runtime][demo]") {
  const nlohmann::json expected = demo_expected();
  for (const std::string& path : {demo_path("demo-moe-f32.gguf"), demo_path("hf")}) {
    INFO(path);
    auto model = load_model(path, /*threads=*/2, /*quantized_activations=*/false);
    REQUIRE(model->runner->n_vocab() == expected.at("n_vocab").get<size_t>());
    for (const auto& prompt : expected.at("prompts")) {
      INFO("prompt " << prompt.at("name").get<std::string>());
      const std::vector<int32_t> ids = ids_of(prompt.at("tokens"));
      auto cache = model->runner->new_kv_cache();
      const std::vector<float> logits = prefill_all(*model->runner, ids, *cache);
      const std::vector<float> last_ref = prompt.at("last_logits").get<std::vector<float>>();
      const size_t n_vocab = model->runner->n_vocab();
      const std::span<const float> last(logits.data() + (ids.size() - 1) * n_vocab, n_vocab);
      CHECK(max_abs_diff(last, last_ref) < 1e-4f);
      const std::vector<int32_t> want = ids_of(prompt.at("greedy_tokens"));
      CHECK(greedy(*model->runner, ids, want.size()) == want);
    }
  }
}

TEST_CASE("demo model: the GGUF tokenizer and the HF tokenizer.json give transformers' ids",
          "[runtime][demo]") {
  const nlohmann::json expected = demo_expected();
  auto file = model::GgufFile::open(demo_path("demo-moe-q8_0.gguf"));
  REQUIRE(file.ok());
  auto gguf = tokenizer::Tokenizer::from_gguf(*file);
  REQUIRE(gguf.ok());
  auto hf = tokenizer::Tokenizer::load_hf(demo_path("hf"));
  REQUIRE(hf.ok());
  for (const auto& prompt : expected.at("prompts")) {
    const std::string text = prompt.at("text").get<std::string>();
    INFO(text);
    tokenizer::EncodeOptions options;
    options.parse_special = true;
    const std::vector<int32_t> want = ids_of(prompt.at("tokens"));
    CHECK(gguf->encode(text, options).value() == want);
    CHECK(hf->encode(text, options).value() == want);
  }
}

}  // namespace
}  // namespace tandem::runtime::testing
