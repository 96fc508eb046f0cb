// Causal GQA attention scalar reference.
#include "kernels/cpu/attention.h"

#include <algorithm>
#include <vector>

#include "engine/base/check.h"
#include "kernels/cpu/vector_ops.h"

namespace tandem::kernels {

void attention_heads(std::span<const float> q, size_t n_q, size_t start_pos,
                     std::span<const float> k_cache, std::span<const float> v_cache,
                     const AttentionConfig& config, std::span<float> out, size_t head_begin,
                     size_t head_end) {
  const size_t n_heads = config.n_heads;
  const size_t n_kv = config.n_kv_heads;
  const size_t dim = config.head_dim;
  TANDEM_CHECK(n_heads > 0 && n_kv > 0 && dim > 0 && n_heads % n_kv == 0);
  TANDEM_CHECK(q.size() == n_q * n_heads * dim && out.size() == q.size());
  const size_t kv_row = n_kv * dim;
  TANDEM_CHECK(k_cache.size() == v_cache.size() && k_cache.size() % kv_row == 0);
  TANDEM_CHECK(k_cache.size() / kv_row >= start_pos + n_q);
  TANDEM_CHECK(head_begin <= head_end && head_end <= n_heads);
  const size_t group = n_heads / n_kv;
  thread_local std::vector<float> scores;
  scores.resize(start_pos + n_q);
  for (size_t i = 0; i < n_q; ++i) {
    const size_t n_keys = start_pos + i + 1;
    for (size_t h = head_begin; h < head_end; ++h) {
      const float* qh = q.data() + (i * n_heads + h) * dim;
      const size_t kvh = h / group;
      for (size_t p = 0; p < n_keys; ++p) {
        scores[p] = config.scale * dot_f32(qh, k_cache.data() + p * kv_row + kvh * dim, dim);
      }
      softmax(std::span<float>(scores.data(), n_keys));
      float* oh = out.data() + (i * n_heads + h) * dim;
      std::fill(oh, oh + dim, 0.0f);
      for (size_t p = 0; p < n_keys; ++p) {
        const float w = scores[p];
        const float* vp = v_cache.data() + p * kv_row + kvh * dim;
        for (size_t d = 0; d < dim; ++d) oh[d] += w * vp[d];
      }
    }
  }
}

void attention(std::span<const float> q, size_t n_q, size_t start_pos,
               std::span<const float> k_cache, std::span<const float> v_cache,
               const AttentionConfig& config, std::span<float> out) {
  attention_heads(q, n_q, start_pos, k_cache, v_cache, config, out, 0, config.n_heads);
}

}  // namespace tandem::kernels
