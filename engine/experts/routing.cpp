// Routing: softmax + top-k (+ renormalisation) per token, and grouping pairs by expert.
#include "engine/experts/routing.h"

#include "engine/base/check.h"
#include "kernels/cpu/top_k.h"
#include "kernels/cpu/vector_ops.h"

namespace tandem::experts {

void route(std::span<float> router_logits, size_t n_tokens, size_t n_experts, size_t k,
           const RouterRecipe& recipe, Routing& out) {
  TANDEM_CHECK(router_logits.size() == n_tokens * n_experts);
  TANDEM_CHECK(k >= 1 && k <= n_experts);
  out.n_tokens = n_tokens;
  out.k = k;
  out.experts.resize(n_tokens * k);
  out.weights.resize(n_tokens * k);
  for (size_t t = 0; t < n_tokens; ++t) {
    std::span<float> row = router_logits.subspan(t * n_experts, n_experts);
    std::span<int32_t> ids(out.experts.data() + t * k, k);
    std::span<float> w(out.weights.data() + t * k, k);
    if (recipe.policy == model::RoutingPolicy::kTopKSoftmax) {
      kernels::top_k(row, ids, w);
      kernels::softmax(w);
      continue;
    }
    kernels::softmax(row);
    kernels::top_k(row, ids, w);
    if (recipe.renormalize) {
      float sum = 0.0f;
      for (float v : w) sum += v;
      for (float& v : w) v /= sum;
    }
  }
}

void group_by_expert(const Routing& routing, size_t n_experts, std::span<const uint8_t> owner,
                     uint8_t worker, ExpertGroups& out) {
  TANDEM_CHECK(owner.empty() || owner.size() == n_experts);
  const size_t n_pairs = routing.n_tokens * routing.k;
  std::vector<uint32_t> counts(n_experts + 1, 0);
  for (size_t p = 0; p < n_pairs; ++p) {
    const int32_t e = routing.experts[p];
    TANDEM_CHECK(e >= 0 && static_cast<size_t>(e) < n_experts);
    if (owner.empty() || owner[e] == worker) ++counts[e];
  }
  out.expert_ids.clear();
  out.offsets.assign(1, 0);
  std::vector<size_t> cursor(n_experts, 0);
  for (size_t e = 0; e < n_experts; ++e) {
    if (counts[e] == 0) continue;
    cursor[e] = out.offsets.back();
    out.expert_ids.push_back(static_cast<int32_t>(e));
    out.offsets.push_back(out.offsets.back() + counts[e]);
  }
  out.pairs.resize(out.offsets.back());
  for (size_t p = 0; p < n_pairs; ++p) {
    const int32_t e = routing.experts[p];
    if (owner.empty() || owner[e] == worker) out.pairs[cursor[e]++] = static_cast<uint32_t>(p);
  }
}

}  // namespace tandem::experts
