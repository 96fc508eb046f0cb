// Tests of the tensor type table against the block sizes published by the gguf Python package.
#include "kernels/tensor_type.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

namespace tandem {
namespace {

// tests/fixtures/gguf/quant_sizes.json is written by scripts/fixtures/make_gguf_fixtures.py from
// gguf.constants.GGML_QUANT_SIZES: {"<id>": [block_elements, block_bytes], ...}.
TEST_CASE("block sizes match gguf-py's GGML_QUANT_SIZES", "[model]") {
  std::ifstream in(TANDEM_SOURCE_DIR "/tests/fixtures/gguf/quant_sizes.json");
  REQUIRE(in.good());
  const nlohmann::json sizes = nlohmann::json::parse(in);
  REQUIRE(sizes.size() >= 30);
  for (const auto& [id_text, pair] : sizes.items()) {
    const uint32_t id = static_cast<uint32_t>(std::stoul(id_text));
    INFO("ggml type id " << id);
    const Result<TensorType> type = tensor_type_from_ggml_id(id);
    REQUIRE(type.ok());
    const auto traits = tensor_type_traits(*type);
    REQUIRE(traits.has_value());
    CHECK(traits->block_elements == pair[0].get<uint32_t>());
    if (*type == TensorType::kQ8_1) {
      CHECK(traits->block_bytes == 36);  // see tensor_type.cpp: ggml's real layout
    } else {
      CHECK(traits->block_bytes == pair[1].get<uint32_t>());
    }
  }
}

TEST_CASE("removed and unknown ggml ids are rejected by number", "[model]") {
  for (uint32_t id : {4u, 5u, 31u, 36u, 42u, 1000u, 0xffffffffu}) {
    const Result<TensorType> r = tensor_type_from_ggml_id(id);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.status().message(), Catch::Contains(std::to_string(id)));
  }
}

TEST_CASE("safetensors dtypes map to types", "[model]") {
  CHECK(tensor_type_from_safetensors_dtype("BF16").value() == TensorType::kBF16);
  CHECK(tensor_type_from_safetensors_dtype("F8_E4M3").value() == TensorType::kF8_E4M3);
  CHECK(tensor_type_from_safetensors_dtype("I8").value() == TensorType::kI8);
  const Result<TensorType> bad = tensor_type_from_safetensors_dtype("F128");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.status().message(), Catch::Contains("F128"));
}

TEST_CASE("tensor_type_bytes checks whole blocks and overflow", "[model]") {
  CHECK(tensor_type_bytes(TensorType::kQ4_K, 512).value() == 288);
  CHECK(tensor_type_bytes(TensorType::kF32, 3).value() == 12);
  CHECK(tensor_type_bytes(TensorType::kQ8_0, 33).status().code() == StatusCode::kInvalidArgument);
  CHECK(tensor_type_bytes(TensorType::kF64, uint64_t{1} << 62).status().code() ==
        StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace tandem
