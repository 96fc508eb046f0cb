// Test helper: one sample's value from Prometheus exposition text.
#pragma once

#include <optional>
#include <sstream>
#include <string>

namespace tandem::server::testing {

// The value of the sample whose name-and-labels part is exactly `series` (as the exposition
// format writes it: labels sorted, values quoted), or nullopt when there is no such line.
inline std::optional<double> sample(const std::string& text, const std::string& series) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ') {
      return std::stod(line.substr(series.size() + 1));
    }
  }
  return std::nullopt;
}

}  // namespace tandem::server::testing
