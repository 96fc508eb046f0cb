// DeepSeek-V3-shaped forward pass against llama.cpp's tiny-deepseek2 references: MLA attention
// with a q LoRA (absorbed; split attn_k_b/attn_v_b and legacy attn_kv_b layouts), YaRN with
// DeepSeek's attention factor, sigmoid routing with a selection bias and group-limited top-k, a
// plain shared expert and a leading dense layer (shared/data/tiny-deepseek2/README.md).
#include <catch2/catch.hpp>

#include "engine/experts/routing.h"
#include "engine/runtime/paged_kv_cache.h"
#include "kernels/cpu/matmul.h"
#include "tests/runtime/llamacpp_reference.h"
#include "tests/runtime/paged_pool.h"

namespace tandem::runtime::testing {
namespace {

std::string deepseek2_dir() {
  return std::string(TANDEM_SHARED_DIR) + "/data/tiny-deepseek2/";
}

TEST_CASE("tiny-deepseek2 F32 logits and greedy tokens match llama.cpp", "[runtime][deepseek2]") {
  // All F32: llama.cpp runs float throughout; the README's numpy reference agrees with it to
  // 6.1e-7, so 1e-4 leaves room only for float rounding.
  check_llamacpp_reference(deepseek2_dir(), "tiny-deepseek2-", "f32", 1e-4f, true);
}

TEST_CASE("tiny-deepseek2 legacy attn_kv_b layout matches llama.cpp", "[runtime][deepseek2]") {
  // llama.cpp runs this file as plain MHA; Tandem splits attn_kv_b at load and runs the same
  // absorbed MLA as for the split layout.
  check_llamacpp_reference(deepseek2_dir(), "tiny-deepseek2-legacy-", "f32", 1e-4f, true);
}

TEST_CASE("tiny-deepseek2 Q8_0 matches llama.cpp with Q8_0 activations", "[runtime][deepseek2]") {
  // Activation quantization is emulated as llama.cpp does (Q8_0 for Q8_0 weights, the MLA
  // matmuls included); one activation on the other side of a rounding boundary moves a row by up
  // to ~2e-2 (README), hence 3e-2, teacher-forced, argmax where the margin is clear.
  check_llamacpp_reference(deepseek2_dir(), "tiny-deepseek2-", "q8_0", 3e-2f, false);
}

TEST_CASE("tiny-deepseek2 Q4_K_M (Q4_K, Q5_0, Q6_K, Q8_0) matches llama.cpp",
          "[runtime][deepseek2]") {
  check_llamacpp_reference(deepseek2_dir(), "tiny-deepseek2-", "q4_k_m", 3e-2f, false);
}

TEST_CASE("tiny-deepseek2 Q4_K_M: repacked and mapped weights give the same bits",
          "[runtime][deepseek2]") {
  // Q4_K experts and dense Q4_K matrices (MLA's q_a, q_b, kv_a among them) are copied into the
  // x8 layout where the active kernels prefer it (RunnerOptions::interleave_*); the logits of a
  // prefill and of decode steps must not change by a bit.
  if (!kernels::interleaved_layout_preferred(TensorType::kQ4_K)) {
    WARN("the active kernels do not repack Q4_K here: both runs read the mapped rows");
  }
  const std::string path = deepseek2_dir() + "tiny-deepseek2-q4_k_m.gguf";
  auto repacked = load_model(path, 2, true, true);
  auto mapped = load_model(path, 2, true, false);
  CHECK(mapped->runner->prepared_weights().interleaved.empty());
  if (kernels::interleaved_layout_preferred(TensorType::kQ4_K)) {
    CHECK_FALSE(repacked->runner->prepared_weights().interleaved.empty());
  }
  const auto ref = read_json(deepseek2_dir() + "ref-q4_k_m.json");
  const auto ids = ref["prompts"][0]["tokens"].get<std::vector<int32_t>>();
  auto cache_a = repacked->runner->new_kv_cache();
  auto cache_b = mapped->runner->new_kv_cache();
  std::vector<float> a = prefill_all(*repacked->runner, ids, *cache_a);
  std::vector<float> b = prefill_all(*mapped->runner, ids, *cache_b);
  CHECK(a == b);
  ForwardOutput out_a, out_b;
  for (int32_t token : {5, 17, 3}) {
    std::vector<int32_t> one{token};
    SequenceInput sa{cache_a.get(), one, cache_a->length(), LogitsWanted::kLast};
    SequenceInput sb{cache_b.get(), one, cache_b->length(), LogitsWanted::kLast};
    REQUIRE(repacked->runner->forward({&sa, 1}, out_a).ok());
    REQUIRE(mapped->runner->forward({&sb, 1}, out_b).ok());
    CHECK(out_a.logits == out_b.logits);
  }
}

TEST_CASE("tiny-deepseek2 spec: MLA sizes, DeepSeek router, shared expert, YaRN attention factor",
          "[runtime][deepseek2]") {
  for (const char* file : {"tiny-deepseek2-f32.gguf", "tiny-deepseek2-legacy-f32.gguf"}) {
    INFO(file);
    auto ckpt = model::open_model(deepseek2_dir() + file);
    REQUIRE(ckpt.ok());
    const model::ModelSpec& s = *ckpt->spec;
    const bool legacy = std::string(file).find("legacy") != std::string::npos;
    CHECK(s.architecture == model::Architecture::kDeepseek2);
    CHECK(s.attention == model::AttentionKind::kMla);
    CHECK(s.mla.q_lora_rank == 96);
    CHECK(s.mla.kv_lora_rank == 64);
    CHECK(s.mla.qk_nope_dim == 32);
    CHECK(s.mla.qk_rope_dim == 16);
    CHECK(s.mla.v_head_dim == 40);
    CHECK(s.mla.split_kv_b == !legacy);
    // One cached row of kv_lora + rope floats per token and layer, no separate values.
    CHECK(s.n_kv_heads == 1);
    CHECK(s.kv_dim() == 80);
    CHECK(s.kv_value_dim() == 0);
    CHECK(s.attn_out_dim() == 160);
    CHECK(s.rope.type == model::RopeType::kNormal);
    CHECK(s.rope.yarn_mscale_all_dim == Approx(1.0));
    // (1 + 0.1 ln 40)^2 / sqrt(48), the README's 0.270468.
    CHECK(s.attn_scale == Approx(0.270468).epsilon(1e-5));
    CHECK(s.routing == model::RoutingPolicy::kSigmoidTopK);
    CHECK(s.router_selection_bias);
    CHECK(s.n_expert_groups == 4);
    CHECK(s.n_expert_groups_used == 2);
    CHECK(s.expert_weights_scale == Approx(2.5));
    CHECK(s.norm_topk_prob);
    CHECK(s.n_shared_experts == 1);
    CHECK(s.shared_expert_ffn_size == 32);
    CHECK_FALSE(s.shared_expert_gate);
    CHECK(s.moe_layers == std::vector<bool>{false, true, true});
    CHECK(s.dense_ffn_size == 128);
    const model::LayerWeights& l1 = ckpt->weights->layers[1];
    CHECK(l1[model::WeightRole::kRouterSelectionBias]->name == "blk.1.exp_probs_b.bias");
    CHECK((legacy ? l1[model::WeightRole::kAttnKvB] : l1[model::WeightRole::kAttnKB]) != nullptr);
    CHECK(ckpt->weights->unused.empty());
  }
}

TEST_CASE("an MLA model refuses a KV cache that stores values", "[runtime][deepseek2]") {
  auto model = load_model(deepseek2_dir() + "tiny-deepseek2-f32.gguf");
  auto cache = model->runner->new_kv_cache();
  CHECK(cache->keys_only());
  DenseKvCache with_values(3, 80, 64);  // same row width, K and V planes
  const std::vector<int32_t> ids = {1, 2, 3};
  SequenceInput seq{&with_values, ids, 0, LogitsWanted::kLast};
  ForwardOutput out;
  const Status s = model->runner->forward({&seq, 1}, out);
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("KV cache shaped for another model"));
}

TEST_CASE("sigmoid routing keeps the best expert groups and weighs by the unbiased scores",
          "[experts][deepseek2]") {
  // 8 experts in 4 groups of 2, top-2 within the best 2 groups. Logits are chosen so that the
  // bias changes the winner: expert 1's raw score is the highest, but group 0's biased sum loses.
  std::vector<float> logits = {3.0f, -3.0f, 0.5f, 0.4f, 0.0f, 0.1f, -1.0f, -1.0f};
  const std::vector<float> bias = {0.0f, -1.0f, 0.2f, 0.2f, 0.3f, 0.3f, 0.0f, 0.0f};
  std::vector<float> p(logits.size());
  for (size_t e = 0; e < p.size(); ++e) p[e] = 1.0f / (1.0f + std::exp(-logits[e]));
  // Group scores (sum of both biased scores): g0 = p0 + p1 - 1, g1 = p2 + p3 + 0.4,
  // g2 = p4 + p5 + 0.6, g3 = p6 + p7. Best two: g2 (1.625) and g1 (1.621); g0 = 0.0 loses
  // although p0 = 0.95 is the largest score.
  experts::RouterRecipe recipe;
  recipe.policy = model::RoutingPolicy::kSigmoidTopK;
  recipe.renormalize = true;
  recipe.n_groups = 4;
  recipe.n_groups_used = 2;
  recipe.scale = 2.5f;
  experts::Routing r;
  experts::route(logits, 1, 8, 2, recipe, r, bias);
  // Biased: e2 0.822, e3 0.799, e4 0.8, e5 0.825 -> e5 then e2.
  REQUIRE(r.experts == std::vector<int32_t>{5, 2});
  const float sum = p[5] + p[2];
  CHECK(r.weights[0] == Approx(p[5] / sum * 2.5f));
  CHECK(r.weights[1] == Approx(p[2] / sum * 2.5f));

  // Without groups the unbiased winner is back in reach: e0 (0.953 biased) is first.
  std::vector<float> again = {3.0f, -3.0f, 0.5f, 0.4f, 0.0f, 0.1f, -1.0f, -1.0f};
  recipe.n_groups = 0;
  experts::route(again, 1, 8, 2, recipe, r, bias);
  CHECK(r.experts[0] == 0);
}

TEST_CASE("DeepSeek-V2's group-limited greedy scores a group by its best expert",
          "[experts][deepseek2]") {
  // Softmax scores, 8 experts in 4 groups of 2, top-2 within the best 2 groups, no bias, no
  // renormalisation. In units of e^0: e0 = 7.39 (e1 = 0.002), e2 = e3 = 4.48, e6 = e7 = 4.06. By
  // the sum of two (V3) groups 1 (8.96) and 3 (8.11) beat group 0 (7.39) and e0 is out; by the
  // best one (V2) groups 0 (7.39) and 1 (4.48) win and e0 is chosen first.
  const std::vector<float> logits = {2.0f, -6.0f, 1.5f, 1.5f, -1.0f, -1.0f, 1.4f, 1.4f};
  experts::RouterRecipe recipe;
  recipe.policy = model::RoutingPolicy::kSoftmaxTopK;
  recipe.n_groups = 4;
  recipe.n_groups_used = 2;
  experts::Routing r;
  std::vector<float> v3 = logits;
  recipe.group_score_top = 2;
  experts::route(v3, 1, 8, 2, recipe, r);
  CHECK(r.experts == std::vector<int32_t>{2, 3});
  std::vector<float> v2 = logits;
  recipe.group_score_top = 1;
  experts::route(v2, 1, 8, 2, recipe, r);
  CHECK(r.experts == std::vector<int32_t>{0, 2});
  float z = 0.0f;
  for (float l : logits) z += std::exp(l);
  CHECK(r.weights[0] == Approx(std::exp(2.0f) / z));
}

TEST_CASE("tiny-deepseek2 in MLA's expanded form matches llama.cpp", "[runtime][deepseek2]") {
  // MlaPrefill::kExpanded for every sequence: per-head keys k_b^T c and values v_b c expanded from
  // the cached latent rows, then plain attention. The same arithmetic as llama.cpp's absorbed
  // form in exact numbers; in floats rounding apart (F32, both layouts: the F32 bound) and, on the
  // quantized file, the activation quantization of different matrix inputs (v_b meets the latent
  // rows rather than the attention output; q_nope meets no quantized matrix): the Q8_0 bound.
  check_llamacpp_reference(deepseek2_dir(), "tiny-deepseek2-", "f32", 1e-4f, true,
                           kernels::KvType::kF32, MlaPrefill::kExpanded);
  check_llamacpp_reference(deepseek2_dir(), "tiny-deepseek2-legacy-", "f32", 1e-4f, true,
                           kernels::KvType::kF32, MlaPrefill::kExpanded);
  check_llamacpp_reference(deepseek2_dir(), "tiny-deepseek2-", "q8_0", 3e-2f, false,
                           kernels::KvType::kF32, MlaPrefill::kExpanded);
}

TEST_CASE("MLA's automatic form at DeepSeek-V3's shape: multiply-adds and the 1 GiB bound",
          "[runtime][deepseek2]") {
  // The choice alone (no forward pass could reach the bound here): DeepSeek-V3's 128 heads,
  // kv_lora 512, rope 64, nope 128, v_head 128.
  model::ModelSpec spec;
  spec.architecture = model::Architecture::kDeepseek2;
  spec.attention = model::AttentionKind::kMla;
  spec.n_heads = 128;
  spec.mla.q_lora_rank = 1536;
  spec.mla.kv_lora_rank = 512;
  spec.mla.qk_nope_dim = 128;
  spec.mla.qk_rope_dim = 64;
  spec.mla.v_head_dim = 128;
  // Per position: 512 x 6 + 64 x 4 bytes of latent rows, and per busy thread keys and values of
  // width 192 in floats (2 x 192 x 4).
  CHECK(mla_expanded_bytes(spec, 2, 1) == 3328 + 2 * 1536);
  CHECK(mla_expanded_bytes(spec, 64, 1) == 3328 + 64 * 1536);
  CHECK(mla_expanded_bytes(spec, 1000, 1) == 3328 + 128 * 1536);  // at most one thread per head

  // Decode steps and short chunks stay absorbed; a fresh long prompt expands.
  CHECK_FALSE(mla_auto_expands(spec, 2, 500, 1));
  CHECK_FALSE(mla_auto_expands(spec, 2, 0, kMlaExpandedMinTokens - 1));
  CHECK(mla_auto_expands(spec, 2, 0, kMlaExpandedMinTokens));
  CHECK(mla_auto_expands(spec, 2, 0, 2048));
  // A short chunk after a long context: expanding the whole context costs more than it saves.
  CHECK_FALSE(mla_auto_expands(spec, 2, 100000, kMlaExpandedMinTokens));
  CHECK(mla_auto_expands(spec, 2, 100000, 16384));

  // The bound: the largest context whose expansion fits 1 GiB with 2 threads (6,400 bytes a
  // position: 167,772 positions), and one more; with 64 threads far fewer (10,564).
  const size_t most = kMlaExpandedMaxBytes / mla_expanded_bytes(spec, 2, 1);
  REQUIRE(most == 167772);
  const size_t n = 16384;
  CHECK(mla_auto_expands(spec, 2, most - n, n));
  CHECK_FALSE(mla_auto_expands(spec, 2, most - n + 1, n));
  CHECK(kMlaExpandedMaxBytes / mla_expanded_bytes(spec, 64, 1) == 10564);
  CHECK(mla_auto_expands(spec, 64, 0, 10564));
  CHECK_FALSE(mla_auto_expands(spec, 64, 0, 10565));
}

TEST_CASE("MLA's automatic form: per sequence, and a mixed batch gives each sequence's bits",
          "[runtime][deepseek2]") {
  // kAuto expands a fresh prompt of kMlaExpandedMinTokens or more (fewer multiply-adds) and keeps
  // a decode step absorbed. In one pass with both, each sequence must get the bits it gets alone.
  const std::string path = deepseek2_dir() + "tiny-deepseek2-f32.gguf";
  auto autom = load_model(path, 2, true, true, kernels::KvType::kF32, MlaPrefill::kAuto);
  auto expanded = load_model(path, 2, true, true, kernels::KvType::kF32, MlaPrefill::kExpanded);
  auto absorbed = load_model(path, 2, true, true, kernels::KvType::kF32, MlaPrefill::kAbsorbed);
  const size_t vocab = autom->runner->n_vocab();
  std::vector<int32_t> long_prompt(kMlaExpandedMinTokens + 22);
  for (size_t i = 0; i < long_prompt.size(); ++i) {
    long_prompt[i] = static_cast<int32_t>((i * 977 + 13) % vocab);
  }
  const std::vector<int32_t> short_prompt{11, 404, 7, 1999, 52, 3};

  // The long prompt: kAuto's bits are the expanded form's, within float rounding of the absorbed.
  auto cache_auto = autom->runner->new_kv_cache();
  auto cache_exp = expanded->runner->new_kv_cache();
  auto cache_abs = absorbed->runner->new_kv_cache();
  const std::vector<float> auto_logits = prefill_all(*autom->runner, long_prompt, *cache_auto);
  CHECK(auto_logits == prefill_all(*expanded->runner, long_prompt, *cache_exp));
  const std::vector<float> abs_logits = prefill_all(*absorbed->runner, long_prompt, *cache_abs);
  CHECK(max_abs_diff(auto_logits, abs_logits) < 1e-4f);
  CHECK(max_abs_diff(auto_logits, abs_logits) > 0.0f);  // the two forms did run

  // Alone: a short prompt, then one decode step (absorbed), on fresh caches.
  auto short_cache = autom->runner->new_kv_cache();
  prefill_all(*autom->runner, short_prompt, *short_cache);
  const std::vector<int32_t> step{42};
  ForwardOutput alone;
  SequenceInput decode{short_cache.get(), step, short_prompt.size(), LogitsWanted::kLast};
  REQUIRE(autom->runner->forward({&decode, 1}, alone).ok());
  const std::vector<float> decode_alone = alone.logits;

  // Together: the same decode step (on a copy of the short prompt's state) beside the long
  // prompt on a fresh cache.
  auto short_again = autom->runner->new_kv_cache();
  prefill_all(*autom->runner, short_prompt, *short_again);
  auto long_cache = autom->runner->new_kv_cache();
  SequenceInput both[2] = {
      {short_again.get(), step, short_prompt.size(), LogitsWanted::kLast},
      {long_cache.get(), long_prompt, 0, LogitsWanted::kAll},
  };
  ForwardOutput together;
  REQUIRE(autom->runner->forward({both, 2}, together).ok());
  REQUIRE(together.n_rows[0] == 1);
  REQUIRE(together.n_rows[1] == long_prompt.size());
  const std::span<const float> first(together.logits.data(), vocab);
  CHECK(std::vector<float>(first.begin(), first.end()) == decode_alone);
  const std::span<const float> second(together.logits.data() + vocab, long_prompt.size() * vocab);
  CHECK(std::vector<float>(second.begin(), second.end()) == auto_logits);

  // The long prompt through a paged keys-only cache of 3-position blocks (the scheduler's
  // storage), after a neighbour took the first block: the expanded form reads the latent rows
  // through the block table, to the same bits.
  PagedPool p = make_pool(*autom->runner, 3, long_prompt.size() / 3 + 8);  // keys only: MLA
  PagedKvCache neighbour(*p.pool, *p.allocator, 1, 64);
  REQUIRE(neighbour.prepare_write(0, 1).ok());
  PagedKvCache paged(*p.pool, *p.allocator, 2, 256);
  CHECK(prefill_all(*autom->runner, long_prompt, paged) == auto_logits);
}

TEST_CASE("tiny-deepseek2's expanded form over an f16 latent cache stays close to llama.cpp",
          "[runtime][forward][kv]") {
  // The latent rows read back from halves for the expansion; bound as for the absorbed f16 case.
  check_llamacpp_reference(deepseek2_dir(), "tiny-deepseek2-", "f32", 1e-3f, true,
                           kernels::KvType::kF16, MlaPrefill::kExpanded);
}

TEST_CASE("tiny-deepseek2 F32 with an f16 latent KV cache stays close to llama.cpp",
          "[runtime][forward][kv]") {
  // MLA's keys-only cache (the latent row and the RoPE part) in halves; references from an F32
  // cache. Bound and greedy as for tiny-moe's f16 case.
  check_llamacpp_reference(deepseek2_dir(), "tiny-deepseek2-", "f32", 1e-3f, true,
                           kernels::KvType::kF16);
}

}  // namespace
}  // namespace tandem::runtime::testing
