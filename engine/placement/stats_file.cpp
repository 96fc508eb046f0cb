// The statistics file: JSON writing and strict reading, plain tables (JSON, CSV), fitting to a
// model.
#include "engine/placement/stats_file.h"

#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/file_replace.h"

namespace tandem::placement {

namespace {

using nlohmann::json;

constexpr uint64_t kMaxFileBytes = uint64_t{1} << 30;
constexpr double kMaxExactInteger = 9007199254740992.0;  // 2^53

Status bad(const std::string& path, const std::string& what) {
  return invalid_argument_error(path + ": " + what);
}

// A non-negative integer: a JSON integer, or a float with no fractional part up to 2^53.
Result<uint64_t> get_count(const json& v, const std::string& path) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer()) return bad(path, std::to_string(v.get<int64_t>()) + " is negative");
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d)) return bad(path, "the value is not finite");
    if (d < 0) return bad(path, v.dump() + " is negative");
    if (d != std::floor(d)) return bad(path, v.dump() + " is not an integer");
    if (d > kMaxExactInteger) return bad(path, v.dump() + " is too large to be an exact count");
    return static_cast<uint64_t>(d);
  }
  return bad(path, "expected a non-negative integer, found " + std::string(v.type_name()) + " " +
                       v.dump());
}

Result<uint64_t> get_field_count(const json& obj, const std::string& key, const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end()) return bad(path, "missing field \"" + key + "\"");
  return get_count(*it, path + "." + key);
}

Result<std::string> get_field_string(const json& obj, const std::string& key,
                                     const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end()) return bad(path, "missing field \"" + key + "\"");
  if (!it->is_string()) return bad(path + "." + key, "expected a string, found " + it->dump());
  return it->get<std::string>();
}

Result<double> get_frequency(const json& v, const std::string& path) {
  if (!v.is_number()) {
    return bad(path, "expected a number, found " + std::string(v.type_name()) + " " + v.dump());
  }
  const double d = v.get<double>();
  if (!std::isfinite(d)) return bad(path, "the value is not finite");
  if (d < 0) return bad(path, v.dump() + " is negative");
  return d;
}

Result<std::string> read_file(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return not_found_error(path + ": " + ec.message());
  if (size > kMaxFileBytes) return invalid_argument_error(path + ": larger than 1 GiB");
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found_error(path + ": cannot be opened");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

}  // namespace

json stats_to_json(const ActivationStats& stats) {
  const ModelIdentity& m = stats.model();
  json counts = json::array();
  for (size_t r = 0; r < stats.n_rows(); ++r) {
    json row = json::array();
    for (uint64_t e = 0; e < stats.n_experts(); ++e) row.push_back(stats.count(r, e));
    counts.push_back(std::move(row));
  }
  return json{{"format", kStatsFormatName},
              {"version", kStatsFormatVersion},
              {"model",
               {{"architecture", m.architecture},
                {"n_layers", m.n_layers},
                {"n_experts", m.n_experts},
                {"n_experts_used", m.n_experts_used},
                {"hidden_size", m.hidden_size},
                {"fingerprint", m.fingerprint}}},
              {"moe_layers", stats.moe_layer_ids()},
              {"tokens", stats.tokens()},
              {"counts", std::move(counts)}};
}

