// Tests of the fingerprint, model identity and expert sizes against gguf-py's and config.json's
// view of the tiny checkpoints (tests/fixtures/model/, tests/fixtures/hf/).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/model/model.h"
#include "engine/placement/expert_sizes.h"
#include "engine/placement/model_identity.h"

namespace tandem::placement {
namespace {

using nlohmann::json;

const std::string kTinyMoe = std::string(TANDEM_SHARED_DIR) + "/data/tiny-moe/";
const std::string kFixtures = std::string(TANDEM_SOURCE_DIR) + "/tests/fixtures/";

json fixture(const std::string& name) {
  std::ifstream in(kFixtures + "model/" + name);
  return json::parse(in);
}

model::Checkpoint open(const std::string& path) {
  Result<model::Checkpoint> c = model::open_model(path);
  REQUIRE(c.ok());
  return std::move(c).value();
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

TensorType type_named(const std::string& name) {
  for (uint32_t i = 0; i < 64; ++i) {
    const auto t = static_cast<TensorType>(i);
    if (lower(tensor_type_name(t)) == lower(name)) return t;
  }
  FAIL("no tensor type named " << name);
  return TensorType::kF32;
}

TEST_CASE("fnv1a64 matches the published FNV-1a test vectors", "[placement]") {
  CHECK(fnv1a64("") == 0xcbf29ce484222325ULL);
  CHECK(fnv1a64("a") == 0xaf63dc4c8601ec8cULL);
  CHECK(fnv1a64("foobar") == 0x85944171f73967e8ULL);
}

TEST_CASE("fingerprint: from gguf-py's tensor list equals the one from our reader", "[placement]") {
  for (const char* variant : {"f32", "q8_0"}) {
    const json ref = fixture(std::string("tiny_moe_") + variant + ".json");
    const model::Checkpoint c = open(kTinyMoe + "tiny-moe-" + variant + ".gguf");
    // TensorInfos built from gguf-py's names, types, shapes and byte counts only.
    std::vector<uint8_t> zeros(1 << 20);
    std::vector<model::TensorInfo> listed;
    for (const json& t : ref["tensors"]) {
      model::TensorInfo info;
      info.name = t["name"].get<std::string>();
      info.type = type_named(t["type"].get<std::string>());
      info.shape = t["shape"].get<std::vector<uint64_t>>();
      const uint64_t bytes = t["bytes"].get<uint64_t>();
      REQUIRE(bytes <= zeros.size());
      info.data = std::span<const uint8_t>(zeros.data(), bytes);
      listed.push_back(std::move(info));
    }
    INFO(variant);
    CHECK(checkpoint_fingerprint("qwen3moe", listed) ==
          checkpoint_fingerprint("qwen3moe", c.tensors));
    // Order does not matter.
    std::mt19937 rng(7);
    std::shuffle(listed.begin(), listed.end(), rng);
    CHECK(checkpoint_fingerprint("qwen3moe", listed) ==
          checkpoint_fingerprint("qwen3moe", c.tensors));
    // Names, shapes and the architecture do.
    listed[0].name += "x";
    CHECK(checkpoint_fingerprint("qwen3moe", listed) !=
          checkpoint_fingerprint("qwen3moe", c.tensors));
    CHECK(checkpoint_fingerprint("olmoe", c.tensors) !=
          checkpoint_fingerprint("qwen3moe", c.tensors));
  }
}

TEST_CASE("identity: tiny-moe GGUF fields, and F32 vs Q8_0 differ only by fingerprint",
          "[placement]") {
  const json meta = fixture("tiny_moe_q8_0.json")["metadata"];
  const model::Checkpoint f32 = open(kTinyMoe + "tiny-moe-f32.gguf");
  const model::Checkpoint q8 = open(kTinyMoe + "tiny-moe-q8_0.gguf");
  Result<ModelIdentity> a = model_identity(f32);
  Result<ModelIdentity> b = model_identity(q8);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(b->architecture == "qwen3moe");
  CHECK(b->n_layers == meta["qwen3moe.block_count"].get<uint64_t>());
  CHECK(b->n_experts == meta["qwen3moe.expert_count"].get<uint64_t>());
  CHECK(b->n_experts_used == meta["qwen3moe.expert_used_count"].get<uint64_t>());
  CHECK(b->hidden_size == meta["qwen3moe.embedding_length"].get<uint64_t>());
  CHECK(b->moe_layer_ids() == std::vector<uint32_t>{0, 1});
  CHECK(b->fingerprint.rfind("fnv1a64:", 0) == 0);
  CHECK(b->fingerprint.size() == 8 + 16);
  CHECK(a->fingerprint != b->fingerprint);
  const Status st = check_same_model(*a, *b);
  CHECK(st.code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(st.message(), Catch::Contains("fingerprint is " + a->fingerprint + " in the file, " +
                                           b->fingerprint + " in the model"));
  CHECK(check_same_model(*a, *model_identity(open(kTinyMoe + "tiny-moe-f32.gguf"))).ok());
}

TEST_CASE("expert sizes come from the tensor types (gguf-py's byte counts)", "[placement]") {
  for (const char* variant : {"f32", "q8_0"}) {
    const json ref = fixture(std::string("tiny_moe_") + variant + ".json");
    const model::Checkpoint c = open(kTinyMoe + "tiny-moe-" + variant + ".gguf");
    Result<ExpertSizes> s = expert_sizes(c);
    REQUIRE(s.ok());
    CHECK(s->layers == std::vector<uint32_t>{0, 1});
    CHECK(s->n_experts == 8);
    uint64_t expert_tensor_bytes = 0;
    for (const json& t : ref["tensors"]) {
      if (t["name"].get<std::string>().find("_exps") != std::string::npos) {
        expert_tensor_bytes += t["bytes"].get<uint64_t>();
      }
    }
    uint64_t sum = 0;
    for (uint64_t b : s->bytes) sum += b;
    INFO(variant);
    CHECK(sum == expert_tensor_bytes);
    // All experts of this model have one type, so one size.
    CHECK(std::all_of(s->bytes.begin(), s->bytes.end(),
                      [&](uint64_t b) { return b == expert_tensor_bytes / 16; }));
    // Reserved = every other byte of the file's tensors + KV + scratch.
    CHECK(gpu_reserved_bytes(c, 1000, 24) ==
          ref["bytes_total"].get<uint64_t>() - expert_tensor_bytes + 1024);
  }
  // Q8_0: 34 bytes per 32 values; an expert is 3 matrices of 32 x 64, 2176 bytes each, which the
  // GPU expert worker places 256-byte aligned (2304 bytes each).
  const model::Checkpoint q8 = open(kTinyMoe + "tiny-moe-q8_0.gguf");
  CHECK(expert_sizes(q8)->bytes[0] == 3 * (32 * 64 / 32) * 34);
  CHECK(expert_sizes(q8)->device_bytes[0] == 3 * 2304);
  CHECK(expert_sizes(q8)->device_bytes.size() == expert_sizes(q8)->bytes.size());
}

TEST_CASE("expert sizes of GPT-OSS count each expert's biases as float", "[placement]") {
  const model::Checkpoint c =
      open(std::string(TANDEM_SHARED_DIR) + "/data/tiny-gpt-oss/tiny-gpt-oss-f32.gguf");
  const model::ModelSpec& spec = *c.spec;
  REQUIRE(spec.expert_bias);
  Result<ExpertSizes> s = expert_sizes(c);
  REQUIRE(s.ok());
  REQUIRE(!s->layers.empty());
  for (size_t row = 0; row < s->layers.size(); ++row) {
    const model::LayerWeights& l = c.weights->layers[s->layers[row]];
    for (uint64_t e = 0; e < s->n_experts; ++e) {
      const uint64_t matrices = l.experts_gate.expert(e).data.size() +
                                l.experts_up.expert(e).data.size() +
                                l.experts_down.expert(e).data.size();
      INFO("layer " << s->layers[row] << " expert " << e);
      CHECK(s->at(row, e) == matrices + (2 * spec.expert_ffn_size + spec.hidden_size) * 4);
      // On the device every part starts 256-byte aligned.
      uint64_t device = 0;
      for (const uint64_t part :
           {uint64_t{l.experts_gate.expert(e).data.size()},
            uint64_t{l.experts_up.expert(e).data.size()},
            uint64_t{l.experts_down.expert(e).data.size()}, uint64_t{spec.expert_ffn_size * 4},
            uint64_t{spec.expert_ffn_size * 4}, uint64_t{spec.hidden_size * 4}}) {
        device += (part + 255) / 256 * 256;
      }
      CHECK(s->device_at(row, e) == device);
      CHECK(s->device_at(row, e) > s->at(row, e));
    }
  }
}

TEST_CASE("expert sizes of HF checkpoints: float32 vs bfloat16", "[placement]") {
  // config.json: hidden 64, moe_intermediate 32, per expert gate + up + down of 32 x 64 values.
  const model::Checkpoint f32 = open(kFixtures + "hf/qwen3_moe");
  const model::Checkpoint bf16 = open(kFixtures + "hf/qwen3_moe_bf16");
  CHECK(expert_sizes(f32)->bytes.front() == 3 * 32 * 64 * 4);
  CHECK(expert_sizes(bf16)->bytes.back() == 3 * 32 * 64 * 2);
  CHECK(model_identity(f32)->fingerprint != model_identity(bf16)->fingerprint);
}

}  // namespace
}  // namespace tandem::placement
