// Tests of the GPT-OSS HF expert repack: the MXFP4 block re-layout against transformers' reading
// of a block (integrations/mxfp4.py: element 2k = low nibble of byte k, 2k + 1 = high nibble,
// FP4 value x 2^(scale - 127)), the float transposes and gate/up de-interleaving, refusals that
// name the tensor, and the transformers-written fixture opening with derived tensors.
#include "engine/model/gpt_oss_hf_experts.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/model.h"
#include "engine/model/weight_names.h"
#include "kernels/cpu/dequantize_rows.h"
#include "tests/model/tensor_view.h"

namespace tandem::model {
namespace {

const std::string kHf = std::string(TANDEM_SOURCE_DIR) + "/tests/fixtures/hf/";

// transformers' FP4_VALUES (integrations/mxfp4.py).
constexpr float kFp4Values[16] = {+0.0f, +0.5f, +1.0f, +1.5f, +2.0f, +3.0f, +4.0f, +6.0f,
                                  -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

// Element k of a transformers MXFP4 block, as _convert_moe_packed_tensors computes it.
float hf_value(const uint8_t* block, uint8_t scale, unsigned k) {
  const uint8_t byte = block[k / 2];
  const uint8_t code = k % 2 == 0 ? (byte & 0x0F) : (byte >> 4);
  return std::ldexp(kFp4Values[code], static_cast<int>(scale) - 127);
}

ModelSpec small_spec() {
  ModelSpec s;
  s.architecture = Architecture::kGptOss;
  s.n_layers = 1;
  s.hidden_size = 64;
  s.n_experts = 2;
  s.expert_ffn_size = 64;  // 2 * ffn != hidden: the orientation of every matrix is visible
  return s;
}

constexpr auto tensor = testing::tensor_view;

std::vector<uint8_t> pattern_bytes(size_t n, uint32_t seed) {
  std::vector<uint8_t> out(n);
  uint32_t x = seed;
  for (uint8_t& b : out) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<uint8_t>(x >> 24);
  }
  return out;
}

const TensorInfo* find(const GptOssHfExperts& r, const std::string& name) {
  for (const TensorInfo& t : r.tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const std::string kPrefix = "model.layers.0.mlp.experts.";

}  // namespace

TEST_CASE("an MXFP4 block in transformers' layout becomes the same values in ggml's",
          "[model][gpt-oss]") {
  const std::vector<uint8_t> hf = pattern_bytes(16, 3);
  for (const uint8_t scale : {uint8_t{127}, uint8_t{120}, uint8_t{131}}) {
    uint8_t ggml[17];
    mxfp4_block_hf_to_ggml(hf.data(), scale, ggml);
    CHECK(ggml[0] == scale);
    float values[32];
    kernels::dequantize_mxfp4(ggml, values, 1);
    for (unsigned k = 0; k < 32; ++k) {
      INFO("element " << k << ", scale " << int(scale));
      CHECK(values[k] == hf_value(hf.data(), scale, k));
    }
  }
  // Byte 1 + j of ggml's block: element j low, element j + 16 high.
  uint8_t one[16] = {};
  one[0] = 0x21;  // element 0 = code 1, element 1 = code 2
  one[8] = 0x43;  // element 16 = code 3, element 17 = code 4
  uint8_t ggml[17];
  mxfp4_block_hf_to_ggml(one, 127, ggml);
  CHECK(ggml[1] == 0x31);
  CHECK(ggml[2] == 0x42);
}

TEST_CASE("gpt-oss MXFP4 experts: gate = even rows, up = odd rows, down as is",
          "[model][gpt-oss]") {
  const ModelSpec s = small_spec();
  const uint64_t e = 2, f = 64, h = 64;
  const auto gu_blocks = pattern_bytes(e * 2 * f * (h / 32) * 16, 1);
  const auto gu_scales = pattern_bytes(e * 2 * f * (h / 32), 2);
  const auto d_blocks = pattern_bytes(e * h * (f / 32) * 16, 3);
  const auto d_scales = pattern_bytes(e * h * (f / 32), 4);
  std::vector<float> bias(e * 2 * f);
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = static_cast<float>(i);
  std::vector<uint8_t> bias_bytes(bias.size() * 4);
  std::memcpy(bias_bytes.data(), bias.data(), bias_bytes.size());
  const std::vector<TensorInfo> tensors = {
      tensor(kPrefix + "gate_up_proj_blocks", TensorType::kU8, {e, 2 * f, h / 32, 16}, gu_blocks),
      tensor(kPrefix + "gate_up_proj_scales", TensorType::kU8, {e, 2 * f, h / 32}, gu_scales),
      tensor(kPrefix + "down_proj_blocks", TensorType::kU8, {e, h, f / 32, 16}, d_blocks),
      tensor(kPrefix + "down_proj_scales", TensorType::kU8, {e, h, f / 32}, d_scales),
      tensor(kPrefix + "gate_up_proj_bias", TensorType::kF32, {e, 2 * f}, bias_bytes),
  };
  Result<GptOssHfExperts> r = repack_gpt_oss_hf_experts(s, tensors);
  INFO(r.status().message());
  REQUIRE(r.ok());
  CHECK(r->replaced.size() == 5);
  const TensorInfo* gate = find(*r, kPrefix + "gate_proj.weight");
  const TensorInfo* up = find(*r, kPrefix + "up_proj.weight");
  const TensorInfo* down = find(*r, kPrefix + "down_proj.weight");
  REQUIRE(gate != nullptr);
  REQUIRE(up != nullptr);
  REQUIRE(down != nullptr);
  CHECK(gate->type == TensorType::kMXFP4);
  CHECK(gate->shape == std::vector<uint64_t>{e, f, h});
  CHECK(down->shape == std::vector<uint64_t>{e, h, f});
  CHECK(gate->data.size() == e * f * (h / 32) * 17);
  CHECK(gate->derived_from == kPrefix + "gate_up_proj_blocks, " + kPrefix + "gate_up_proj_scales");
  // Every value of derived row r of expert x equals transformers' value of source row 2r (+1).
  auto check_rows = [&](const TensorInfo& t, const std::vector<uint8_t>& blocks,
                        const std::vector<uint8_t>& scales, uint64_t src_rows, uint64_t cols,
                        uint64_t step, uint64_t offset) {
    const uint64_t rows = src_rows / step, g = cols / 32;
    std::vector<float> got(rows * cols);
    for (uint64_t x = 0; x < e; ++x) {
      kernels::dequantize_mxfp4(t.data.data() + x * rows * g * 17, got.data(), rows * g);
      for (uint64_t row = 0; row < rows; ++row) {
        const uint64_t src_row = x * src_rows + row * step + offset;
        for (uint64_t c = 0; c < cols; ++c) {
          const uint64_t block = src_row * g + c / 32;
          REQUIRE(got[row * cols + c] ==
                  hf_value(blocks.data() + block * 16, scales[block], c % 32));
        }
      }
    }
  };
  check_rows(*gate, gu_blocks, gu_scales, 2 * f, h, 2, 0);
  check_rows(*up, gu_blocks, gu_scales, 2 * f, h, 2, 1);
  check_rows(*down, d_blocks, d_scales, h, f, 1, 0);
  const TensorInfo* gate_bias = find(*r, kPrefix + "gate_proj.bias");
  const TensorInfo* up_bias = find(*r, kPrefix + "up_proj.bias");
  REQUIRE(gate_bias != nullptr);
  REQUIRE(up_bias != nullptr);
  CHECK(gate_bias->shape == std::vector<uint64_t>{e, f});
  std::vector<float> gb(e * f), ub(e * f);
  std::memcpy(gb.data(), gate_bias->data.data(), gb.size() * 4);
  std::memcpy(ub.data(), up_bias->data.data(), ub.size() * 4);
  for (uint64_t x = 0; x < e; ++x) {
    for (uint64_t j = 0; j < f; ++j) {
      CHECK(gb[x * f + j] == bias[x * 2 * f + 2 * j]);
      CHECK(ub[x * f + j] == bias[x * 2 * f + 2 * j + 1]);
    }
  }
}

TEST_CASE("gpt-oss float experts are transposed from x @ W and de-interleaved",
          "[model][gpt-oss]") {
  const ModelSpec s = small_spec();
  const uint64_t e = 2, f = 64, h = 64;
  // gate_up_proj [E, h, 2f] with value 1e6 x + 1000 i + j: row i of x @ W, output column j.
  std::vector<float> gu(e * h * 2 * f), down(e * f * h);
  for (uint64_t x = 0; x < e; ++x) {
    for (uint64_t i = 0; i < h; ++i) {
      for (uint64_t j = 0; j < 2 * f; ++j) {
        gu[(x * h + i) * 2 * f + j] = 1e6f * x + 1000.0f * i + j;
      }
    }
    for (uint64_t k = 0; k < f; ++k) {
      for (uint64_t i = 0; i < h; ++i) down[(x * f + k) * h + i] = 1e6f * x + 1000.0f * k + i;
    }
  }
  std::vector<uint8_t> gu_bytes(gu.size() * 4), down_bytes(down.size() * 4);
  std::memcpy(gu_bytes.data(), gu.data(), gu_bytes.size());
  std::memcpy(down_bytes.data(), down.data(), down_bytes.size());
  const std::vector<TensorInfo> tensors = {
      tensor(kPrefix + "gate_up_proj", TensorType::kF32, {e, h, 2 * f}, gu_bytes),
      tensor(kPrefix + "down_proj", TensorType::kF32, {e, f, h}, down_bytes),
  };
  Result<GptOssHfExperts> r = repack_gpt_oss_hf_experts(s, tensors);
  INFO(r.status().message());
  REQUIRE(r.ok());
  const TensorInfo* gate = find(*r, kPrefix + "gate_proj.weight");
  const TensorInfo* up = find(*r, kPrefix + "up_proj.weight");
  const TensorInfo* dn = find(*r, kPrefix + "down_proj.weight");
  REQUIRE(gate != nullptr);
  REQUIRE(up != nullptr);
  REQUIRE(dn != nullptr);
  CHECK(gate->type == TensorType::kF32);
  CHECK(gate->shape == std::vector<uint64_t>{e, f, h});
  CHECK(dn->shape == std::vector<uint64_t>{e, h, f});
  auto at = [](const TensorInfo* t, uint64_t index) {
    float v;
    std::memcpy(&v, t->data.data() + index * 4, 4);
    return v;
  };
  for (uint64_t x = 0; x < e; ++x) {
    for (uint64_t r_ = 0; r_ < f; ++r_) {
      for (uint64_t i = 0; i < h; ++i) {
        REQUIRE(at(gate, (x * f + r_) * h + i) == gu[(x * h + i) * 2 * f + 2 * r_]);
        REQUIRE(at(up, (x * f + r_) * h + i) == gu[(x * h + i) * 2 * f + 2 * r_ + 1]);
      }
    }
    for (uint64_t i = 0; i < h; ++i) {
      for (uint64_t k = 0; k < f; ++k) {
        REQUIRE(at(dn, (x * h + i) * f + k) == down[(x * f + k) * h + i]);
      }
    }
  }
}

TEST_CASE("malformed gpt-oss expert tensors are refused, naming the tensor", "[model][gpt-oss]") {
  const ModelSpec s = small_spec();
  const uint64_t e = 2, f = 64, h = 64;
  const std::vector<uint8_t> bytes(1 << 16);
  SECTION("blocks of the wrong shape, scales of the wrong dtype") {
    const std::vector<TensorInfo> tensors = {
        tensor(kPrefix + "gate_up_proj_blocks", TensorType::kU8, {e, 2 * f, h / 16, 8}, bytes),
        tensor(kPrefix + "gate_up_proj_scales", TensorType::kU8, {e, 2 * f, h / 32}, bytes),
        tensor(kPrefix + "down_proj_blocks", TensorType::kU8, {e, h, f / 32, 16}, bytes),
        tensor(kPrefix + "down_proj_scales", TensorType::kF32, {e, h, f / 32}, bytes),
    };
    Result<GptOssHfExperts> r = repack_gpt_oss_hf_experts(s, tensors);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    const std::string& m = r.status().message();
    CHECK_THAT(
        m, Catch::Contains(kPrefix + "gate_up_proj_blocks: shape [2, 128, 4, 8], expected [2, 128, "
                                     "2, 16] (n_experts, 2 * intermediate_size, hidden_size / 32, "
                                     "16)"));
    CHECK_THAT(m, Catch::Contains(kPrefix + "down_proj_scales: dtype f32, expected U8"));
    CHECK_THAT(m, Catch::Contains("2 problems"));
  }
  SECTION("blocks without scales, both layouts, a bias of the wrong shape") {
    const std::vector<TensorInfo> tensors = {
        tensor(kPrefix + "gate_up_proj_blocks", TensorType::kU8, {e, 2 * f, h / 32, 16}, bytes),
        tensor(kPrefix + "down_proj_blocks", TensorType::kU8, {e, h, f / 32, 16}, bytes),
        tensor(kPrefix + "down_proj_scales", TensorType::kU8, {e, h, f / 32}, bytes),
        tensor(kPrefix + "down_proj", TensorType::kF32, {e, f, h}, bytes),
        tensor(kPrefix + "gate_up_proj_bias", TensorType::kF32, {e, f}, bytes),
    };
    Result<GptOssHfExperts> r = repack_gpt_oss_hf_experts(s, tensors);
    REQUIRE_FALSE(r.ok());
    const std::string& m = r.status().message();
    CHECK_THAT(m, Catch::Contains(kPrefix + "gate_up_proj_blocks: found without " + kPrefix +
                                  "gate_up_proj_scales"));
    CHECK_THAT(m, Catch::Contains(kPrefix + "down_proj: the checkpoint also holds " + kPrefix +
                                  "down_proj_blocks"));
    CHECK_THAT(m, Catch::Contains(kPrefix + "gate_up_proj_bias: shape [2, 64], expected [2, 128]"));
  }
  SECTION("a float matrix in nn.Linear orientation is not x @ W") {
    const std::vector<TensorInfo> tensors = {
        tensor(kPrefix + "gate_up_proj", TensorType::kF32, {e, 2 * f, h}, bytes),
    };
    Result<GptOssHfExperts> r = repack_gpt_oss_hf_experts(s, tensors);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.status().message(),
               Catch::Contains(kPrefix + "gate_up_proj: shape [2, 128, 64], expected [2, 64, 128] "
                                         "(n_experts, hidden_size, 2 * intermediate_size)"));
  }
  SECTION("a hidden size that is not whole MXFP4 blocks") {
    ModelSpec odd = s;
    odd.hidden_size = 48;
    const std::vector<TensorInfo> tensors = {
        tensor(kPrefix + "gate_up_proj_blocks", TensorType::kU8, {e, 2 * f, 1, 16}, bytes),
        tensor(kPrefix + "gate_up_proj_scales", TensorType::kU8, {e, 2 * f, 1}, bytes),
    };
    Result<GptOssHfExperts> r = repack_gpt_oss_hf_experts(odd, tensors);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.status().message(),
               Catch::Contains(kPrefix + "gate_up_proj_blocks: hidden_size 48 is not a multiple "
                                         "of the MXFP4 block size 32"));
  }
}

TEST_CASE("the transformers-written gpt-oss checkpoint opens with derived expert tensors",
          "[model][gpt-oss][hf]") {
  Result<Checkpoint> c = open_model(kHf + "gpt_oss_mxfp4");
  INFO((c.ok() ? "" : c.status().message()));
  REQUIRE(c.ok());
  for (const TensorInfo& t : c->tensors) {
    INFO(t.name);
    CHECK(t.name.find("_blocks") == std::string::npos);
    CHECK(t.name.find("_scales") == std::string::npos);
    CHECK(t.name.find("gate_up_proj") == std::string::npos);
  }
  CHECK(c->weights->unused.empty());
  CHECK(c->tensors.size() == 3 + 4 * 19);  // 79 file tensors: 4 x 5 replaced by 4 x 5 derived
  const LayerWeights& l1 = c->weights->layers[1];
  REQUIRE(l1.experts_gate.is_fused());
  const MatrixView g = l1.experts_gate.expert(5);
  CHECK(g.type == TensorType::kMXFP4);
  CHECK(g.rows == 96);
  CHECK(g.cols == 64);
  CHECK(g.source->name == "model.layers.1.mlp.experts.gate_proj.weight");
  CHECK(g.source->derived_from ==
        "model.layers.1.mlp.experts.gate_up_proj_blocks, "
        "model.layers.1.mlp.experts.gate_up_proj_scales");
  CHECK(l1.experts_down.expert(0).rows == 64);
  CHECK(l1.experts_down.expert(0).cols == 96);
  CHECK(l1[WeightRole::kExpertGateBias]->shape == std::vector<uint64_t>{8, 96});
  CHECK(l1[WeightRole::kExpertDownBias]->name == "model.layers.1.mlp.experts.down_proj_bias");
  CHECK(l1[WeightRole::kExpertDownBias]->derived_from.empty());
  CHECK(l1[WeightRole::kAttnSinks]->name == "model.layers.1.self_attn.sinks");
  CHECK(l1[WeightRole::kAttnOBias]->name == "model.layers.1.self_attn.o_proj.bias");
  CHECK(l1[WeightRole::kRouterBias]->name == "model.layers.1.mlp.router.bias");
  // The moved checkpoint keeps its derived bytes alive.
  const auto moved = std::make_unique<Checkpoint>(std::move(c).value());
  REQUIRE(moved->weights.has_value());
  float v[32];
  kernels::dequantize_mxfp4(moved->weights->layers[1].experts_gate.expert(5).data.data(), v, 1);
  CHECK(std::isfinite(v[0]));
  const CheckpointSizes sizes = checkpoint_sizes(*moved);
  CHECK(sizes.unused == 0);
  // Matrices (MXFP4: 17 bytes per 32 values) and biases (F32), 4 layers.
  CHECK(sizes.experts == 4 * (2 * 8 * 96 * 2 * 17 + 8 * 64 * 3 * 17 + 8 * 192 * 4 + 8 * 64 * 4));
}

}  // namespace tandem::model
