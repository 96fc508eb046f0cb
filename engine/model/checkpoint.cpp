// Checkpoint: format detection, spec building and weight binding for GGUF and HF checkpoints.
#include "engine/model/checkpoint.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>

#include "engine/model/architecture_spec.h"
#include "engine/model/fp8_block_weights.h"
#include "engine/model/gguf_file.h"
#include "engine/model/gguf_split.h"
#include "engine/model/safetensors_checkpoint.h"

namespace tandem::model {

std::string_view checkpoint_format_name(CheckpointFormat format) {
  return format == CheckpointFormat::kGguf ? "gguf" : "safetensors";
}

Result<CheckpointFormat> detect_checkpoint_format(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return not_found_error(path + ": no such file or directory");
  if (S_ISDIR(st.st_mode)) return CheckpointFormat::kSafetensors;
  if (!S_ISREG(st.st_mode)) return invalid_argument_error(path + ": not a regular file");
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return permission_denied_error(path + ": cannot be read");
  unsigned char head[9] = {};
  const size_t n = std::fread(head, 1, sizeof(head), f);
  std::fclose(f);
  if (n >= 4 && std::memcmp(head, "GGUF", 4) == 0) return CheckpointFormat::kGguf;
  if (n == sizeof(head) && head[8] == '{') return CheckpointFormat::kSafetensors;
  std::string first;
  for (size_t i = 0; i < std::min<size_t>(n, 4); ++i) {
    char hex[4];
    std::snprintf(hex, sizeof(hex), "%02x", head[i]);
    first += (i > 0 ? " " : "") + std::string(hex);
  }
  return invalid_argument_error(
      path + ": neither a GGUF file (it does not start with \"GGUF\"" +
      (n == 0 ? std::string("; the file is empty") : "; its first bytes are " + first) +
      ") nor a safetensors file (no JSON header after the 8-byte length)");
}

Result<ModelWeights> check_model(const ModelSpec& spec, std::span<const TensorInfo> tensors,
                                 TensorNaming naming) {
  std::vector<std::string> problems;
  check_spec(spec, problems);
  Result<ModelWeights> weights = bind_weights(spec, tensors, naming);
  if (problems.empty() && weights.ok()) return weights;
  std::string message =
      "inconsistent " + std::string(architecture_name(spec.architecture)) + " model:";
  for (const std::string& p : problems) message += "\n  " + p;
  if (!weights.ok()) {
    // bind_weights' message is a title line followed by indented problems; keep the problems.
    const std::string& m = weights.status().message();
    const size_t nl = m.find('\n');
    message += nl == std::string::npos ? "\n  " + m : m.substr(nl);
  }
  return invalid_argument_error(std::move(message));
}

namespace {

Status finish_model(Checkpoint& c, Result<ModelSpec> spec, TensorNaming naming) {
  if (!spec.ok()) {
    if (spec.status().code() != StatusCode::kUnimplemented) {
      return spec.status().with_prefix(c.path);
    }
    c.not_runnable_reason = spec.status().message();
    return Status();
  }
  Result<ModelWeights> weights = check_model(*spec, c.tensors, naming);
  if (!weights.ok()) return weights.status().with_prefix(c.path);
  c.spec = std::move(spec).value();
  c.weights = std::move(weights).value();
  return Status();
}

Result<Checkpoint> open_gguf(const std::string& path) {
  TANDEM_ASSIGN_OR_RETURN(GgufFile file, open_gguf_model(path));
  auto owner = std::make_shared<GgufFile>(std::move(file));
  Checkpoint c;
  c.path = path;
  c.format = CheckpointFormat::kGguf;
  for (const GgufKeyValue& kv : owner->metadata()) {
    c.metadata.emplace_back(std::string(kv.key), kv.value.debug_string());
  }
  c.tensors = owner->tensors();  // copies of the infos; data still views owner's mappings
  if (Result<std::string_view> a = owner->get_string("general.architecture"); a.ok()) {
    c.architecture_name = std::string(*a);
  }
  c.owner = owner;
  c.files = owner->mappings();  // one per shard of a split model
  if (c.tensors.empty()) {
    c.not_runnable_reason = "no tensors (a vocabulary-only file)";
    return c;
  }
  Result<ModelSpec> spec = spec_from_gguf(*owner);
  TANDEM_RETURN_IF_ERROR(finish_model(c, std::move(spec), TensorNaming::kGguf));
  return c;
}

// What an HF checkpoint whose tensors were partly converted owns: the reader (the mappings) and
// the converted copies.
struct ConvertedHfCheckpoint {
  std::shared_ptr<const SafetensorsCheckpoint> reader;
  std::vector<ConvertedTensors> conversions;
};

// Puts `converted` in place of the tensors it replaces in c.tensors; its buffers join the
// checkpoint's owner, and the replaced tensors' file bytes are released (Checkpoint::
// replaced_bytes).
void replace_tensors(Checkpoint& c, ConvertedHfCheckpoint& owner, ConvertedTensors converted) {
  const std::set<std::string> replaced(converted.replaced.begin(), converted.replaced.end());
  std::vector<TensorInfo> tensors;
  tensors.reserve(c.tensors.size() + converted.tensors.size());
  std::vector<std::span<const uint8_t>> sources;
  for (TensorInfo& t : c.tensors) {
    if (replaced.count(t.name) == 0) {
      tensors.push_back(std::move(t));
    } else {
      sources.push_back(t.data);
    }
  }
  c.replaced_bytes.insert(c.replaced_bytes.end(), sources.begin(), sources.end());
  release_copied_spans(std::move(sources));
  for (const TensorInfo& t : converted.tensors) tensors.push_back(t);
  c.tensors = std::move(tensors);
  owner.conversions.push_back(std::move(converted));
  // The buffers' vector moved with its storage: the elements keep their addresses.
  for (const OwnedCopy& copy : owner.conversions.back().buffers) c.converted.push_back(&copy);
}

// The conversions an HF checkpoint needs before its tensors bind: FP8 block-quantized weights
// into kF8_E4M3_B128, then the architecture's own (HfNames::convert). `spec` is null when
// config.json did not give a valid one.
Status convert_hf_tensors(const nlohmann::json& config, const ModelSpec* spec, Checkpoint& c,
                          std::shared_ptr<const SafetensorsCheckpoint> reader) {
  Result<std::optional<Fp8BlockConfig>> fp8 = fp8_block_config(config);
  if (!fp8.ok()) return fp8.status().with_prefix(c.path);
  const auto arch_convert = spec != nullptr ? traits(spec->architecture).hf.convert : nullptr;
  if (!fp8->has_value() && arch_convert == nullptr) return Status();
  auto owner = std::make_shared<ConvertedHfCheckpoint>();
  owner->reader = std::move(reader);
  if (fp8->has_value()) {
    Result<ConvertedTensors> weights = convert_fp8_block_weights(**fp8, c.tensors);
    if (!weights.ok()) return weights.status().with_prefix(c.path);
    replace_tensors(c, *owner, std::move(weights).value());
  }
  if (arch_convert != nullptr) {
    Result<ConvertedTensors> converted = arch_convert(*spec, c.tensors);
    if (!converted.ok()) return converted.status().with_prefix(c.path);
    replace_tensors(c, *owner, std::move(converted).value());
  }
  c.owner = std::move(owner);
  // A file that shrank while it was read gave zeros (mapping_fault_guard.h): say so now.
  return check_checkpoint_files(c);
}

Result<Checkpoint> open_hf(const std::string& path) {
  TANDEM_ASSIGN_OR_RETURN(SafetensorsCheckpoint st, SafetensorsCheckpoint::open(path));
  auto owner = std::make_shared<SafetensorsCheckpoint>(std::move(st));
  Checkpoint c;
  c.path = path;
  c.format = CheckpointFormat::kSafetensors;
  for (const SafetensorsFile& shard : owner->shards()) {
    c.files.push_back(&shard.mapping());
    for (const auto& [key, value] : shard.metadata()) c.metadata.emplace_back(key, value);
  }
  if (owner->index_metadata().is_object()) {
    for (const auto& [key, value] : owner->index_metadata().items()) {
      c.metadata.emplace_back("index." + key, value.dump());
    }
  }
  c.tensors = owner->tensors();
  c.owner = owner;
  if (!owner->config()) {
    c.not_runnable_reason = "no config.json: a lone safetensors file names no architecture";
    return c;
  }
  nlohmann::json config = *owner->config();
  if (auto it = config.find("model_type"); it != config.end() && it->is_string()) {
    c.architecture_name = it->get<std::string>();
  }
  // bos/eos from generation_config.json when config.json lacks them.
  if (owner->generation_config() && owner->generation_config()->is_object()) {
    for (const char* key : {"bos_token_id", "eos_token_id"}) {
      auto it = config.find(key);
      auto gen = owner->generation_config()->find(key);
      if ((it == config.end() || it->is_null()) && gen != owner->generation_config()->end()) {
        config[key] = *gen;
      }
    }
  }
  Result<ModelSpec> spec = spec_from_hf_config(config, "config.json");
  const bool spec_valid = spec.ok() && validate_spec(*spec).ok();
  TANDEM_RETURN_IF_ERROR(convert_hf_tensors(config, spec_valid ? &*spec : nullptr, c, owner));
  TANDEM_RETURN_IF_ERROR(finish_model(c, std::move(spec), TensorNaming::kHf));
  return c;
}

}  // namespace

Result<Checkpoint> open_checkpoint(const std::string& path) {
  TANDEM_ASSIGN_OR_RETURN(CheckpointFormat format, detect_checkpoint_format(path));
  return format == CheckpointFormat::kGguf ? open_gguf(path) : open_hf(path);
}

Status check_checkpoint_files(const Checkpoint& c) {
  for (const MappedFile* file : c.files) TANDEM_RETURN_IF_ERROR(file->check_unchanged());
  return Status();
}

Status load_checkpoint_into_memory(const Checkpoint& c) {
  for (const MappedFile* file : c.files) TANDEM_RETURN_IF_ERROR(file->load_into_memory());
  release_copied_spans(c.replaced_bytes);
  return Status();
}

uint64_t drop_released_copies(const Checkpoint& c) {
  uint64_t dropped = 0;
  for (const MappedFile* file : c.files) dropped += file->drop_released();
  for (const OwnedCopy* copy : c.converted) dropped += copy->drop_released();
  return dropped;
}

Result<Checkpoint> open_model(const std::string& path) {
  TANDEM_ASSIGN_OR_RETURN(Checkpoint c, open_checkpoint(path));
  if (!c.spec) return unimplemented_error(path + ": " + c.not_runnable_reason);
  return c;
}

}  // namespace tandem::model
