// Routing: the router's top-k choice per token, and the grouping of token-expert pairs by expert.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/model/architecture.h"

namespace tandem::experts {

// One layer's routing decision for n_tokens tokens. Pair p = t * k + slot is token t's slot-th
// choice; slots are ordered by probability, highest first (lower expert id first on ties).
// A plain value owned by whoever fills it; any thread may read it after.
struct Routing {
  size_t n_tokens = 0;
  size_t k = 0;
  std::vector<int32_t> experts;  // [n_tokens * k]
  std::vector<float> weights;    // [n_tokens * k], the factor each expert's output is scaled by
};

// How a layer's router logits become routing weights (from the ModelSpec).
struct RouterRecipe {
  model::RoutingPolicy policy = model::RoutingPolicy::kSoftmaxTopK;
  bool renormalize = false;  // ModelSpec::norm_topk_prob (kSoftmaxTopK, kSigmoidTopK)
  // Group-limited selection (ModelSpec::n_expert_groups; 0 or 1 = none) and the weight scale
  // (ModelSpec::expert_weights_scale), for kSoftmaxTopK and kSigmoidTopK.
  size_t n_groups = 0;
  size_t n_groups_used = 0;
  size_t group_score_top = 2;  // a group's score: the sum of its 1 or 2 largest s
  float scale = 1.0f;
};

// From router logits [n_tokens x n_experts] (overwritten), as llama.cpp's build_moe_ffn:
//  kTopKSoftmax: the k largest logits (kernels::top_k), weights = softmax over those k
//    (kernels::softmax).
//  kSoftmaxTopK / kSigmoidTopK: p = softmax(logits row) / sigmoid(logits); selection scores
//    s = p + selection_bias (when not empty: n_experts floats); with n_groups > 1 the experts
//    form n_groups groups of consecutive ids, each scored by the sum of its group_score_top
//    (1 or 2) largest s, and every expert outside the n_groups_used best groups gets s = -inf;
//    the k largest s
//    (kernels::top_k; ties to the lower id) are chosen, weighted by their unbiased p; when
//    renormalize, each weight is divided by max(sum of the k, 6.103515625e-5) (float, slot
//    order); then, when scale != 1, multiplied by scale.
// Without bias and groups the choice is kernels::top_k of p itself. k <= n_experts and group
// sizes are checked (bugs otherwise: ModelSpec validation rejects bad ones). Any thread.
void route(std::span<float> router_logits, size_t n_tokens, size_t n_experts, size_t k,
           const RouterRecipe& recipe, Routing& out, std::span<const float> selection_bias = {});

// The pairs of a Routing grouped by expert: expert_ids[i] (ascending, active experts only) owns
// pairs[offsets[i] .. offsets[i + 1]), in ascending pair (= token) order.
struct ExpertGroups {
  std::vector<int32_t> expert_ids;
  std::vector<size_t> offsets;  // expert_ids.size() + 1 entries
  std::vector<uint32_t> pairs;
};

// Groups the pairs whose expert e has owner[e] == worker (every pair when owner is empty; owner
// otherwise holds n_experts entries). Expert ids >= n_experts are bugs. Deterministic; any thread.
void group_by_expert(const Routing& routing, size_t n_experts, std::span<const uint8_t> owner,
                     uint8_t worker, ExpertGroups& out);

}  // namespace tandem::experts
