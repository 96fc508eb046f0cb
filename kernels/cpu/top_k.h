// top_k: the k largest entries of a row with their indices (MoE router expert selection).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace tandem::kernels {

// Writes the indices and values of the k = indices.size() largest entries of `values` into
// indices and out_values (both of size k, k <= values.size(); TANDEM_CHECK), ordered by value
// descending; equal values are ordered by lower index first (torch.topk on CPU and ggml's argsort
// make no such promise; this makes expert choice deterministic). NaN ranks below every number,
// -inf included (NaNs among themselves by index). O(n * k) without allocation, for the router's
// small k. Any thread; no shared state.
void top_k(std::span<const float> values, std::span<int32_t> indices, std::span<float> out_values);

}  // namespace tandem::kernels
