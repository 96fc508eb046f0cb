// Tests for ModelSpec building (GGUF metadata, HF config.json), the architecture table and the
// hyper-parameter checks. References: tests/fixtures/model/tiny_moe_*.json (gguf-py's reading of
// the tiny-moe files) and the transformers-written config.json files under tests/fixtures/hf/.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/model/architecture_spec.h"
#include "engine/model/gguf_file.h"
#include "engine/model/model.h"

namespace tandem::model {
namespace {

const std::string kTinyMoe = std::string(TANDEM_SHARED_DIR) + "/data/tiny-moe/";
const std::string kHf = std::string(TANDEM_SOURCE_DIR) + "/tests/fixtures/hf/";

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

ModelSpec hf_spec(const std::string& dir) {
  Result<ModelSpec> spec = spec_from_hf_config(read_json(kHf + dir + "/config.json"), dir);
  REQUIRE(spec.ok());
  return *spec;
}

}  // namespace

TEST_CASE("spec from the tiny-moe GGUF files matches gguf-py's reading", "[model][spec]") {
  for (const char* variant : {"f32", "q8_0"}) {
    INFO(variant);
    const nlohmann::json ref = read_json(std::string(TANDEM_SOURCE_DIR) +
                                         "/tests/fixtures/model/tiny_moe_" + variant + ".json");
    const nlohmann::json& m = ref["metadata"];
    Result<GgufFile> file = GgufFile::open(kTinyMoe + "tiny-moe-" + variant + ".gguf");
    REQUIRE(file.ok());
    Result<ModelSpec> spec = spec_from_gguf(*file);
    REQUIRE(spec.ok());
    const ModelSpec& s = *spec;
    CHECK(architecture_name(s.architecture) == ref["architecture"].get<std::string>());
    CHECK(s.name == m["general.name"].get<std::string>());
    CHECK(s.n_layers == m["qwen3moe.block_count"].get<uint64_t>());
    CHECK(s.context_length == m["qwen3moe.context_length"].get<uint64_t>());
    CHECK(s.hidden_size == m["qwen3moe.embedding_length"].get<uint64_t>());
    CHECK(s.n_heads == m["qwen3moe.attention.head_count"].get<uint64_t>());
    CHECK(s.n_kv_heads == m["qwen3moe.attention.head_count_kv"].get<uint64_t>());
    CHECK(s.head_dim == m["qwen3moe.attention.key_length"].get<uint64_t>());
    CHECK(s.head_dim_explicit);
    CHECK(s.rms_norm_eps ==
          Approx(m["qwen3moe.attention.layer_norm_rms_epsilon"].get<double>()).epsilon(1e-12));
    CHECK(s.rope.theta == m["qwen3moe.rope.freq_base"].get<double>());
    CHECK(s.rope.type == RopeType::kNeox);  // README: NEOX RoPE
    CHECK(s.rope.n_dims == 16);             // README: no dimension_count key, so head_dim
    CHECK(s.rope.scaling == RopeScalingType::kNone);
    CHECK(s.n_experts == m["qwen3moe.expert_count"].get<uint64_t>());
    CHECK(s.n_experts_used == m["qwen3moe.expert_used_count"].get<uint64_t>());
    CHECK(s.expert_ffn_size == m["qwen3moe.expert_feed_forward_length"].get<uint64_t>());
    CHECK(s.vocab_size == m["n_vocab_tokens"].get<uint64_t>());
    CHECK(s.bos_token_id == m["tokenizer.ggml.bos_token_id"].get<uint64_t>());
    CHECK(s.eos_token_id == m["tokenizer.ggml.eos_token_id"].get<uint64_t>());
    // README: per-head Q/K RMSNorm, renormalised top-k, no shared expert, no biases, untied.
    CHECK(s.qk_norm == QkNorm::kPerHead);
    CHECK(s.norm_topk_prob);
    CHECK(s.n_shared_experts == 0);
    CHECK_FALSE(s.attn_qkv_bias);
    CHECK_FALSE(s.tied_embeddings);
    CHECK(s.moe_layers == std::vector<bool>{true, true});
    CHECK(validate_spec(s).ok());
  }
}

TEST_CASE("spec from transformers config.json files", "[model][spec][hf]") {
  SECTION("qwen3_moe (num_local_experts, rope_parameters)") {
    const ModelSpec s = hf_spec("qwen3_moe");
    CHECK(s.architecture == Architecture::kQwen3Moe);
    CHECK(s.n_layers == 2);
    CHECK(s.hidden_size == 64);
    CHECK(s.n_heads == 4);
    CHECK(s.n_kv_heads == 2);
    CHECK(s.head_dim == 16);
    CHECK(s.head_dim_explicit);
    CHECK(s.n_experts == 8);
    CHECK(s.n_experts_used == 2);
    CHECK(s.expert_ffn_size == 32);
    CHECK(s.norm_topk_prob);
    CHECK(s.qk_norm == QkNorm::kPerHead);
    CHECK(s.rope.type == RopeType::kNeox);
    CHECK(s.rope.theta == 10000.0);
    CHECK(s.vocab_size == 256);
    CHECK(s.context_length == 128);
    CHECK(s.bos_token_id == 1u);
    CHECK(s.eos_token_id == 2u);
    CHECK(s.dense_ffn_size == 0);  // every layer is MoE: intermediate_size is not used
    CHECK(validate_spec(s).ok());
  }
  SECTION("qwen2_moe: shared expert with gate, qkv bias, no renormalisation") {
    const ModelSpec s = hf_spec("qwen2_moe");
    CHECK(s.architecture == Architecture::kQwen2Moe);
    CHECK(s.n_shared_experts == 1);
    CHECK(s.shared_expert_ffn_size == 48);
    CHECK(s.shared_expert_gate);
    CHECK(s.attn_qkv_bias);
    CHECK_FALSE(s.norm_topk_prob);
    CHECK(s.qk_norm == QkNorm::kNone);
    CHECK_FALSE(s.head_dim_explicit);
    CHECK(s.head_dim == 16);
    CHECK(validate_spec(s).ok());
  }
  SECTION("mixtral: num_local_experts, head_dim null, theta 1e6") {
    const ModelSpec s = hf_spec("mixtral_sharded");
    CHECK(s.architecture == Architecture::kMixtral);
    CHECK(s.n_experts == 8);
    CHECK(s.expert_ffn_size == 32);
    CHECK(s.norm_topk_prob);
    CHECK(s.rope.theta == 1e6);
    CHECK(s.rope.type == RopeType::kNeox);  // HF weights are not permuted: rotate_half
    CHECK_FALSE(s.head_dim_explicit);
    CHECK(validate_spec(s).ok());
  }
  SECTION("olmoe: whole-projection Q/K norm, no renormalisation") {
    const ModelSpec s = hf_spec("olmoe");
    CHECK(s.architecture == Architecture::kOlmoe);
    CHECK(s.qk_norm == QkNorm::kWholeProjection);
    CHECK_FALSE(s.norm_topk_prob);
    CHECK(s.expert_ffn_size == 32);
    CHECK(validate_spec(s).ok());
  }
  SECTION("decoder_sparse_step and mlp_only_layers make dense layers") {
    nlohmann::json c = read_json(kHf + "qwen3_moe/config.json");
    c["num_hidden_layers"] = 6;
    c["decoder_sparse_step"] = 2;
    c["mlp_only_layers"] = nlohmann::json::array({3});
    Result<ModelSpec> s = spec_from_hf_config(c, "config.json");
    INFO(s.status().message());
    REQUIRE(s.ok());
    CHECK(s->moe_layers == std::vector<bool>{false, true, false, false, false, true});
    CHECK(s->dense_ffn_size == 96);
  }
  SECTION("older spellings: top-level rope_theta, rope_scaling, num_experts") {
    nlohmann::json c = read_json(kHf + "qwen3_moe/config.json");
    c.erase("rope_parameters");
    c.erase("num_local_experts");
    c["num_experts"] = 8;
    c["rope_theta"] = 1e6;
    c["rope_scaling"] = {
        {"type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}};
    Result<ModelSpec> s = spec_from_hf_config(c, "config.json");
    REQUIRE(s.ok());
    CHECK(s->n_experts == 8);
    CHECK(s->rope.theta == 1e6);
    CHECK(s->rope.scaling == RopeScalingType::kYarn);
    CHECK(s->rope.scaling_factor == 4.0);
    CHECK(s->rope.original_context_length == 32768);
  }
  SECTION("every missing field is listed") {
    nlohmann::json c = read_json(kHf + "qwen3_moe/config.json");
    c.erase("hidden_size");
    c.erase("moe_intermediate_size");
    c["num_hidden_layers"] = "two";
    Result<ModelSpec> s = spec_from_hf_config(c, "config.json");
    REQUIRE_FALSE(s.ok());
    CHECK(s.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(s.status().message(), Catch::Contains("missing field hidden_size"));
    CHECK_THAT(s.status().message(), Catch::Contains("missing field moe_intermediate_size"));
    CHECK_THAT(s.status().message(), Catch::Contains("num_hidden_layers must be"));
  }
}

TEST_CASE("spec from a transformers GptOssForCausalLM config.json", "[model][spec][hf]") {
  // tests/fixtures/hf/gpt_oss_mxfp4/config.json, as GptOssConfig.save_pretrained wrote it.
  const nlohmann::json base = read_json(kHf + "gpt_oss_mxfp4/config.json");
  SECTION("the fixture: experts, windows, biases, sinks, YaRN with truncate = false") {
    const ModelSpec s = hf_spec("gpt_oss_mxfp4");
    CHECK(s.architecture == Architecture::kGptOss);
    CHECK(s.n_layers == 4);
    CHECK(s.hidden_size == 64);
    CHECK(s.n_heads == 8);
    CHECK(s.n_kv_heads == 2);
    CHECK(s.head_dim == 16);
    CHECK(s.n_experts == 8);
    CHECK(s.n_experts_used == 4);
    CHECK(s.expert_ffn_size == 96);
    CHECK(s.sliding_window == 8);
    CHECK(s.swa_layers == std::vector<bool>{true, false, true, false});
    CHECK(s.attn_qkv_bias);
    CHECK(s.attn_out_bias);
    CHECK(s.attn_sinks);
    CHECK(s.router_bias);
    CHECK(s.expert_bias);
    CHECK(s.routing == RoutingPolicy::kTopKSoftmax);
    CHECK(s.expert_activation == ExpertActivation::kSwiGluOai);
    CHECK(s.rope.type == RopeType::kNeox);
    CHECK(s.rope.theta == 150000.0);
    CHECK(s.rope.scaling == RopeScalingType::kYarn);
    CHECK(s.rope.scaling_factor == 32.0);
    CHECK(s.rope.original_context_length == 256);
    CHECK(s.rope.yarn_beta_fast == 32.0);
    CHECK(s.rope.yarn_beta_slow == 1.0);
    CHECK_FALSE(s.rope.yarn_truncate);
    CHECK(s.rms_norm_eps == 1e-5);
    CHECK_FALSE(s.tied_embeddings);
    CHECK(s.moe_layers == std::vector<bool>(4, true));
    CHECK(validate_spec(s).ok());
  }
  SECTION("gpt-oss-20b's spellings: rope_scaling, top-level rope_theta, experts_per_token") {
    nlohmann::json c = base;
    c.erase("rope_parameters");
    c.erase("num_experts_per_tok");
    c["experts_per_token"] = 4;
    c["rope_theta"] = 150000;
    c["rope_scaling"] = {{"beta_fast", 32.0},   {"beta_slow", 1.0},
                         {"factor", 32.0},      {"original_max_position_embeddings", 4096},
                         {"rope_type", "yarn"}, {"truncate", false}};
    Result<ModelSpec> s = spec_from_hf_config(c, "config.json");
    INFO(s.status().message());
    REQUIRE(s.ok());
    CHECK(s->n_experts_used == 4);
    CHECK(s->rope.original_context_length == 4096);
    CHECK_FALSE(s->rope.yarn_truncate);
    c["rope_scaling"]["truncate"] = true;
    CHECK(spec_from_hf_config(c, "config.json")->rope.yarn_truncate);
    c["rope_scaling"].erase("truncate");  // transformers' default
    CHECK(spec_from_hf_config(c, "config.json")->rope.yarn_truncate);
  }
  SECTION("no rope parameters: GptOssConfig's default YaRN (factor 32, 4096, truncate false)") {
    nlohmann::json c = base;
    c.erase("rope_parameters");
    Result<ModelSpec> s = spec_from_hf_config(c, "config.json");
    REQUIRE(s.ok());
    CHECK(s->rope.theta == 150000.0);
    CHECK(s->rope.scaling == RopeScalingType::kYarn);
    CHECK(s->rope.scaling_factor == 32.0);
    CHECK(s->rope.original_context_length == 4096);
    CHECK_FALSE(s->rope.yarn_truncate);
  }
  SECTION("without layer_types, even layers are windowed (GptOssConfig's default)") {
    nlohmann::json c = base;
    c.erase("layer_types");
    c["num_hidden_layers"] = 5;
    Result<ModelSpec> s = spec_from_hf_config(c, "config.json");
    REQUIRE(s.ok());
    CHECK(s->swa_layers == std::vector<bool>{true, false, true, false, true});
  }
  SECTION("layer_types decides per layer; sliding_window null windows nothing") {
    nlohmann::json c = base;
    c["layer_types"] = {"full_attention", "full_attention", "sliding_attention",
                        "sliding_attention"};
    CHECK(spec_from_hf_config(c, "config.json")->swa_layers ==
          std::vector<bool>{false, false, true, true});
    c["sliding_window"] = nullptr;
    Result<ModelSpec> s = spec_from_hf_config(c, "config.json");
    REQUIRE(s.ok());
    CHECK(s->sliding_window == 0);
    CHECK(s->swa_layers == std::vector<bool>(4, false));
  }
  SECTION("attention_bias = false drops the q/k/v/o biases") {
    nlohmann::json c = base;
    c["attention_bias"] = false;
    Result<ModelSpec> s = spec_from_hf_config(c, "config.json");
    REQUIRE(s.ok());
    CHECK_FALSE(s->attn_qkv_bias);
    CHECK_FALSE(s->attn_out_bias);
    CHECK(s->attn_sinks);
  }
  SECTION("refusals name the key") {
    nlohmann::json c = base;
    c["swiglu_limit"] = 10.0;
    c["swiglu_alpha"] = 1.5;
    c["layer_types"] = {"sliding_attention", "chunked_attention", "full_attention",
                        "full_attention"};
    c["quantization_config"]["quant_method"] = "fp8";
    c.erase("head_dim");
    Result<ModelSpec> s = spec_from_hf_config(c, "config.json");
    REQUIRE_FALSE(s.ok());
    CHECK(s.status().code() == StatusCode::kInvalidArgument);
    const std::string& m = s.status().message();
    CHECK_THAT(m, Catch::Contains("swiglu_limit = 10.0 is not supported"));
    CHECK_THAT(m, Catch::Contains("swiglu_alpha = 1.5 is not supported"));
    CHECK_THAT(m, Catch::Contains("layer_types[1] is \"chunked_attention\""));
    CHECK_THAT(m, Catch::Contains("quant_method \"fp8\" is not supported"));
    CHECK_THAT(m, Catch::Contains("missing field head_dim"));
    nlohmann::json d = base;
    d["layer_types"] = {"full_attention"};
    d.erase("sliding_window");
    Result<ModelSpec> t = spec_from_hf_config(d, "config.json");
    REQUIRE_FALSE(t.ok());
    CHECK_THAT(t.status().message(),
               Catch::Contains("layer_types lists 1 layers, num_hidden_layers is 4"));
    CHECK_THAT(t.status().message(), Catch::Contains("missing field sliding_window"));
  }
}

TEST_CASE("unsupported architectures are refused by name", "[model][spec]") {
  const std::string tail =
      " is not supported; supported: qwen3moe, qwen2moe, mixtral, olmoe, gpt-oss, deepseek2, "
      "glm4moe, minimax-m2";
  Result<Architecture> hf = architecture_from_hf("llama", "LlamaForCausalLM");
  REQUIRE_FALSE(hf.ok());
  CHECK(hf.status().code() == StatusCode::kUnimplemented);
  CHECK(hf.status().message() == "architecture llama" + tail);

  Result<Architecture> qwen3next = architecture_from_gguf("qwen3next", 512);
  REQUIRE_FALSE(qwen3next.ok());
  CHECK(qwen3next.status().message() == "architecture qwen3next" + tail);
  CHECK(architecture_from_gguf("deepseek2", 64).value() == Architecture::kDeepseek2);
  CHECK(architecture_from_gguf("glm4moe", 128).value() == Architecture::kGlm4Moe);
  CHECK(architecture_from_gguf("minimax-m2", 256).value() == Architecture::kMinimaxM2);
  // Kimi-K2's config.json: its own model_type over DeepSeek-V3's class and layout.
  CHECK(architecture_from_hf("kimi_k2", "DeepseekV3ForCausalLM").value() ==
        Architecture::kDeepseek2);
  CHECK(architecture_from_hf("deepseek_v3", "").value() == Architecture::kDeepseek2);

  // A dense Llama GGUF is not Mixtral.
  CHECK_FALSE(architecture_from_gguf("llama", 0).ok());
  CHECK(architecture_from_gguf("llama", 8).value() == Architecture::kMixtral);

  // A real GGUF of another architecture (the qwen2 vocabulary file).
  Result<GgufFile> vocab =
      GgufFile::open(std::string(TANDEM_SHARED_DIR) + "/data/vocab/ggml-vocab-qwen2.gguf");
  REQUIRE(vocab.ok());
  Result<ModelSpec> spec = spec_from_gguf(*vocab);
  REQUIRE_FALSE(spec.ok());
  CHECK(spec.status().message() == "architecture qwen2" + tail);

  nlohmann::json c = read_json(kHf + "qwen3_moe/config.json");
  c["model_type"] = "qwen3_next";
  Result<ModelSpec> hf_spec_result = spec_from_hf_config(c, "config.json");
  REQUIRE_FALSE(hf_spec_result.ok());
  CHECK(hf_spec_result.status().message() == "architecture qwen3_next" + tail);
}

TEST_CASE("check_spec lists every inconsistent hyper-parameter", "[model][spec]") {
  Result<GgufFile> file = GgufFile::open(kTinyMoe + "tiny-moe-f32.gguf");
  REQUIRE(file.ok());
  ModelSpec s = spec_from_gguf(*file).value();
  s.n_experts_used = 9;
  s.n_kv_heads = 3;
  s.bos_token_id = 2051;  // == vocab_size
  s.eos_token_id = 99999;
  s.head_dim_explicit = false;
  s.head_dim = 15;
  s.rope.n_dims = 15;
  std::vector<std::string> problems;
  check_spec(s, problems);
  CHECK(problems.size() == 6);
  const std::string message = validate_spec(s).message();
  CHECK_THAT(message, Catch::Contains("n_experts_used (9) > n_experts (8)"));
  CHECK_THAT(message, Catch::Contains("n_heads (4) is not a multiple of n_kv_heads (3)"));
  CHECK_THAT(message, Catch::Contains("bos_token_id (2051) >= vocab_size (2051)"));
  CHECK_THAT(message, Catch::Contains("eos_token_id (99999) >= vocab_size (2051)"));
  CHECK_THAT(message, Catch::Contains("hidden_size (64) != n_heads (4) * head_dim (15)"));
  CHECK_THAT(message, Catch::Contains("rope dimensions (15)"));

  ModelSpec huge = spec_from_gguf(*file).value();
  huge.n_layers = uint64_t{1} << 40;
  huge.n_experts = uint64_t{1} << 40;
  huge.n_experts_used = 2;
  problems.clear();
  check_spec(huge, problems);
  CHECK_FALSE(problems.empty());
  CHECK_FALSE(bind_weights(huge, {}, TensorNaming::kGguf).ok());  // refused, nothing allocated
}

TEST_CASE("canonical names from GGUF and HF names", "[model][names]") {
  CHECK(canonical_from_gguf("blk.1.ffn_gate_exps.weight", Architecture::kQwen3Moe) ==
        CanonicalName{WeightRole::kExpertGate, 1, -1});
  CHECK(canonical_from_gguf("blk.0.ffn_down.7.weight", Architecture::kQwen3Moe) ==
        CanonicalName{WeightRole::kExpertDown, 0, 7});
  CHECK(canonical_from_gguf("blk.0.ffn_down.weight", Architecture::kQwen3Moe) ==
        CanonicalName{WeightRole::kDenseDown, 0, -1});
  CHECK(canonical_from_gguf("blk.3.attn_q.bias", Architecture::kQwen3Moe) ==
        CanonicalName{WeightRole::kAttnQBias, 3, -1});
  CHECK(canonical_from_gguf("blk.3.ffn_gate_inp_shexp.weight", Architecture::kQwen3Moe) ==
        CanonicalName{WeightRole::kSharedExpertGate, 3, -1});
  CHECK(canonical_from_gguf("output.weight", Architecture::kQwen3Moe) ==
        CanonicalName{WeightRole::kLmHead});
  CHECK_FALSE(canonical_from_gguf("blk.x.attn_q.weight", Architecture::kQwen3Moe));
  CHECK_FALSE(canonical_from_gguf("blk.-1.attn_q.weight", Architecture::kQwen3Moe));
  CHECK_FALSE(canonical_from_gguf("rope_freqs.weight", Architecture::kQwen3Moe));

  CHECK(canonical_from_hf("model.layers.2.block_sparse_moe.experts.5.w3.weight",
                          Architecture::kMixtral) == CanonicalName{WeightRole::kExpertUp, 2, 5});
  CHECK(canonical_from_hf("model.layers.2.block_sparse_moe.gate.weight", Architecture::kMixtral) ==
        CanonicalName{WeightRole::kRouter, 2, -1});
  CHECK(canonical_from_hf("model.layers.0.mlp.experts.4.down_proj.weight",
                          Architecture::kQwen3Moe) == CanonicalName{WeightRole::kExpertDown, 0, 4});
  CHECK(canonical_from_hf("model.layers.0.mlp.gate.weight", Architecture::kOlmoe) ==
        CanonicalName{WeightRole::kRouter, 0, -1});
  CHECK(canonical_from_hf("model.layers.0.mlp.gate_proj.weight", Architecture::kQwen3Moe) ==
        CanonicalName{WeightRole::kDenseGate, 0, -1});
  CHECK(
      canonical_from_hf("model.layers.1.mlp.shared_expert_gate.weight", Architecture::kQwen2Moe) ==
      CanonicalName{WeightRole::kSharedExpertGate, 1, -1});
  // Mixtral's names are not Qwen's and vice versa.
  CHECK_FALSE(canonical_from_hf("model.layers.0.mlp.experts.4.w1.weight", Architecture::kQwen3Moe));
  CHECK_FALSE(canonical_from_hf("model.layers.0.block_sparse_moe.experts.4.gate_proj.weight",
                                Architecture::kMixtral));

  // GPT-OSS: its own names; the file's interleaved expert tensors map to no role (the opener
  // converts them into the derived names, which do).
  const Architecture oss = Architecture::kGptOss;
  CHECK(canonical_from_hf("model.layers.3.self_attn.sinks", oss) ==
        CanonicalName{WeightRole::kAttnSinks, 3, -1});
  CHECK(canonical_from_hf("model.layers.3.self_attn.o_proj.bias", oss) ==
        CanonicalName{WeightRole::kAttnOBias, 3, -1});
  CHECK(canonical_from_hf("model.layers.3.self_attn.q_proj.bias", oss) ==
        CanonicalName{WeightRole::kAttnQBias, 3, -1});
  CHECK(canonical_from_hf("model.layers.0.mlp.router.weight", oss) ==
        CanonicalName{WeightRole::kRouter, 0, -1});
  CHECK(canonical_from_hf("model.layers.0.mlp.router.bias", oss) ==
        CanonicalName{WeightRole::kRouterBias, 0, -1});
  CHECK(canonical_from_hf("model.layers.0.mlp.experts.down_proj_bias", oss) ==
        CanonicalName{WeightRole::kExpertDownBias, 0, -1});
  CHECK(canonical_from_hf("model.layers.0.post_attention_layernorm.weight", oss) ==
        CanonicalName{WeightRole::kFfnNorm, 0, -1});
  CHECK_FALSE(canonical_from_hf("model.layers.0.mlp.experts.gate_up_proj_blocks", oss));
  CHECK_FALSE(canonical_from_hf("model.layers.0.mlp.experts.gate_up_proj", oss));
  CHECK_FALSE(canonical_from_hf("model.layers.0.mlp.gate.weight", oss));
  CHECK_FALSE(canonical_from_hf("model.layers.0.self_attn.sinks", Architecture::kQwen3Moe));
  for (WeightRole role : {WeightRole::kExpertGate, WeightRole::kExpertUp, WeightRole::kExpertDown,
                          WeightRole::kExpertGateBias, WeightRole::kExpertUpBias}) {
    CHECK(canonical_from_hf(gpt_oss_hf_derived_name(role, 2), oss) == CanonicalName{role, 2, -1});
  }
  CHECK(gpt_oss_hf_derived_name(WeightRole::kExpertUp, 2) ==
        "model.layers.2.mlp.experts.up_proj.weight");
  CHECK(file_tensor_name({WeightRole::kExpertUp, 1, -1}, TensorNaming::kHf, oss) ==
        "model.layers.1.mlp.experts.gate_up_proj_blocks");
  CHECK(file_tensor_name({WeightRole::kExpertDown, 1, -1}, TensorNaming::kHf, oss) ==
        "model.layers.1.mlp.experts.down_proj_blocks");
  CHECK(file_tensor_name({WeightRole::kExpertGateBias, 1, -1}, TensorNaming::kHf, oss) ==
        "model.layers.1.mlp.experts.gate_up_proj_bias");
  CHECK(file_tensor_name({WeightRole::kAttnSinks, 1, -1}, TensorNaming::kHf, oss) ==
        "model.layers.1.self_attn.sinks");
  CHECK(file_tensor_name({WeightRole::kAttnQ, 1, -1}, TensorNaming::kHf, oss) ==
        "model.layers.1.self_attn.q_proj.weight");

  CHECK(file_tensor_name({WeightRole::kExpertGate, 1, -1}, TensorNaming::kGguf,
                         Architecture::kQwen3Moe) == "blk.1.ffn_gate_exps.weight");
  CHECK(file_tensor_name({WeightRole::kExpertDown, 1, 3}, TensorNaming::kHf,
                         Architecture::kMixtral) ==
        "model.layers.1.block_sparse_moe.experts.3.w2.weight");
  CHECK(file_tensor_name({WeightRole::kAttnKNorm, 0, -1}, TensorNaming::kHf,
                         Architecture::kQwen3Moe) == "model.layers.0.self_attn.k_norm.weight");
}

}  // namespace tandem::model
