// Forward pass against llama.cpp's tiny-moe references (F32 and Q8_0 GGUF).
#include <catch2/catch.hpp>

#include "tests/runtime/llamacpp_reference.h"

namespace tandem::runtime::testing {
namespace {

TEST_CASE("tiny-moe F32 logits and greedy tokens match llama.cpp", "[runtime][forward]") {
  check_llamacpp_reference(tiny_moe_dir(), "tiny-moe-", "f32", 1e-4f, true);
}

TEST_CASE("tiny-moe Q8_0 logits and greedy tokens match llama.cpp", "[runtime][forward]") {
  check_llamacpp_reference(tiny_moe_dir(), "tiny-moe-", "q8_0", 1e-3f, true);
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

TEST_CASE("tiny-moe F32 with an f16 KV cache stays close to llama.cpp's F32-KV references",
          "[runtime][forward][kv]") {
  // The K/V rows are rounded to halves (relative error <= 2^-11); llama.cpp's README measured its
  // own F16 cache (with flash attention) at up to 3.2e-4 from these F32-KV logits. 1e-3 holds
  // ours with a margin and is still 100x under the F32 logits' spread; greedy stays identical.
  check_llamacpp_reference(tiny_moe_dir(), "tiny-moe-", "f32", 1e-3f, true, kernels::KvType::kF16);
}

}  // namespace
}  // namespace tandem::runtime::testing
