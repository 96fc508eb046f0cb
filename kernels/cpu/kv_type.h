// KvType: the element type of KV cache rows. f32 holds the projections' floats exactly; f16 holds
// half the bytes (as llama.cpp's default cache type): rows are rounded to the nearest half (ties
// to even) when written and read back exactly, so attention over an f16 cache computes what it
// computes over an f32 cache holding the rounded values, bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <span>
#include <string_view>

namespace tandem::kernels {

enum class KvType : uint8_t { kF32, kF16 };

// The KV cache type tandemd and the tandem tool use unless told otherwise (runtime.kv_cache_type):
// f16, as llama.cpp's default cache and the model-dtype caches of vLLM and SGLang, for half the
// KV memory and faster long-context decode. The runner and the caches themselves default to f32,
// the exact arithmetic the reference tests compare.
inline constexpr KvType kDefaultKvCacheType = KvType::kF16;

// Every type's name, in enum order: the spellings of the configuration key (runtime.kv_cache_type)
// and the logs. Header-only, so the configuration library can name the types without linking the
// kernels.
inline constexpr std::string_view kKvTypeNames[] = {"f32", "f16"};

constexpr size_t kv_type_bytes(KvType type) {
  return type == KvType::kF16 ? 2 : 4;
}

constexpr std::string_view kv_type_name(KvType type) {
  return kKvTypeNames[static_cast<size_t>(type)];
}

constexpr std::span<const std::string_view> kv_type_names() {
  return kKvTypeNames;
}

// The type named `name`, or nullopt.
constexpr std::optional<KvType> parse_kv_type(std::string_view name) {
  for (size_t i = 0; i < std::size(kKvTypeNames); ++i) {
    if (kKvTypeNames[i] == name) return static_cast<KvType>(i);
  }
  return std::nullopt;
}

// Stores n floats as n elements of `type` at dst: f32 copies them; f16 rounds each to nearest
// even (fp32_to_fp16_bits: overflow to infinity, NaN kept). Pure; any thread.
void store_kv_elements(KvType type, const float* src, void* dst, size_t n);
// Loads n elements of `type` at src as floats (exact for both types). Pure; any thread.
void load_kv_elements(KvType type, const void* src, float* dst, size_t n);

namespace detail {

// The fp16 conversions behind them: scalar references and F16C variants (the same bits for every
// input but NaN payloads, which only the scalar ones keep).
void fp32_to_fp16_scalar(const float* src, uint16_t* dst, size_t n);
void fp16_to_fp32_scalar(const uint16_t* src, float* dst, size_t n);
void fp32_to_fp16_f16c(const float* src, uint16_t* dst, size_t n);
void fp16_to_fp32_f16c(const uint16_t* src, float* dst, size_t n);

}  // namespace detail
}  // namespace tandem::kernels
