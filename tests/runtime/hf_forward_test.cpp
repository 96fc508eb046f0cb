// Forward pass against transformers' references for the HF safetensors fixtures.
#include <catch2/catch.hpp>

#include "tests/runtime/runtime_fixture.h"

namespace tandem::runtime::testing {
namespace {

// `model_path`: the checkpoint to run ("" = the HF folder itself; a GGUF copy of the same weights
// is checked against the same transformers reference). `check_greedy`: whether the greedy
// continuation must match too (only where the arithmetic is the reference's up to summation
// order: a tiny random model's top-two margins are often smaller than the rounding of
// activations to bfloat16 moves them).
void check_arch(const std::string& arch, float tolerance, bool quantized_activations = true,
                const std::string& model_path = "", bool check_greedy = true,
                MlaPrefill mla_prefill = MlaPrefill::kAuto) {
  const std::string dir = hf_dir(arch);
  const auto ref = read_json(dir + "reference.json");
  auto model = load_model(model_path.empty() ? dir : model_path, /*threads=*/2,
                          quantized_activations, true, kernels::KvType::kF32, mla_prefill);
  REQUIRE(ref["prompts"].size() == 3);
  float worst = 0.0f;
  for (const auto& p : ref["prompts"]) {
    const auto ids = p["prompt"].get<std::vector<int32_t>>();
    INFO(arch << " prompt of " << ids.size() << " tokens");
    const auto expected = read_f32(dir + p["logits_file"].get<std::string>());
    auto cache = model->runner->new_kv_cache();
    const auto logits = prefill_all(*model->runner, ids, *cache);
    REQUIRE(logits.size() == expected.size());
    const float diff = max_abs_diff(logits, expected);
    CHECK(diff < tolerance);
    worst = std::max(worst, diff);
    const auto want = p["greedy_next"].get<std::vector<int32_t>>();
    REQUIRE(want.size() >= 8);
    if (check_greedy) CHECK(greedy(*model->runner, ids, want.size()) == want);
  }
  // The figure for the notes; the checks above are what pass or fail.
  WARN((model_path.empty() ? arch : model_path)
       << ": max |logit - transformers| = " << worst << " over every prompt position");
}

TEST_CASE("HF Qwen3-MoE matches transformers", "[runtime][forward][hf]") {
  check_arch("qwen3_moe", 1e-4f);
}

TEST_CASE("HF Qwen2-MoE (shared expert, qkv bias) matches transformers", "[runtime][forward][hf]") {
  check_arch("qwen2_moe", 1e-4f);
}

TEST_CASE("HF Mixtral (sharded) matches transformers", "[runtime][forward][hf]") {
  check_arch("mixtral_sharded", 1e-4f);
}

TEST_CASE("HF OLMoE (whole-projection Q/K norm) matches transformers", "[runtime][forward][hf]") {
  check_arch("olmoe", 1e-4f);
}

TEST_CASE("HF Qwen3-MoE with bf16 weights matches transformers", "[runtime][forward][hf]") {
  // The reference upcasts the bf16 weights to float32 and computes in float32; bf16 -> f32 is
  // exact and our kernels convert the same way, so with float activations the arithmetic is the
  // F32 case's and the same tolerance applies.
  check_arch("qwen3_moe_bf16", 1e-4f, /*quantized_activations=*/false);
  // In the quantized mode (the default) BF16 weights meet activations rounded to bfloat16 (a
  // relative 2^-9 per element at every matmul, as llama.cpp's BF16 path): measured 0.085 at most
  // on these logits (lm_head x4: they span -17 .. 15); the greedy tokens stay identical.
  check_arch("qwen3_moe_bf16", 0.15f);
}

TEST_CASE(
    "HF GPT-OSS (MXFP4 experts, sinks, sliding window, YaRN truncate = false) matches "
    "transformers",
    "[runtime][forward][hf]") {
  // The checkpoint holds the experts as transformers' MXFP4 *_blocks / *_scales (repacked at open)
  // and the reference was computed by transformers from exactly those values, in float32: with
  // float activations (MXFP4 weights meet float, not Q8_0, activations) the arithmetic differs
  // from transformers' only in summation order and the F32 tolerance applies. Prompts of 40-56
  // tokens cross the 8-token window of layers 0 and 2 many times.
  check_arch("gpt_oss_mxfp4", 1e-4f, /*quantized_activations=*/false);
}

TEST_CASE(
    "HF DeepSeek-V3 (MLA with q LoRA, YaRN mscale, grouped sigmoid routing) matches transformers",
    "[runtime][forward][hf][deepseek2]") {
  // kv_b_proj holds each head's key and value up-projections in one tensor (GGUF's legacy
  // layout): split at load and run as absorbed MLA; transformers decompresses per-head K and V.
  // The same arithmetic up to summation order, so the F32 tolerance.
  check_arch("deepseek_v3", 1e-4f);
  // The expanded form (MlaPrefill::kExpanded) is transformers' own arithmetic up to summation
  // order: per-head keys k_b^T c and values v_b c from the cached latent rows.
  check_arch("deepseek_v3", 1e-4f, true, "", true, MlaPrefill::kExpanded);
}

TEST_CASE(
    "HF DeepSeek-V3 without the q LoRA (V2-Lite / Moonlight shape: q_proj, ungrouped sigmoid "
    "routing, two shared experts) matches transformers",
    "[runtime][forward][hf][deepseek2]") {
  // q_lora_rank is null: queries come from one q_proj (kAttnQ) instead of q_a / q_a_norm / q_b.
  check_arch("deepseek_v3_lite", 1e-4f);
  check_arch("deepseek_v3_lite", 1e-4f, true, "", true, MlaPrefill::kExpanded);
}

TEST_CASE(
    "HF DeepSeek-V3 in block-quantized FP8 (the published checkpoints' layout) matches "
    "transformers",
    "[runtime][forward][hf][deepseek2][fp8]") {
  // Every linear weight of the layers is float8_e4m3fn with a float32 scale per 128 x 128 block
  // (weight_scale_inv), converted at open into f8_e4m3_b128 rows; the reference ran transformers
  // in float32 on exactly the dequantized weights. In the float mode FP8 weights meet float
  // activations, so the arithmetic differs from transformers' only in summation order: the F32
  // tolerance, and the greedy tokens.
  check_arch("deepseek_v3_fp8", 1e-4f, /*quantized_activations=*/false);
  // In the quantized mode (the default) they meet activations rounded to bfloat16, as BF16
  // weights do (a relative 2^-9 per element before every FP8 matmul: q_a, q_b, kv_a, kv_b, o and
  // the experts): measured 0.144 at most, with logits of standard deviation 4. This random
  // model's top-two margins are smaller than that, so its greedy continuations part within the
  // first tokens and are not compared.
  check_arch("deepseek_v3_fp8", 0.2f, /*quantized_activations=*/true, "", /*check_greedy=*/false);
  auto c = model::open_model(hf_dir("deepseek_v3_fp8"));
  REQUIRE(c.ok());
  size_t fp8 = 0;
  for (const model::TensorInfo& t : c->tensors) {
    CHECK_FALSE(t.name.ends_with("_scale_inv"));
    if (t.type == TensorType::kF8_E4M3_B128) {
      ++fp8;
      CHECK(t.derived_from == t.name + "," + t.name + "_scale_inv");
    }
  }
  // Per layer: q_a, q_b, kv_a, kv_b, o; layer 0 a dense FFN (3), layers 1-2 8 experts x 3 plus
  // a shared expert (3).
  CHECK(fp8 == 3 * 5 + 3 + 2 * (8 * 3 + 3));
  CHECK(c->weights->unused.empty());
}

TEST_CASE(
    "HF DeepSeek-V2 (softmax routing: V2-Lite's greedy top-k with YaRN; V2's group-limited "
    "greedy, a group scored by its best expert) matches transformers",
    "[runtime][forward][hf][deepseek2]") {
  // model_type deepseek_v2: no selection bias, no renormalisation whatever norm_topk_prob says.
  check_arch("deepseek_v2_lite", 1e-4f);
  check_arch("deepseek_v2", 1e-4f);
}

TEST_CASE(
    "HF GLM-4.5 (partial RoPE, q/k/v bias, per-head QK norm, sigmoid routing) matches "
    "transformers",
    "[runtime][forward][hf]") {
  check_arch("glm4_moe", 1e-4f);
}

TEST_CASE(
    "HF MiniMax-M2 (whole-projection QK norm, partial RoPE, sigmoid routing) matches "
    "transformers",
    "[runtime][forward][hf]") {
  check_arch("minimax_m2", 1e-4f);
}

TEST_CASE("GGUF glm4moe and minimax-m2 copies of the HF fixtures match transformers",
          "[runtime][forward][hf][gguf]") {
  // scripts/fixtures/make_arch_gguf_fixtures.py wrote the same F32 weights with llama.cpp's
  // names and keys (glm4moe with an MTP layer the reader must skip).
  const std::string dir = std::string(TANDEM_SOURCE_DIR) + "/tests/fixtures/gguf/arch/";
  check_arch("glm4_moe", 1e-4f, true, dir + "glm4moe.gguf");
  check_arch("minimax_m2", 1e-4f, true, dir + "minimax-m2.gguf");
  auto glm = model::open_model(dir + "glm4moe.gguf");
  REQUIRE(glm.ok());
  CHECK(glm->spec->n_layers == 3);  // block_count 4 less the nextn layer
  CHECK(glm->spec->qk_norm == model::QkNorm::kPerHead);
  CHECK(glm->spec->attn_qkv_bias);
  CHECK(glm->weights->layers[1][model::WeightRole::kFfnNorm]->name ==
        "blk.1.post_attention_norm.weight");
  size_t mtp_unused = 0;
  for (const model::TensorInfo* t : glm->weights->unused)
    mtp_unused += t->name.starts_with("blk.3.");
  CHECK(mtp_unused == glm->weights->unused.size());
  CHECK(mtp_unused > 0);
}

}  // namespace
}  // namespace tandem::runtime::testing