Result<ActivationStats> stats_from_json(const json& j) {
  if (!j.is_object()) return invalid_argument_error("a statistics file must be a JSON object");
  TANDEM_ASSIGN_OR_RETURN(std::string format, get_field_string(j, "format", "$"));
  if (format != kStatsFormatName) {
    return invalid_argument_error("format is \"" + format + "\", expected \"" +
                                  std::string(kStatsFormatName) + "\"");
  }
  TANDEM_ASSIGN_OR_RETURN(uint64_t version, get_field_count(j, "version", "$"));
  if (version == 0) return invalid_argument_error("version 0 is not a statistics format version");
  if (version > static_cast<uint64_t>(kStatsFormatVersion)) {
    return failed_precondition_error("format version " + std::to_string(version) +
                                     " is newer than this build reads (up to " +
                                     std::to_string(kStatsFormatVersion) + ")");
  }
  auto mit = j.find("model");
  if (mit == j.end() || !mit->is_object()) {
    return invalid_argument_error("$: missing object \"model\"");
  }
  ModelIdentity m;
  TANDEM_ASSIGN_OR_RETURN(m.architecture, get_field_string(*mit, "architecture", "model"));
  TANDEM_ASSIGN_OR_RETURN(m.n_layers, get_field_count(*mit, "n_layers", "model"));
  TANDEM_ASSIGN_OR_RETURN(m.n_experts, get_field_count(*mit, "n_experts", "model"));
  TANDEM_ASSIGN_OR_RETURN(m.n_experts_used, get_field_count(*mit, "n_experts_used", "model"));
  TANDEM_ASSIGN_OR_RETURN(m.hidden_size, get_field_count(*mit, "hidden_size", "model"));
  TANDEM_ASSIGN_OR_RETURN(m.fingerprint, get_field_string(*mit, "fingerprint", "model"));
  if (m.n_layers > model::kMaxLayers) {
    return invalid_argument_error("model.n_layers " + std::to_string(m.n_layers) +
                                  " is above the limit " + std::to_string(model::kMaxLayers));
  }

  auto lit = j.find("moe_layers");
  if (lit == j.end() || !lit->is_array()) {
    return invalid_argument_error("$: missing array \"moe_layers\"");
  }
  m.moe_layers.assign(m.n_layers, false);
  int64_t prev = -1;
  for (size_t i = 0; i < lit->size(); ++i) {
    const std::string path = "moe_layers[" + std::to_string(i) + "]";
    TANDEM_ASSIGN_OR_RETURN(uint64_t layer, get_count((*lit)[i], path));
    if (layer >= m.n_layers) {
      return invalid_argument_error(path + ": layer " + std::to_string(layer) +
                                    " is not below n_layers " + std::to_string(m.n_layers));
    }
    if (static_cast<int64_t>(layer) <= prev) {
      return invalid_argument_error(path + ": layers must be strictly ascending");
    }
    prev = static_cast<int64_t>(layer);
    m.moe_layers[layer] = true;
  }
  const size_t n_rows = lit->size();
  TANDEM_ASSIGN_OR_RETURN(uint64_t tokens, get_field_count(j, "tokens", "$"));
  TANDEM_ASSIGN_OR_RETURN(ActivationStats stats, ActivationStats::create(std::move(m)));

  auto cit = j.find("counts");
  if (cit == j.end() || !cit->is_array())
    return invalid_argument_error("$: missing array \"counts\"");
  if (cit->size() != n_rows) {
    return invalid_argument_error("counts has " + std::to_string(cit->size()) +
                                  " rows, moe_layers " + std::to_string(n_rows));
  }
  for (size_t r = 0; r < n_rows; ++r) {
    const json& row = (*cit)[r];
    const std::string rpath = "counts[" + std::to_string(r) + "]";
    if (!row.is_array()) return invalid_argument_error(rpath + ": expected an array");
    if (row.size() != stats.n_experts()) {
      return invalid_argument_error(rpath + " has " + std::to_string(row.size()) +
                                    " entries, n_experts is " + std::to_string(stats.n_experts()));
    }
    for (size_t e = 0; e < row.size(); ++e) {
      TANDEM_ASSIGN_OR_RETURN(uint64_t c, get_count(row[e], rpath + "[" + std::to_string(e) + "]"));
      stats.add(r, e, c);
    }
  }
  stats.add_tokens(tokens);
  return stats;
}

Status save_stats(const ActivationStats& stats, const std::string& path) {
  json j = stats_to_json(stats);
  // Readable: one line per counts row.
  std::string text = "{\n";
  for (const char* key : {"format", "version", "model", "moe_layers", "tokens"}) {
    text += "  \"" + std::string(key) + "\": " + j[key].dump() + ",\n";
  }
  text += "  \"counts\": [\n";
  const json& counts = j["counts"];
  for (size_t r = 0; r < counts.size(); ++r) {
    text += "    " + counts[r].dump() + (r + 1 < counts.size() ? ",\n" : "\n");
  }
  text += "  ]\n}\n";
  return replace_file(path, text);
}

Result<ActivationStats> load_stats(const std::string& path) {
  TANDEM_ASSIGN_OR_RETURN(std::string text, read_file(path));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid_argument_error(path + ": malformed JSON");
  Result<ActivationStats> stats = stats_from_json(j);
  if (!stats.ok()) return stats.status().with_prefix(path);
  return stats;
}

Result<ActivationStats> load_stats_for(const std::string& path, const ModelIdentity& model) {
  TANDEM_ASSIGN_OR_RETURN(ActivationStats stats, load_stats(path));
  Status same = check_same_model(stats.model(), model);
  if (!same.ok()) return same.with_prefix(path);
  return stats;
}

