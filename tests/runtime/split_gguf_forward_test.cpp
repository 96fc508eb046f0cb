// Split GGUF models through the forward pass: the shared tiny models re-written in three shards
// by the `gguf` package's GGUFWriter (tests/fixtures/gguf/split) give the whole files' logits bit
// for bit, and so llama.cpp's references.
#include <catch2/catch.hpp>

#include "tests/runtime/llamacpp_reference.h"

namespace tandem::runtime::testing {
namespace {

const std::string kSplit = std::string(TANDEM_SOURCE_DIR) + "/tests/fixtures/gguf/split/";

std::string gpt_oss_dir() {
  return std::string(TANDEM_SHARED_DIR) + "/data/tiny-gpt-oss/";
}

TEST_CASE("a split GGUF gives the whole file's logits bit for bit", "[runtime][forward][split]") {
  struct Case {
    std::string dir, whole, split;
  };
  for (const Case& c : {Case{tiny_moe_dir(), "tiny-moe-q8_0", "tiny-moe-q8_0"},
                        Case{gpt_oss_dir(), "tiny-gpt-oss-q8_0", "tiny-gpt-oss-q8_0"}}) {
    INFO(c.split);
    auto whole = load_model(c.dir + c.whole + ".gguf");
    auto split = load_model(kSplit + c.split + "-00001-of-00003.gguf");
    REQUIRE(split->checkpoint.files.size() == 3);
    const auto ref = read_json(c.dir + "ref-q8_0.json");
    for (const auto& p : ref["prompts"]) {
      const auto ids = p["tokens"].get<std::vector<int32_t>>();
      auto a_cache = whole->runner->new_kv_cache();
      auto b_cache = split->runner->new_kv_cache();
      const std::vector<float> a = prefill_all(*whole->runner, ids, *a_cache);
      const std::vector<float> b = prefill_all(*split->runner, ids, *b_cache);
      REQUIRE(a.size() == ids.size() * whole->runner->n_vocab());
      CHECK(a == b);
    }
  }
}

TEST_CASE("a split gpt-oss GGUF whose first shard holds no tensor matches llama.cpp",
          "[runtime][forward][split]") {
  // The bound and greedy rule of the whole file's test (tiny_gpt_oss_forward_test.cpp).
  check_llamacpp_reference(gpt_oss_dir(), "tiny-gpt-oss-", "q8_0", 3e-2f, false,
                           kernels::KvType::kF32, MlaPrefill::kAuto,
                           kSplit + "tiny-gpt-oss-q8_0-00001-of-00003.gguf");
}

}  // namespace
}  // namespace tandem::runtime::testing
