// Applies a YAML configuration file: sections are maps, keys are the field table's names,
// every problem reported as "file:line: key: what is wrong".
#include "config/yaml_source.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "config/config_fields.h"

namespace tandem::config::internal {

namespace {

class YamlApplier {
 public:
  YamlApplier(const std::string& path, Config& config, std::vector<ValueSource>& sources,
              std::vector<std::string>& errors)
      : path_(path), config_(config), sources_(sources), errors_(errors) {}

  void apply_document(const YAML::Node& root) {
    if (root.IsNull()) return;  // An empty file sets nothing.
    if (!root.IsMap()) {
      error(root, "the top level must be a map of sections (server:, model:, ...), got " +
                      kind_name(root));
      return;
    }
    std::map<std::string, int> seen;
    for (const auto& entry : root) {
      if (!entry.first.IsScalar()) {
        error(entry.first, "a section name must be a plain word");
        continue;
      }
      const std::string name = entry.first.Scalar();
      if (!note_unique(seen, name, entry.first)) continue;
      if (!is_section(name)) {
        report_unknown_section(entry.first, name);
        continue;
      }
      apply_section(name, entry.second);
    }
  }

 private:
  static std::string kind_name(const YAML::Node& node) {
    if (node.IsMap()) return "a map";
    if (node.IsSequence()) return "a list";
    if (node.IsScalar()) return "the scalar '" + node.Scalar() + "'";
    return "nothing";
  }

  static bool is_section(std::string_view name) {
    for (const SectionDescriptor& s : config_sections()) {
      if (s.name == name) return true;
    }
    return false;
  }

  int line_of(const YAML::Node& node) const { return node.Mark().line + 1; }

  std::string where(const YAML::Node& node) const {
    const YAML::Mark mark = node.Mark();
    if (mark.is_null()) return path_;
    return path_ + ":" + std::to_string(mark.line + 1);
  }

  void error(const YAML::Node& node, const std::string& message) {
    errors_.push_back(where(node) + ": " + message);
  }

  // Records `name`; reports and returns false when it was already present in the same map.
  bool note_unique(std::map<std::string, int>& seen, const std::string& name,
                   const YAML::Node& key_node) {
    const auto [it, inserted] = seen.emplace(name, line_of(key_node));
    if (!inserted) {
      error(key_node,
            "duplicate key '" + name + "' (first set on line " + std::to_string(it->second) + ")");
    }
    return inserted;
  }

  void report_unknown_section(const YAML::Node& key_node, const std::string& name) {
    if (find_field(name) != nullptr) {
      const size_t dot = name.find('.');
      error(key_node, "unknown section '" + name + "': keys are nested under their section, " +
                          "write '" + name.substr(0, dot) + ":' and under it '" +
                          name.substr(dot + 1) + ": ...'");
      return;
    }
    const std::string suggestion = suggest_section(name);
    error(key_node, "unknown section '" + name + "'" +
                        (suggestion.empty() ? std::string(" (sections: server, metrics, model, "
                                                          "placement, runtime, logging)")
                                            : " (did you mean '" + suggestion + "'?)"));
  }

  void apply_section(const std::string& section, const YAML::Node& body) {
    if (body.IsNull()) return;  // "server:" with every key commented out.
    if (!body.IsMap()) {
      error(body, "section '" + section + "' must be a map of keys, got " + kind_name(body));
      return;
    }
    std::map<std::string, int> seen;
    for (const auto& entry : body) {
      if (!entry.first.IsScalar()) {
        error(entry.first, "a key in section '" + section + "' must be a plain word");
        continue;
      }
      const std::string key = section + "." + entry.first.Scalar();
      if (!note_unique(seen, entry.first.Scalar(), entry.first)) continue;
      const FieldDescriptor* field = find_field(key);
      if (field == nullptr) {
        const std::string suggestion = suggest_key(key);
        error(entry.first,
              "unknown key '" + key + "'" +
                  (suggestion.empty() ? std::string() : " (did you mean '" + suggestion + "'?)"));
        continue;
      }
      apply_value(*field, entry.second, entry.first);
    }
  }

  void apply_value(const FieldDescriptor& field, const YAML::Node& value,
                   const YAML::Node& key_node) {
    const std::string key = field.key();
    const FieldKind kind = field_kind(field);
    // A null value has no position of its own (yaml-cpp marks where the next token starts).
    const YAML::Node& at = value.IsNull() || value.Mark().is_null() ? key_node : value;
    if (kind == FieldKind::kStringList) {
      std::vector<std::string> items;
      if (value.IsSequence()) {
        for (const auto& item : value) {
          if (!item.IsScalar()) {
            error(item,
                  key + ": expected a list of strings, got an item that is " + kind_name(item));
            return;
          }
          items.push_back(item.Scalar());
        }
      } else if (!value.IsNull()) {
        error(at,
              key + ": expected a list of strings such as [\"a\", \"b\"], got " + kind_name(value));
        return;
      }
      set_field_list(field, std::move(items), config_);
    } else if (value.IsScalar() || (value.IsNull() && kind == FieldKind::kString)) {
      const std::string text = value.IsScalar() ? value.Scalar() : std::string();
      const Status status = set_field_from_text(field, text, config_);
      if (!status.ok()) {
        error(at, key + ": " + status.message());
        return;
      }
    } else {
      error(at, key + ": expected " + field_type_description(field) + ", got " + kind_name(value));
      return;
    }
    sources_[field_index(field)] = ValueSource{SourceKind::kFile, where(key_node)};
  }

  const std::string& path_;
  Config& config_;
  std::vector<ValueSource>& sources_;
  std::vector<std::string>& errors_;
};

}  // namespace

void apply_yaml_file(const std::string& path, Config& config, std::vector<ValueSource>& sources,
                     std::vector<std::string>& errors, bool& file_unreadable) {
  file_unreadable = false;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    errors.push_back("cannot read config file '" + path + "': it is a directory");
    file_unreadable = true;
    return;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    errors.push_back("cannot read config file '" + path + "': " + std::strerror(errno));
    file_unreadable = true;
    return;
  }
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) {
    errors.push_back("cannot read config file '" + path + "': read error");
    file_unreadable = true;
    return;
  }
  YAML::Node root;
  try {
    root = YAML::Load(contents.str());
  } catch (const YAML::Exception& e) {
    const std::string location =
        e.mark.is_null() ? path : path + ":" + std::to_string(e.mark.line + 1);
    errors.push_back(location + ": invalid YAML: " + e.msg);
    return;
  }
  try {
    YamlApplier(path, config, sources, errors).apply_document(root);
  } catch (const YAML::Exception& e) {
    errors.push_back(path + ": " + e.what());
  }
}

}  // namespace tandem::config::internal
