// The activation statistics file (versioned JSON) and the plain tables other tools write.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "engine/placement/activation_stats.h"
#include "engine/placement/expert_table.h"

namespace tandem::placement {

// The format docs/placement.md describes: {"format": kStatsFormatName, "version": N, "model":
// {...}, "moe_layers": [...], "tokens": T, "counts": [[...], ...]}.
inline constexpr std::string_view kStatsFormatName = "tandem.activation_stats";
inline constexpr int64_t kStatsFormatVersion = 1;

nlohmann::json stats_to_json(const ActivationStats& stats);
// Parses and checks a statistics object. INVALID_ARGUMENT saying what is wrong (with the JSON
// path, e.g. "counts[1][3]: -2 is negative") for: wrong format name, missing or mistyped fields,
// negative / non-integer / non-finite counts, a counts shape that differs from moe_layers x
// n_experts, moe_layers that disagree with n_layers; FAILED_PRECONDITION for a version newer
// than kStatsFormatVersion. Pure; any thread.
Result<ActivationStats> stats_from_json(const nlohmann::json& json);

// Writes the file atomically with replace_file (a fresh file in the same directory renamed over
// `path`, which is replaced and never followed if it is a symlink). Errors name
// the path and the system's reason: NOT_FOUND when the directory does not exist,
// PERMISSION_DENIED when it may not be written (including a read-only file system), INTERNAL
// otherwise. Blocking I/O.
Status save_stats(const ActivationStats& stats, const std::string& path);
// Reads a statistics file; errors are prefixed with the path. Blocking I/O.
Result<ActivationStats> load_stats(const std::string& path);
// load_stats, then check_same_model against `model`.
Result<ActivationStats> load_stats_for(const std::string& path, const ModelIdentity& model);

// A plain layers x experts table of non-negative finite numbers from another tool: a JSON array
// of equally long arrays, or CSV (one row per line, comma-separated; blank lines and lines
// starting with '#' skipped; no header). Rows are labelled 0..n-1. INVALID_ARGUMENT names the
// row and column of the first bad value.
Result<ExpertTable> table_from_json(const nlohmann::json& json);
Result<ExpertTable> table_from_csv(std::string_view text);

// Any statistics input the planner accepts, as read from a file.
struct StatsInput {
  ExpertTable table;
  std::optional<ActivationStats> stats;  // set for a Tandem statistics file
  std::string kind;                      // "tandem", "json-table" or "csv-table"
};
// Detects the kind: a JSON object is a Tandem statistics file, a JSON array a plain table,
// anything else is read as CSV. Errors are prefixed with the path. Blocking I/O.
Result<StatsInput> read_stats_input(const std::string& path);

// Fits a statistics input to a model: a Tandem file must be for the same model
// (check_same_model); a plain table must have n_experts columns and either one row per MoE layer
// (relabelled with their layer indices) or one row per layer (dense rows dropped).
// INVALID_ARGUMENT / FAILED_PRECONDITION saying what does not match.
Result<ExpertTable> conform_to_model(const StatsInput& input, const ModelIdentity& model);

}  // namespace tandem::placement
