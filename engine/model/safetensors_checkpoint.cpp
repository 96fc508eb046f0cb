// SafetensorsCheckpoint: opening a Hugging Face model directory or a lone .safetensors file.
#include "engine/model/safetensors_checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <system_error>

#include "engine/model/hf_config.h"

namespace tandem::model {

namespace fs = std::filesystem;

namespace {

constexpr const char* kConfigName = "config.json";
constexpr const char* kGenerationConfigName = "generation_config.json";
constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleName = "model.safetensors";

bool is_within(const fs::path& child, const fs::path& root) {
  auto c = child.begin();
  for (auto r = root.begin(); r != root.end(); ++r, ++c) {
    if (r->empty()) continue;  // a trailing separator
    if (c == child.end() || *c != *r) return false;
  }
  return true;
}

// Resolves dir/name (name relative, no ".." component) and checks it stays inside `root`.
// NOT_FOUND when it does not exist.
Result<std::string> resolve_inside(const fs::path& dir, const std::string& name,
                                   const fs::path& root, const std::string& what) {
  const fs::path rel(name);
  if (name.empty() || rel.is_absolute()) {
    return permission_denied_error(what + ": path " + (name.empty() ? "\"\"" : name) +
                                   " must be a non-empty path relative to the model directory");
  }
  for (const fs::path& part : rel) {
    if (part == "..") {
      return permission_denied_error(what + ": path " + name +
                                     " has a \"..\" component; files must stay inside " +
                                     dir.string());
    }
  }
  const fs::path joined = dir / rel;
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(joined, ec)) || ec) {
    return not_found_error(joined.string() + ": not found" +
                           (what.empty() ? "" : " (" + what + ")"));
  }
  const fs::path resolved = fs::canonical(joined, ec);
  if (ec) {
    return not_found_error(joined.string() + ": cannot resolve: " + ec.message());
  }
  if (!is_within(resolved, root)) {
    return permission_denied_error(joined.string() + " resolves to " + resolved.string() +
                                   ", outside " + root.string());
  }
  return joined.string();
}

bool exists_entry(const fs::path& p) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(p, ec)) && !ec;
}

}  // namespace

Result<SafetensorsCheckpoint> SafetensorsCheckpoint::open(
    const std::string& path, const SafetensorsCheckpointOptions& options) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) return not_found_error(path + ": not found");

  SafetensorsCheckpoint ckpt;
  ckpt.path_ = path;
  std::map<std::string, std::set<std::string>> expected;  // shard name -> tensors (sharded only)

  if (fs::is_regular_file(st)) {
    TANDEM_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(path));
    ckpt.shards_.push_back(std::move(file));
  } else if (fs::is_directory(st)) {
    const fs::path dir(path);
    const fs::path root = fs::canonical(
        options.containment_root.empty() ? dir : fs::path(options.containment_root), ec);
    if (ec) {
      return not_found_error("containment root " + options.containment_root +
                             ": cannot resolve: " + ec.message());
    }
    TANDEM_ASSIGN_OR_RETURN(std::string config_path,
                            resolve_inside(dir, kConfigName, root, path + " needs config.json"));
    TANDEM_ASSIGN_OR_RETURN(nlohmann::json config, load_json_file(config_path));
    if (!config.is_object()) {
      return invalid_argument_error(config_path + ": not a JSON object");
    }
    ckpt.config_ = std::move(config);
    if (exists_entry(dir / kGenerationConfigName)) {
      TANDEM_ASSIGN_OR_RETURN(std::string gen_path,
                              resolve_inside(dir, kGenerationConfigName, root, ""));
      TANDEM_ASSIGN_OR_RETURN(nlohmann::json gen, load_json_file(gen_path));
      if (!gen.is_object()) return invalid_argument_error(gen_path + ": not a JSON object");
      ckpt.generation_config_ = std::move(gen);
    }

    if (exists_entry(dir / kIndexName) && exists_entry(dir / kSingleName)) {
      return invalid_argument_error(
          path + " holds both " + kIndexName + " (sharded weights) and " + kSingleName +
          ": two copies of the weights, whose tensor names repeat; remove the one that is not "
          "the model");
    }
    if (exists_entry(dir / kIndexName)) {
      TANDEM_ASSIGN_OR_RETURN(std::string index_path, resolve_inside(dir, kIndexName, root, ""));
      TANDEM_ASSIGN_OR_RETURN(nlohmann::json index, load_json_file(index_path));
      if (!index.is_object()) return invalid_argument_error(index_path + ": not a JSON object");
      const auto meta = index.find("metadata");
      if (meta != index.end()) {
        if (!meta->is_object() && !meta->is_null()) {
          return invalid_argument_error(index_path + ": \"metadata\" is a " +
                                        std::string(meta->type_name()) + ", not an object");
        }
        ckpt.index_metadata_ = *meta;
      }
      const auto map = index.find("weight_map");
      if (map == index.end() || !map->is_object()) {
        return invalid_argument_error(index_path + ": \"weight_map\" is missing or not an object");
      }
      if (map->empty()) return invalid_argument_error(index_path + ": \"weight_map\" is empty");
      for (const auto& [tensor, shard] : map->items()) {
        if (!shard.is_string()) {
          return invalid_argument_error(index_path + ": weight_map[\"" + tensor + "\"] is a " +
                                        shard.type_name() + ", not a file name");
        }
        expected[shard.get<std::string>()].insert(tensor);
      }
      for (const auto& [shard, names] : expected) {
        TANDEM_ASSIGN_OR_RETURN(std::string shard_path,
                                resolve_inside(dir, shard, root, index_path + " names shard"));
        TANDEM_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(shard_path));
        for (const TensorInfo& t : file.tensors()) {
          if (names.count(t.name) == 0) {
            const bool listed = map->contains(t.name);
            return invalid_argument_error(shard_path + ": tensor \"" + t.name + "\" " +
                                          (listed ? "is listed in " + index_path + " under shard " +
                                                        map->at(t.name).get<std::string>()
                                                  : "is not listed in " + index_path));
          }
        }
        for (const std::string& name : names) {
          if (file.find(name) == nullptr) {
            return invalid_argument_error(index_path + ": tensor \"" + name +
                                          "\" is listed in shard " + shard + " but " + shard_path +
                                          " does not hold it");
          }
        }
        ckpt.shards_.push_back(std::move(file));
      }
    } else if (exists_entry(dir / kSingleName)) {
      TANDEM_ASSIGN_OR_RETURN(std::string single, resolve_inside(dir, kSingleName, root, ""));
      TANDEM_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(single));
      ckpt.shards_.push_back(std::move(file));
    } else {
      return not_found_error(path + ": no " + kIndexName + " and no " + kSingleName);
    }
  } else {
    return invalid_argument_error(path + ": neither a regular file nor a directory");
  }

  for (const SafetensorsFile& shard : ckpt.shards_) {
    for (const TensorInfo& t : shard.tensors()) {
      if (!ckpt.by_name_.emplace(t.name, ckpt.tensors_.size()).second) {
        return invalid_argument_error(shard.path() + ": tensor \"" + t.name +
                                      "\" also appears in " +
                                      ckpt.tensors_[ckpt.by_name_[t.name]].file);
      }
      ckpt.tensors_.push_back(t);
    }
  }
  return ckpt;
}

const TensorInfo* SafetensorsCheckpoint::find(std::string_view name) const {
  const auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace tandem::model
