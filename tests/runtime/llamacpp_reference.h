// Checking a model file against the llama.cpp references of shared/data/tiny-*: every prompt
// position's logits and the teacher-forced greedy continuation (the ref-<variant>.json layout of
// those folders' READMEs).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/runtime/runtime_fixture.h"

namespace tandem::runtime::testing {

// Per prompt: every prompt position's logits (one prefill batch), then the reference's greedy
// continuation fed back token by token (teacher forcing) with each step's logits compared to the
// row llama.cpp picked that token from. Where the reference's top-1/top-2 margin exceeds twice
// the row's measured difference, our argmax must be the reference token (a difference of d cannot
// flip a margin above 2d). `free_greedy`: also our own greedy run must equal llama.cpp's.
// `dir` holds ref-<variant>.json and <model_prefix><variant>.gguf. `kv_type`: the runner's KV
// cache element type (the references were made with an F32 cache). `mla_prefill`: how an MLA
// model's attention is computed (cpu_dense_executor.h). `model_path`, when given, is read instead
// of <model_prefix><variant>.gguf (the same model written otherwise, e.g. in shards).
inline void check_llamacpp_reference(const std::string& dir, const std::string& model_prefix,
                                     const std::string& variant, float tolerance, bool free_greedy,
                                     kernels::KvType kv_type = kernels::KvType::kF32,
                                     MlaPrefill mla_prefill = MlaPrefill::kAuto,
                                     const std::string& model_path = "") {
  const auto ref = read_json(dir + "ref-" + variant + ".json");
  auto model = load_model(model_path.empty() ? dir + model_prefix + variant + ".gguf" : model_path,
                          2, true, true, kv_type, mla_prefill);
  const size_t vocab = model->runner->n_vocab();
  REQUIRE(vocab == ref["n_vocab"].get<size_t>());
  REQUIRE(ref["prompts"].size() == 3);
  float worst = 0.0f;
  size_t argmax_checked = 0;
  for (const auto& p : ref["prompts"]) {
    const std::string name = p["name"];
    INFO(variant << " prompt " << name);
    const auto ids = p["tokens"].get<std::vector<int32_t>>();
    const auto expected = read_f32(dir + p["prompt_logits_file"].get<std::string>());
    auto cache = model->runner->new_kv_cache();
    const auto logits = prefill_all(*model->runner, ids, *cache);
    REQUIRE(logits.size() == expected.size());
    const float prompt_diff = max_abs_diff(logits, expected);
    CHECK(prompt_diff < tolerance);
    worst = std::max(worst, prompt_diff);

    const auto want = p["greedy_tokens"].get<std::vector<int32_t>>();
    const auto margins = p["greedy_top1_minus_top2"].get<std::vector<float>>();
    const auto greedy_rows = read_f32(dir + p["greedy_logits_file"].get<std::string>());
    REQUIRE(greedy_rows.size() == want.size() * vocab);
    std::span<const float> row(logits.data() + (ids.size() - 1) * vocab, vocab);
    std::vector<float> last(row.begin(), row.end());
    ForwardOutput out;
    for (size_t s = 0; s < want.size(); ++s) {
      INFO("greedy step " << s);
      const std::span<const float> ref_row =
          std::span<const float>(greedy_rows).subspan(s * vocab, vocab);
      const float d = max_abs_diff(last, ref_row);
      CHECK(d < tolerance);
      worst = std::max(worst, d);
      if (margins[s] > 2.0f * d) {
        CHECK(argmax(last) == want[s]);
        ++argmax_checked;
      }
      std::vector<int32_t> one{want[s]};
      SequenceInput step{cache.get(), one, cache->length(), LogitsWanted::kLast};
      REQUIRE(model->runner->forward({&step, 1}, out).ok());
      const std::span<const float> next = out.row(0, 0);
      last.assign(next.begin(), next.end());
    }
    if (free_greedy) CHECK(greedy(*model->runner, ids, want.size()) == want);
  }
  // The figure for the notes; the checks above are what pass or fail.
  WARN(model_prefix << variant << " (" << kernels::kv_type_name(kv_type)
                    << " KV cache): max |logit - llama.cpp| = " << worst << " over prompt and "
                    << "greedy rows; argmax checked at " << argmax_checked << " greedy steps");
  CHECK(argmax_checked > 0);
}

}  // namespace tandem::runtime::testing
