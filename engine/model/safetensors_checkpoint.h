// SafetensorsCheckpoint: a Hugging Face model directory (config.json + one or more .safetensors
// shards) or a lone .safetensors file, with every tensor as a view into its shard's mapping.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "engine/model/safetensors_file.h"
#include "engine/model/tensor_info.h"

namespace tandem::model {

struct SafetensorsCheckpointOptions {
  // Every file the checkpoint opens (config.json, generation_config.json, the index, the shards)
  // must, after resolving symlinks, lie inside this directory. Empty: the model directory itself.
  // A server passes its models_root here so that layouts whose files are symlinks into a shared
  // blob folder (the Hugging Face hub cache) still open.
  std::string containment_root;
};

// Layouts accepted by open(path):
// - path is a regular file: a lone .safetensors file; tensors only, no config.
// - path is a directory: config.json (required), generation_config.json (optional), and either
//   model.safetensors.index.json ({"metadata": {...}, "weight_map": {tensor: shard file}}) with
//   its shards, or model.safetensors. Both at once is an error (two copies of the weights: which
//   is the model is not the reader's guess).
// Sharded checks: shard names are relative paths without ".." components; each shard is mapped
// once; every tensor the index lists is in the shard it names, and every tensor of every shard is
// listed in the index under that shard; no tensor name appears twice.
// Errors name the file and the tensor or field: NOT_FOUND (missing config/weights/shard),
// INVALID_ARGUMENT (malformed JSON or safetensors, index mismatch), PERMISSION_DENIED (a path or
// symlink that resolves outside the containment root; the message shows the resolved path).
//
// Owns the mappings; TensorInfo::data views stay valid while this object lives. Move-only;
// immutable after open, so any thread may read it concurrently.
class SafetensorsCheckpoint {
 public:
  static Result<SafetensorsCheckpoint> open(const std::string& path,
                                            const SafetensorsCheckpointOptions& options = {});

  SafetensorsCheckpoint(SafetensorsCheckpoint&&) noexcept = default;
  SafetensorsCheckpoint& operator=(SafetensorsCheckpoint&&) noexcept = default;
  SafetensorsCheckpoint(const SafetensorsCheckpoint&) = delete;
  SafetensorsCheckpoint& operator=(const SafetensorsCheckpoint&) = delete;

  // The directory (or the lone file) that was opened, as given.
  const std::string& path() const { return path_; }
  // config.json; nullopt for a lone file.
  const std::optional<nlohmann::json>& config() const { return config_; }
  // generation_config.json; nullopt when absent.
  const std::optional<nlohmann::json>& generation_config() const { return generation_config_; }
  // The index's "metadata" object (sharded) or null.
  const nlohmann::json& index_metadata() const { return index_metadata_; }
  // The mapped shards in the order of their file names (one entry when not sharded).
  const std::vector<SafetensorsFile>& shards() const { return shards_; }
  // All tensors: shard by shard, within a shard by offset.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // The tensor called `name`, or nullptr. O(1).
  const TensorInfo* find(std::string_view name) const;

 private:
  SafetensorsCheckpoint() = default;

  std::string path_;
  std::optional<nlohmann::json> config_;
  std::optional<nlohmann::json> generation_config_;
  nlohmann::json index_metadata_;
  std::vector<SafetensorsFile> shards_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> by_name_;
};

}  // namespace tandem::model
