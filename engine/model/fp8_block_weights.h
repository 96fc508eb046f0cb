// Block-quantized FP8 HF checkpoints (DeepSeek-V3/R1, Kimi-K2, MiniMax-M2, Qwen3-*-FP8): each
// F8_E4M3 weight is converted at open into Tandem's kF8_E4M3_B128 layout (kernels/tensor_type.h),
// which the CPU kernels compute with directly at one byte per weight plus 4 per 128.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "engine/model/converted_tensors.h"
#include "engine/model/tensor_info.h"

namespace tandem::model {

// What config.json's quantization_config says of a block-quantized FP8 checkpoint (facts from the
// published configs and transformers' FineGrainedFP8 integration):
//   {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
//    "weight_block_size": [block_rows, block_cols]}
// and the checkpoint holds, for each quantized linear weight W [rows, cols] (F8_E4M3, the
// float8_e4m3fn codes), W_scale_inv [ceil(rows / block_rows), ceil(cols / block_cols)] (F32 or
// BF16): element (r, c) = value(W[r, c]) * W_scale_inv[r / block_rows, c / block_cols]. Everything
// else (embeddings, norms, routers, lm_head) keeps its float type.
struct Fp8BlockConfig {
  uint64_t block_rows = 128;
  uint64_t block_cols = 128;
};

// The FP8 block configuration of `config` (config.json), nullopt when its quantization_config is
// absent or names another method (e.g. GPT-OSS's "mxfp4"). INVALID_ARGUMENT naming the key for an
// "fp8" configuration Tandem cannot take: a format other than e4m3, activation_scheme other than
// dynamic (static per-tensor activation scales), a weight_block_size that is not two positive
// integers, or a block_cols other than 128 (the kF8_E4M3_B128 block). Pure; any thread.
Result<std::optional<Fp8BlockConfig>> fp8_block_config(const nlohmann::json& config);

// Converts every F8_E4M3 tensor W of `tensors` with its W_scale_inv into a kF8_E4M3_B128 tensor of
// the same name and shape (derived_from names both; both are listed in `replaced`). Conversion
// runs on all hardware threads. INVALID_ARGUMENT listing every problem, each naming its tensor: an
// F8_E4M3 tensor without its scale, a shape that is not 2-D, a column count that is not a multiple
// of 128, a scale whose dtype or shape does not match, a scale that is not finite or is 2^7 or more
// in magnitude, a NaN code (0x7F or 0xFF) in the weights. Allocates the copies.
Result<ConvertedTensors> convert_fp8_block_weights(const Fp8BlockConfig& config,
                                                   std::span<const TensorInfo> tensors);

// The name of W's scale tensor: "<W>_scale_inv".
std::string fp8_scale_name(const std::string& weight_name);

}  // namespace tandem::model
