// Tests of the FP8 block-weight conversion: the config keys it takes and refuses, the block
// re-layout (scales by row // block_rows and column // 128), and refusals that name the tensor.
// The end-to-end check against transformers is hf_forward_test's deepseek_v3_fp8.
#include "engine/model/fp8_block_weights.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/dequantize_rows.h"
#include "kernels/cpu/float_convert.h"
#include "tests/model/tensor_view.h"

namespace tandem::model {
namespace {

constexpr auto tensor = testing::tensor_view;

std::vector<uint8_t> floats_as_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> out(4 * v.size());
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// Codes that are never NaN: a pattern over 0..126 and 128..254.
std::vector<uint8_t> codes(size_t n, uint32_t seed) {
  std::vector<uint8_t> out(n);
  uint32_t x = seed;
  for (uint8_t& b : out) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<uint8_t>(x >> 24);
    if ((b & 0x7f) == 0x7f) b ^= 1;
  }
  return out;
}

nlohmann::json config_with(nlohmann::json q) {
  return nlohmann::json{{"model_type", "deepseek_v3"}, {"quantization_config", std::move(q)}};
}

TEST_CASE("fp8_block_config reads the FP8 quantization_config and refuses what it cannot take",
          "[model][fp8]") {
  // Absent, or another method (GPT-OSS's mxfp4): not an FP8 checkpoint.
  CHECK_FALSE(fp8_block_config(nlohmann::json{{"model_type", "x"}})->has_value());
  CHECK_FALSE(fp8_block_config(config_with({{"quant_method", "mxfp4"}}))->has_value());
  auto ok = fp8_block_config(config_with({{"quant_method", "fp8"},
                                          {"fmt", "e4m3"},
                                          {"activation_scheme", "dynamic"},
                                          {"weight_block_size", {64, 128}}}));
  REQUIRE(ok.ok());
  REQUIRE(ok->has_value());
  CHECK((*ok)->block_rows == 64);
  CHECK((*ok)->block_cols == 128);
  auto defaults = fp8_block_config(config_with({{"quant_method", "fp8"}}));
  REQUIRE(defaults.ok());
  CHECK((*defaults)->block_rows == 128);

  auto refused = [](nlohmann::json q, const std::string& fragment) {
    auto r = fp8_block_config(config_with(std::move(q)));
    REQUIRE_FALSE(r.ok());
    INFO(r.status().message());
    CHECK(r.status().message().find(fragment) != std::string::npos);
  };
  refused({{"quant_method", "fp8"}, {"fmt", "e5m2"}}, "quantization_config.fmt \"e5m2\"");
  refused({{"quant_method", "fp8"}, {"activation_scheme", "static"}}, "activation_scheme");
  refused({{"quant_method", "fp8"}, {"weight_block_size", {128, 64}}}, "blocks of 128 columns");
  refused({{"quant_method", "fp8"}, {"weight_block_size", {128}}}, "two positive integers");
  refused({{"quant_method", "fp8"}, {"weight_block_size", {0, 128}}}, "two positive integers");
}

TEST_CASE("FP8 weights become f8_e4m3_b128 rows with their block's scale", "[model][fp8]") {
  // 130 rows (two row blocks of 64, 64 and a partial third of 2) x 256 columns.
  const uint64_t rows = 130, cols = 256;
  const std::vector<uint8_t> w = codes(rows * cols, 7);
  std::vector<float> scales;
  for (int i = 0; i < 3 * 2; ++i) scales.push_back(0.001f * static_cast<float>(i + 1));
  const std::vector<uint8_t> s = floats_as_bytes(scales);
  const std::vector<uint8_t> norm(4 * cols, 0);
  const std::vector<TensorInfo> tensors = {
      tensor("model.layers.0.mlp.up_proj.weight", TensorType::kF8_E4M3, {rows, cols}, w),
      tensor("model.layers.0.mlp.up_proj.weight_scale_inv", TensorType::kF32, {3, 2}, s),
      tensor("model.norm.weight", TensorType::kF32, {cols}, norm)};
  auto r = convert_fp8_block_weights(Fp8BlockConfig{.block_rows = 64, .block_cols = 128}, tensors);
  REQUIRE(r.ok());
  REQUIRE(r->tensors.size() == 1);
  const TensorInfo& t = r->tensors[0];
  CHECK(t.name == "model.layers.0.mlp.up_proj.weight");
  CHECK(t.type == TensorType::kF8_E4M3_B128);
  CHECK(t.shape == std::vector<uint64_t>{rows, cols});
  CHECK(t.derived_from ==
        "model.layers.0.mlp.up_proj.weight,model.layers.0.mlp.up_proj.weight_scale_inv");
  CHECK(r->replaced == std::vector<std::string>{"model.layers.0.mlp.up_proj.weight",
                                                "model.layers.0.mlp.up_proj.weight_scale_inv"});
  REQUIRE(t.data.size() == rows * 2 * 132);
  std::vector<float> got(rows * cols);
  kernels::dequantize_f8_e4m3_b128(t.data.data(), got.data(), rows * 2);
  size_t bad = 0;
  for (uint64_t i = 0; i < rows; ++i) {
    for (uint64_t c = 0; c < cols; ++c) {
      const float want =
          kernels::fp8_e4m3_to_fp32(w[i * cols + c]) * scales[(i / 64) * 2 + c / 128];
      if (std::memcmp(&want, &got[i * cols + c], 4) != 0) ++bad;
    }
  }
  CHECK(bad == 0);
}

TEST_CASE("FP8 conversion refuses malformed weights, naming each tensor", "[model][fp8]") {
  const std::vector<uint8_t> w = codes(128 * 128, 3);
  std::vector<uint8_t> nan_w = w;
  nan_w[5 * 128 + 9] = 0xff;
  const std::vector<uint8_t> one_scale = floats_as_bytes({0.5f});
  const std::vector<uint8_t> inf_scale = floats_as_bytes({INFINITY});
  const std::vector<uint8_t> odd(128 * 96, 0);
  const std::vector<TensorInfo> tensors = {
      tensor("a.weight", TensorType::kF8_E4M3, {128, 128}, w),  // no scale
      tensor("b.weight", TensorType::kF8_E4M3, {128, 128}, nan_w),
      tensor("b.weight_scale_inv", TensorType::kF32, {1, 1}, one_scale),
      tensor("c.weight", TensorType::kF8_E4M3, {128, 96}, odd),
      tensor("c.weight_scale_inv", TensorType::kF32, {1, 1}, one_scale),
      tensor("d.weight", TensorType::kF8_E4M3, {128, 128}, w),
      tensor("d.weight_scale_inv", TensorType::kF32, {2, 1}, one_scale),
      tensor("e.weight", TensorType::kF8_E4M3, {128, 128}, w),
      tensor("e.weight_scale_inv", TensorType::kF32, {1, 1}, inf_scale),
      tensor("f.weight", TensorType::kF8_E4M3, {128, 128}, w),
      tensor("f.weight_scale_inv", TensorType::kU8, {1, 1}, one_scale)};
  // The malformed tensors one at a time, so the NaN scan (which runs only once every shape is
  // right) is reached too.
  const std::vector<std::pair<std::vector<size_t>, std::string>> cases = {
      {{0}, "a.weight: F8_E4M3 weight without its a.weight_scale_inv"},
      {{1, 2}, "b.weight: NaN code 0xFF at row 5, column 9"},
      {{3, 4}, "c.weight: 96 columns, not a multiple of 128"},
      {{5, 6}, "d.weight_scale_inv: shape [2, 1], expected [1, 1]"},
      {{7, 8}, "e.weight_scale_inv: block scale inf"},
      {{9, 10}, "f.weight_scale_inv: dtype U8"}};
  for (const auto& [indices, fragment] : cases) {
    std::vector<TensorInfo> some;
    for (size_t i : indices) some.push_back(tensors[i]);
    auto r = convert_fp8_block_weights(Fp8BlockConfig{}, some);
    REQUIRE_FALSE(r.ok());
    INFO(r.status().message());
    CHECK(r.status().message().find(fragment) != std::string::npos);
  }
  // Every shape problem is listed in one message.
  auto all = convert_fp8_block_weights(Fp8BlockConfig{}, tensors);
  REQUIRE_FALSE(all.ok());
  for (const char* name : {"a.weight:", "c.weight:", "d.weight_scale_inv:", "e.weight_scale_inv:",
                           "f.weight_scale_inv:"}) {
    CHECK(all.status().message().find(name) != std::string::npos);
  }
}

}  // namespace
}  // namespace tandem::model
