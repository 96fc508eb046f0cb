// Routing: softmax + top-k (+ renormalisation) per token, and grouping pairs by expert.
#include "engine/experts/routing.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "base/check.h"
#include "kernels/cpu/top_k.h"
#include "kernels/cpu/vector_ops.h"

namespace tandem::experts {

namespace {

// llama.cpp clamps the renormalisation sum at the smallest normal F16.
constexpr float kMinWeightSum = 6.103515625e-5f;

// s (one token's selection scores) with every expert outside the best `used` of `groups` groups
// set to -inf; a group's score is its largest s (top 1) or the sum of its two largest (top 2;
// ties: lower group first).
void mask_groups(std::span<float> s, size_t groups, size_t used, size_t top) {
  const size_t size = s.size() / groups;
  thread_local std::vector<float> score;
  thread_local std::vector<int32_t> best;
  thread_local std::vector<float> best_score;
  score.resize(groups);
  for (size_t g = 0; g < groups; ++g) {
    float a = -std::numeric_limits<float>::infinity();
    float b = a;
    for (size_t e = g * size; e < (g + 1) * size; ++e) {
      if (s[e] > a) {
        b = a;
        a = s[e];
      } else if (s[e] > b) {
        b = s[e];
      }
    }
    score[g] = top == 1 ? a : a + b;
  }
  best.resize(used);
  best_score.resize(used);
  kernels::top_k(score, best, best_score);
  thread_local std::vector<uint8_t> keep;
  keep.assign(groups, 0);
  for (const int32_t g : best) keep[static_cast<size_t>(g)] = 1;
  for (size_t g = 0; g < groups; ++g) {
    if (keep[g] != 0) continue;
    std::fill(s.begin() + static_cast<ptrdiff_t>(g * size),
              s.begin() + static_cast<ptrdiff_t>((g + 1) * size),
              -std::numeric_limits<float>::infinity());
  }
}

}  // namespace

void route(std::span<float> router_logits, size_t n_tokens, size_t n_experts, size_t k,
           const RouterRecipe& recipe, Routing& out, std::span<const float> selection_bias) {
  TANDEM_CHECK(router_logits.size() == n_tokens * n_experts);
  TANDEM_CHECK(k >= 1 && k <= n_experts);
  TANDEM_CHECK(selection_bias.empty() || selection_bias.size() == n_experts);
  const bool grouped = recipe.n_groups > 1;
  if (grouped) {
    TANDEM_CHECK(n_experts % recipe.n_groups == 0 && n_experts / recipe.n_groups >= 2);
    TANDEM_CHECK(recipe.n_groups_used >= 1 && recipe.n_groups_used <= recipe.n_groups);
    TANDEM_CHECK(recipe.group_score_top == 1 || recipe.group_score_top == 2);
  }
  thread_local std::vector<float> selection;
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
    if (recipe.policy == model::RoutingPolicy::kSigmoidTopK) {
      kernels::sigmoid(row, row);
    } else {
      kernels::softmax(row);
    }
    if (selection_bias.empty() && !grouped) {
      kernels::top_k(row, ids, w);
    } else {
      selection.assign(row.begin(), row.end());
      if (!selection_bias.empty()) {
        for (size_t e = 0; e < n_experts; ++e) selection[e] += selection_bias[e];
      }
      if (grouped) {
        mask_groups(selection, recipe.n_groups, recipe.n_groups_used, recipe.group_score_top);
      }
      kernels::top_k(selection, ids, w);
      for (size_t i = 0; i < k; ++i) w[i] = row[static_cast<size_t>(ids[i])];
    }
    if (recipe.renormalize) {
      float sum = 0.0f;
      for (float v : w) sum += v;
      sum = std::max(sum, kMinWeightSum);
      for (float& v : w) v /= sum;
    }
    if (recipe.scale != 1.0f) {
      for (float& v : w) v *= recipe.scale;
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
