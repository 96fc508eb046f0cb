// PlacementPolicy: how the planner chooses the experts that go to the GPU (DESIGN.md §3), and the
// names the configuration and the reports spell them with.
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

namespace tandem::placement {

enum class PlacementPolicy { kFrequency, kUniform, kBudget };

// Indexed by the enum's value; configuration files, flags and reports use exactly these.
inline constexpr std::string_view kPlacementPolicyNames[] = {"frequency", "uniform", "budget"};

inline std::span<const std::string_view> placement_policy_names() {
  return kPlacementPolicyNames;
}

inline std::string_view placement_policy_name(PlacementPolicy policy) {
  return kPlacementPolicyNames[static_cast<size_t>(policy)];
}

}  // namespace tandem::placement