Result<ExpertTable> table_from_json(const json& j) {
  if (!j.is_array() || j.empty()) {
    return invalid_argument_error("a plain table must be a non-empty JSON array of arrays");
  }
  ExpertTable t;
  for (size_t r = 0; r < j.size(); ++r) {
    const std::string rpath = "row " + std::to_string(r);
    if (!j[r].is_array()) return invalid_argument_error(rpath + ": expected an array");
    if (r == 0) t.n_experts = j[r].size();
    if (j[r].size() != t.n_experts || t.n_experts == 0) {
      return invalid_argument_error(rpath + " has " + std::to_string(j[r].size()) +
                                    " columns, row 0 has " + std::to_string(t.n_experts));
    }
    for (size_t e = 0; e < j[r].size(); ++e) {
      TANDEM_ASSIGN_OR_RETURN(double v,
                              get_frequency(j[r][e], rpath + ", column " + std::to_string(e)));
      t.values.push_back(v);
    }
    t.layers.push_back(static_cast<uint32_t>(r));
  }
  if (t.layers.size() > model::kMaxLayers || t.n_experts > model::kMaxExperts) {
    return invalid_argument_error("the table is larger than any supported model");
  }
  return t;
}

Result<ExpertTable> table_from_csv(std::string_view text) {
  ExpertTable t;
  size_t line_no = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = trim(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    if (line.empty() || line.front() == '#') continue;
    const std::string where = "line " + std::to_string(line_no);
    uint64_t cols = 0;
    while (true) {
      const size_t comma = line.find(',');
      std::string_view cell = trim(line.substr(0, comma));
      const std::string cpath = where + ", column " + std::to_string(cols);
      double v = 0;
      auto [ptr, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), v);
      if (cell.empty() || ec != std::errc() || ptr != cell.data() + cell.size()) {
        return invalid_argument_error(cpath + ": \"" + std::string(cell) + "\" is not a number");
      }
      if (!std::isfinite(v)) return invalid_argument_error(cpath + ": the value is not finite");
      if (v < 0) return invalid_argument_error(cpath + ": " + std::string(cell) + " is negative");
      t.values.push_back(v);
      ++cols;
      if (comma == std::string_view::npos) break;
      line = line.substr(comma + 1);
    }
    if (t.layers.empty()) t.n_experts = cols;
    if (cols != t.n_experts) {
      return invalid_argument_error(where + " has " + std::to_string(cols) +
                                    " columns, the first row has " + std::to_string(t.n_experts));
    }
    if (t.layers.size() >= model::kMaxLayers || t.n_experts > model::kMaxExperts) {
      return invalid_argument_error("the table is larger than any supported model");
    }
    t.layers.push_back(static_cast<uint32_t>(t.layers.size()));
  }
  if (t.layers.empty()) return invalid_argument_error("the CSV table has no rows");
  return t;
}

Result<StatsInput> read_stats_input(const std::string& path) {
  TANDEM_ASSIGN_OR_RETURN(std::string text, read_file(path));
  const size_t first = text.find_first_not_of(" \t\r\n");
  StatsInput in;
  if (first != std::string::npos && (text[first] == '{' || text[first] == '[')) {
    json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return invalid_argument_error(path + ": malformed JSON");
    if (j.is_object()) {
      Result<ActivationStats> stats = stats_from_json(j);
      if (!stats.ok()) return stats.status().with_prefix(path);
      in.table = stats->table();
      in.stats = std::move(stats).value();
      in.kind = "tandem";
      return in;
    }
    Result<ExpertTable> table = table_from_json(j);
    if (!table.ok()) return table.status().with_prefix(path);
    in.table = std::move(table).value();
    in.kind = "json-table";
    return in;
  }
  Result<ExpertTable> table = table_from_csv(text);
  if (!table.ok()) return table.status().with_prefix(path);
  in.table = std::move(table).value();
  in.kind = "csv-table";
  return in;
}

Result<ExpertTable> conform_to_model(const StatsInput& input, const ModelIdentity& model) {
  if (input.stats) {
    TANDEM_RETURN_IF_ERROR(check_same_model(input.stats->model(), model));
    return input.table;
  }
  const ExpertTable& plain = input.table;
  if (plain.n_experts != model.n_experts) {
    return invalid_argument_error("the table has " + std::to_string(plain.n_experts) +
                                  " columns, the model has " + std::to_string(model.n_experts) +
                                  " experts per layer");
  }
  ExpertTable t;
  t.n_experts = plain.n_experts;
  t.layers = model.moe_layer_ids();
  if (plain.n_rows() == t.layers.size()) {
    t.values = plain.values;
    return t;
  }
  if (plain.n_rows() == model.n_layers) {
    for (uint32_t layer : t.layers) {
      t.values.insert(t.values.end(), plain.values.begin() + layer * plain.n_experts,
                      plain.values.begin() + (layer + 1) * plain.n_experts);
    }
    return t;
  }
  return invalid_argument_error("the table has " + std::to_string(plain.n_rows()) +
                                " rows, the model has " + std::to_string(t.layers.size()) +
                                " MoE layers (" + std::to_string(model.n_layers) + " layers)");
}

}  // namespace tandem::placement
