// validate_table: the checks every planner input passes.
#include "engine/placement/expert_table.h"

#include <cmath>
#include <string>

namespace tandem::placement {

Status validate_table(const ExpertTable& t) {
  if (t.layers.empty()) return invalid_argument_error("the table has no rows (MoE layers)");
  if (t.n_experts == 0) return invalid_argument_error("the table has no columns (experts)");
  for (size_t r = 1; r < t.layers.size(); ++r) {
    if (t.layers[r] <= t.layers[r - 1]) {
      return invalid_argument_error("the table's layer indices are not strictly ascending (" +
                                    std::to_string(t.layers[r - 1]) + " then " +
                                    std::to_string(t.layers[r]) + ")");
    }
  }
  if (t.values.size() / t.n_experts != t.layers.size() || t.values.size() % t.n_experts != 0) {
    return invalid_argument_error("the table holds " + std::to_string(t.values.size()) +
                                  " values, not " + std::to_string(t.layers.size()) + " x " +
                                  std::to_string(t.n_experts));
  }
  for (size_t i = 0; i < t.values.size(); ++i) {
    const double v = t.values[i];
    if (!std::isfinite(v) || v < 0) {
      return invalid_argument_error("value at layer " + std::to_string(t.layers[i / t.n_experts]) +
                                    ", expert " + std::to_string(i % t.n_experts) + " is " +
                                    std::to_string(v) +
                                    (std::isfinite(v) ? " (negative)" : " (not finite)"));
    }
  }
  return Status();
}

}  // namespace tandem::placement
