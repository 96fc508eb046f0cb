// Tests for opening checkpoints and binding their weights: the tiny-moe GGUF files, the HF
// fixtures (per-expert tensors, sharded Mixtral) and A10 cases built as in-memory tensor lists.
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

#include "engine/model/architecture_spec.h"
#include "engine/model/gguf_file.h"
#include "engine/model/model.h"
#include "tests/model/safetensors_test_util.h"

namespace tandem::model {
namespace {

const std::string kTinyMoe = std::string(TANDEM_SHARED_DIR) + "/data/tiny-moe/";
const std::string kHf = std::string(TANDEM_SOURCE_DIR) + "/tests/fixtures/hf/";

// The tiny-moe spec: qwen3moe, 2 layers, hidden 64, 4/2 heads of 16, 8 experts top-2 of ffn 32,
// vocab 2051 (tiny-moe README).
ModelSpec tiny_spec() {
  Result<GgufFile> file = GgufFile::open(kTinyMoe + "tiny-moe-f32.gguf");
  TANDEM_CHECK(file.ok());
  return spec_from_gguf(*file).value();
}

// Zero bytes that in-memory tensors view (F32, so 4 bytes per element).
std::span<const uint8_t> zeros(uint64_t bytes) {
  static std::vector<uint8_t> buffer(4 << 20);
  TANDEM_CHECK(bytes <= buffer.size());
  return {buffer.data(), bytes};
}

TensorInfo f32(std::string name, std::vector<uint64_t> shape) {
  TensorInfo t;
  t.name = std::move(name);
  t.type = TensorType::kF32;
  t.n_elements = 1;
  for (uint64_t d : shape) t.n_elements *= d;
  t.shape = std::move(shape);
  t.data = zeros(t.n_elements * 4);
  t.file = "memory";
  return t;
}

// A complete, consistent GGUF-named tensor list for `s` (fused experts).
std::vector<TensorInfo> gguf_tensors(const ModelSpec& s) {
  const uint64_t h = s.hidden_size, f = s.expert_ffn_size, n = s.n_experts;
  std::vector<TensorInfo> t = {f32("token_embd.weight", {s.vocab_size, h}),
                               f32("output_norm.weight", {h}),
                               f32("output.weight", {s.vocab_size, h})};
  for (uint64_t i = 0; i < s.n_layers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    for (auto&& x :
         {f32(b + "attn_norm.weight", {h}), f32(b + "attn_q.weight", {s.q_dim(), h}),
          f32(b + "attn_k.weight", {s.kv_dim(), h}), f32(b + "attn_v.weight", {s.kv_dim(), h}),
          f32(b + "attn_output.weight", {h, s.q_dim()}),
          f32(b + "attn_q_norm.weight", {s.head_dim}), f32(b + "attn_k_norm.weight", {s.head_dim}),
          f32(b + "ffn_norm.weight", {h}), f32(b + "ffn_gate_inp.weight", {n, h}),
          f32(b + "ffn_gate_exps.weight", {n, f, h}), f32(b + "ffn_up_exps.weight", {n, f, h}),
          f32(b + "ffn_down_exps.weight", {n, h, f})}) {
      t.push_back(x);
    }
  }
  return t;
}

void remove_tensor(std::vector<TensorInfo>& tensors, const std::string& name) {
  std::erase_if(tensors, [&](const TensorInfo& t) { return t.name == name; });
}

TensorInfo& find(std::vector<TensorInfo>& tensors, const std::string& name) {
  for (TensorInfo& t : tensors) {
    if (t.name == name) return t;
  }
  FAIL("no tensor " << name);
  return tensors.front();
}

}  // namespace

TEST_CASE("the tiny-moe GGUF files open and bind", "[model][checkpoint]") {
  for (const char* variant : {"f32", "q8_0"}) {
    INFO(variant);
    Result<Checkpoint> c = open_model(kTinyMoe + "tiny-moe-" + variant + ".gguf");
    REQUIRE(c.ok());
    CHECK(c->format == CheckpointFormat::kGguf);
    REQUIRE(c->spec);
    REQUIRE(c->weights);
    const ModelWeights& w = *c->weights;
    CHECK(w.unused.empty());
    CHECK_FALSE(w.tied_embeddings);
    CHECK(w.lm_head->name == "output.weight");
    REQUIRE(w.layers.size() == 2);
    const LayerWeights& l1 = w.layers[1];
    CHECK(l1.moe);
    CHECK(l1[WeightRole::kAttnQNorm]->name == "blk.1.attn_q_norm.weight");
    CHECK(l1[WeightRole::kRouter]->name == "blk.1.ffn_gate_inp.weight");
    CHECK(l1[WeightRole::kRouter]->type ==
          TensorType::kF32);  // README: routers stay F32 in the Q8_0 file
    REQUIRE(l1.experts_gate.is_fused());
    CHECK(l1.experts_gate.n_experts() == 8);
    // Expert 5's gate is the 6th [32, 64] slab of blk.1.ffn_gate_exps.weight.
    const MatrixView g5 = l1.experts_gate.expert(5);
    const TensorInfo* fused = l1.experts_gate.tensors()[0];
    CHECK(g5.rows == 32);
    CHECK(g5.cols == 64);
    CHECK(g5.data.size() == fused->data.size() / 8);
    CHECK(g5.data.data() == fused->data.data() + 5 * g5.data.size());
    CHECK(g5.file_offset == fused->file_offset + 5 * g5.data.size());
    const MatrixView d7 = l1.experts_down.expert(7);
    CHECK(d7.rows == 64);
    CHECK(d7.cols == 32);
    CHECK(d7.data.data() + d7.data.size() ==
          l1.experts_down.tensors()[0]->data.data() + l1.experts_down.tensors()[0]->data.size());
  }
}

TEST_CASE("HF checkpoints bind per-expert tensors to the same roles", "[model][checkpoint][hf]") {
  SECTION("qwen3_moe") {
    Result<Checkpoint> c = open_model(kHf + "qwen3_moe");
    REQUIRE(c.ok());
    const LayerWeights& l0 = c->weights->layers[0];
    CHECK_FALSE(l0.experts_gate.is_fused());
    CHECK(l0.experts_gate.n_experts() == 8);
    const MatrixView g3 = l0.experts_gate.expert(3);
    CHECK(g3.source->name == "model.layers.0.mlp.experts.3.gate_proj.weight");
    CHECK(g3.rows == 32);
    CHECK(g3.cols == 64);
    CHECK(g3.data.data() == g3.source->data.data());
    CHECK(l0.experts_down.expert(3).source->name ==
          "model.layers.0.mlp.experts.3.down_proj.weight");
    CHECK(l0[WeightRole::kAttnQNorm]->name == "model.layers.0.self_attn.q_norm.weight");
    CHECK(l0[WeightRole::kAttnNorm]->name == "model.layers.0.input_layernorm.weight");
    CHECK(l0[WeightRole::kFfnNorm]->name == "model.layers.0.post_attention_layernorm.weight");
    CHECK(c->weights->unused.empty());
  }
  SECTION("qwen2_moe: shared expert, its gate and qkv biases") {
    Result<Checkpoint> c = open_model(kHf + "qwen2_moe");
    REQUIRE(c.ok());
    const LayerWeights& l1 = c->weights->layers[1];
    CHECK(l1[WeightRole::kSharedGate]->name == "model.layers.1.mlp.shared_expert.gate_proj.weight");
    CHECK(l1[WeightRole::kSharedDown]->shape == std::vector<uint64_t>{64, 48});
    CHECK(l1[WeightRole::kSharedExpertGate]->shape == std::vector<uint64_t>{1, 64});
    CHECK(l1[WeightRole::kAttnQBias]->name == "model.layers.1.self_attn.q_proj.bias");
    CHECK(c->weights->unused.empty());
  }
  SECTION("mixtral, sharded: w1/w3/w2 are gate/up/down; experts span shards") {
    Result<Checkpoint> c = open_model(kHf + "mixtral_sharded");
    REQUIRE(c.ok());
    const LayerWeights& l1 = c->weights->layers[1];
    CHECK(l1[WeightRole::kRouter]->name == "model.layers.1.block_sparse_moe.gate.weight");
    CHECK(l1.experts_gate.expert(6).source->name ==
          "model.layers.1.block_sparse_moe.experts.6.w1.weight");
    CHECK(l1.experts_up.expert(6).source->name ==
          "model.layers.1.block_sparse_moe.experts.6.w3.weight");
    CHECK(l1.experts_down.expert(6).rows == 64);
    CHECK(c->weights->unused.empty());
    std::set<std::string> files;
    for (const TensorInfo& t : c->tensors) files.insert(t.file);
    CHECK(files.size() == 4);
  }
  SECTION("olmoe: Q/K norms over the whole projection") {
    Result<Checkpoint> c = open_model(kHf + "olmoe");
    REQUIRE(c.ok());
    CHECK(c->weights->layers[0][WeightRole::kAttnQNorm]->shape == std::vector<uint64_t>{64});
    CHECK(c->weights->layers[0][WeightRole::kAttnKNorm]->shape == std::vector<uint64_t>{32});
  }
  SECTION("a lone safetensors file lists but is not runnable") {
    Result<Checkpoint> c = open_checkpoint(kHf + "olmoe/model.safetensors");
    REQUIRE(c.ok());
    CHECK_FALSE(c->spec);
    CHECK(c->tensors.size() == 69);
    CHECK_THAT(c->not_runnable_reason, Catch::Contains("config.json"));
    CHECK_FALSE(open_model(kHf + "olmoe/model.safetensors").ok());
  }
}

TEST_CASE("a vocabulary-only GGUF opens as a non-runnable checkpoint", "[model][checkpoint]") {
  Result<Checkpoint> c =
      open_checkpoint(std::string(TANDEM_SHARED_DIR) + "/data/vocab/ggml-vocab-llama-spm.gguf");
  REQUIRE(c.ok());
  CHECK_FALSE(c->spec);
  CHECK(c->tensors.empty());
  CHECK(c->architecture_name == "llama");
  CHECK_FALSE(c->metadata.empty());
}

TEST_CASE("a file that is neither GGUF nor safetensors is named as such", "[model][checkpoint]") {
  testing::TempDir dir;
  dir.write("typo.gguf", std::string("GGUG\x03\0\0\0\0\0\0\0", 12) + std::string(64, '\0'));
  dir.write("empty.gguf", "");
  dir.write("lone.safetensors", testing::safetensors_bytes("{}", ""));
  const Status typo = detect_checkpoint_format(dir.path() + "/typo.gguf").status();
  CHECK(typo.code() == StatusCode::kInvalidArgument);
  CHECK(typo.message() == dir.path() +
                              "/typo.gguf: neither a GGUF file (it does not start with \"GGUF\"; "
                              "its first bytes are 47 47 55 47) nor a safetensors file (no JSON "
                              "header after the 8-byte length)");
  CHECK_THAT(detect_checkpoint_format(dir.path() + "/empty.gguf").status().message(),
             Catch::Contains("the file is empty"));
  CHECK(detect_checkpoint_format(dir.path() + "/lone.safetensors").value() ==
        CheckpointFormat::kSafetensors);
  CHECK(detect_checkpoint_format(kTinyMoe + "tiny-moe-f32.gguf").value() ==
        CheckpointFormat::kGguf);
}

TEST_CASE("A10: one error lists every missing or wrong tensor", "[model][checkpoint][a10]") {
  const ModelSpec spec = tiny_spec();
  std::vector<TensorInfo> tensors = gguf_tensors(spec);
  REQUIRE(check_model(spec, tensors, TensorNaming::kGguf).ok());

  remove_tensor(tensors, "blk.1.ffn_up_exps.weight");
  remove_tensor(tensors, "blk.0.attn_k_norm.weight");
  find(tensors, "blk.0.attn_q.weight") = f32("blk.0.attn_q.weight", {32, 64});
  find(tensors, "blk.1.ffn_down_exps.weight") = f32("blk.1.ffn_down_exps.weight", {8, 32, 64});
  find(tensors, "token_embd.weight") = f32("token_embd.weight", {2000, 64});
  find(tensors, "output.weight").type = TensorType::kI32;
  tensors.push_back(f32("blk.0.extra_thing.weight", {4}));
  Result<ModelWeights> w = check_model(spec, tensors, TensorNaming::kGguf);
  REQUIRE_FALSE(w.ok());
  CHECK(w.status().code() == StatusCode::kInvalidArgument);
  const std::string& m = w.status().message();
  CHECK_THAT(m, Catch::Contains("missing tensor blk.1.ffn_up_exps.weight"));
  CHECK_THAT(m, Catch::Contains("missing tensor blk.0.attn_k_norm.weight"));
  CHECK_THAT(m, Catch::Contains("blk.0.attn_q.weight: shape [32, 64], expected [64, 64]"));
  CHECK_THAT(m, Catch::Contains("blk.1.ffn_down_exps.weight: shape [8, 32, 64], expected "
                                "[8, 64, 32]"));
  CHECK_THAT(m, Catch::Contains("token_embd.weight: shape [2000, 64], expected [2051, 64]"));
  CHECK_THAT(m, Catch::Contains("output.weight: type i32 is not supported"));
  CHECK_THAT(m, !Catch::Contains("extra_thing"));  // unused is not an error
}

TEST_CASE("A10: hyper-parameter and tensor problems come in the same error",
          "[model][checkpoint][a10]") {
  ModelSpec spec = tiny_spec();
  std::vector<TensorInfo> tensors = gguf_tensors(spec);
  spec.bos_token_id = 5000;
  spec.n_experts_used = 9;
  remove_tensor(tensors, "output_norm.weight");
  Result<ModelWeights> w = check_model(spec, tensors, TensorNaming::kGguf);
  REQUIRE_FALSE(w.ok());
  CHECK_THAT(w.status().message(), Catch::Contains("bos_token_id (5000) >= vocab_size (2051)"));
  CHECK_THAT(w.status().message(), Catch::Contains("n_experts_used (9) > n_experts (8)"));
  CHECK_THAT(w.status().message(), Catch::Contains("missing tensor output_norm.weight"));
}

TEST_CASE("A10: per-expert tensors must be complete", "[model][checkpoint][a10]") {
  ModelSpec spec = tiny_spec();
  std::vector<TensorInfo> tensors = gguf_tensors(spec);
  // Replace layer 0's fused gate by legacy per-expert tensors, minus experts 3 and 6.
  remove_tensor(tensors, "blk.0.ffn_gate_exps.weight");
  for (int e = 0; e < 8; ++e) {
    if (e == 3 || e == 6) continue;
    tensors.push_back(f32("blk.0.ffn_gate." + std::to_string(e) + ".weight", {32, 64}));
  }
  Result<ModelWeights> w = check_model(spec, tensors, TensorNaming::kGguf);
  REQUIRE_FALSE(w.ok());
  CHECK_THAT(w.status().message(),
             Catch::Contains("layer 0 expert_gate: missing 2 of 8 experts (3, 6)"));

  tensors.push_back(f32("blk.0.ffn_gate.3.weight", {32, 64}));
  tensors.push_back(f32("blk.0.ffn_gate.6.weight", {32, 64}));
  Result<ModelWeights> ok = check_model(spec, tensors, TensorNaming::kGguf);
  REQUIRE(ok.ok());
  CHECK_FALSE(ok->layers[0].experts_gate.is_fused());
  CHECK(ok->layers[0].experts_gate.expert(6).source->name == "blk.0.ffn_gate.6.weight");

  tensors.push_back(f32("blk.0.ffn_gate.9.weight", {32, 64}));
  tensors.push_back(f32("blk.1.ffn_gate.0.weight", {32, 64}));  // layer 1 is also fused
  Result<ModelWeights> bad = check_model(spec, tensors, TensorNaming::kGguf);
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.status().message(), Catch::Contains("expert index 9 >= n_experts (8)"));
  CHECK_THAT(bad.status().message(), Catch::Contains("both a fused tensor"));
}

TEST_CASE("tied embeddings: the lm head may be absent only when tied", "[model][checkpoint]") {
  ModelSpec spec = tiny_spec();
  std::vector<TensorInfo> tensors = gguf_tensors(spec);
  remove_tensor(tensors, "output.weight");
  spec.tied_embeddings = false;
  Result<ModelWeights> untied = check_model(spec, tensors, TensorNaming::kGguf);
  REQUIRE_FALSE(untied.ok());
  CHECK_THAT(untied.status().message(), Catch::Contains("missing tensor output.weight"));
  spec.tied_embeddings = true;
  Result<ModelWeights> tied = check_model(spec, tensors, TensorNaming::kGguf);
  REQUIRE(tied.ok());
  CHECK(tied->lm_head == tied->token_embedding);
  CHECK(tied->tied_embeddings);
}

TEST_CASE("a malformed file is an error, not a listing", "[model][checkpoint]") {
  CHECK(open_checkpoint(kHf + "README.md").status().code() != StatusCode::kOk);
  CHECK(open_checkpoint("/nonexistent/model.gguf").status().code() == StatusCode::kNotFound);
}

}  // namespace tandem::model
