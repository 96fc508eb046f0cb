// ModelIdentity: building it from a checkpoint, the fingerprint, and comparing two identities.
#include "engine/placement/model_identity.h"

#include <algorithm>
#include <cstdio>

#include "engine/model/architecture.h"

namespace tandem::placement {

namespace {

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ULL;
constexpr uint64_t kFnvPrime = 0x100000001b3ULL;

void fnv(uint64_t& h, std::string_view text) {
  for (unsigned char c : text) {
    h ^= c;
    h *= kFnvPrime;
  }
}

std::string layers_text(const std::vector<bool>& moe) {
  std::string s = "[";
  bool first = true;
  for (size_t i = 0; i < moe.size(); ++i) {
    if (!moe[i]) continue;
    s += (first ? "" : ",") + std::to_string(i);
    first = false;
  }
  return s + "]";
}

}  // namespace

uint64_t fnv1a64(std::string_view bytes) {
  uint64_t h = kFnvOffset;
  fnv(h, bytes);
  return h;
}

uint64_t ModelIdentity::n_moe_layers() const {
  return static_cast<uint64_t>(std::count(moe_layers.begin(), moe_layers.end(), true));
}

std::vector<uint32_t> ModelIdentity::moe_layer_ids() const {
  std::vector<uint32_t> ids;
  for (size_t i = 0; i < moe_layers.size(); ++i) {
    if (moe_layers[i]) ids.push_back(static_cast<uint32_t>(i));
  }
  return ids;
}

std::string checkpoint_fingerprint(std::string_view architecture,
                                   std::span<const model::TensorInfo> tensors) {
  std::vector<const model::TensorInfo*> sorted;
  sorted.reserve(tensors.size());
  for (const model::TensorInfo& t : tensors) sorted.push_back(&t);
  std::sort(
      sorted.begin(), sorted.end(),
      [](const model::TensorInfo* a, const model::TensorInfo* b) { return a->name < b->name; });
  uint64_t h = kFnvOffset;
  fnv(h, "tandem-fingerprint-v1\n");
  fnv(h, architecture);
  fnv(h, "\n");
  std::string line;
  for (const model::TensorInfo* t : sorted) {
    line = t->name;
    line += '\t';
    line += tensor_type_name(t->type);
    line += '\t';
    for (size_t i = 0; i < t->shape.size(); ++i) {
      if (i) line += 'x';
      line += std::to_string(t->shape[i]);
    }
    line += '\t';
    line += std::to_string(t->data.size());
    line += '\n';
    fnv(h, line);
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "fnv1a64:%016llx", static_cast<unsigned long long>(h));
  return buf;
}

ModelIdentity model_identity(const model::ModelSpec& spec,
                             std::span<const model::TensorInfo> tensors) {
  ModelIdentity id;
  id.architecture = std::string(model::architecture_name(spec.architecture));
  id.n_layers = spec.n_layers;
  id.n_experts = spec.n_experts;
  id.n_experts_used = spec.n_experts_used;
  id.hidden_size = spec.hidden_size;
  id.moe_layers = spec.moe_layers;
  id.fingerprint = checkpoint_fingerprint(id.architecture, tensors);
  return id;
}

Result<ModelIdentity> model_identity(const model::Checkpoint& checkpoint) {
  if (!checkpoint.spec) {
    return failed_precondition_error(checkpoint.path +
                                     ": not a runnable model: " + checkpoint.not_runnable_reason);
  }
  return model_identity(*checkpoint.spec, checkpoint.tensors);
}

Status check_same_model(const ModelIdentity& found, const ModelIdentity& expected) {
  std::vector<std::string> diffs;
  auto cmp = [&](const char* field, const std::string& a, const std::string& b) {
    if (a != b)
      diffs.push_back(std::string(field) + " is " + a + " in the file, " + b + " in the model");
  };
  auto num = [&](const char* field, uint64_t a, uint64_t b) {
    cmp(field, std::to_string(a), std::to_string(b));
  };
  cmp("architecture", found.architecture, expected.architecture);
  num("n_layers", found.n_layers, expected.n_layers);
  num("n_experts", found.n_experts, expected.n_experts);
  num("n_experts_used", found.n_experts_used, expected.n_experts_used);
  num("hidden_size", found.hidden_size, expected.hidden_size);
  cmp("moe_layers", layers_text(found.moe_layers), layers_text(expected.moe_layers));
  cmp("fingerprint", found.fingerprint, expected.fingerprint);
  if (diffs.empty()) return Status();
  std::string msg = "statistics are for another model: ";
  for (size_t i = 0; i < diffs.size(); ++i) msg += (i ? "; " : "") + diffs[i];
  return failed_precondition_error(msg);
}

}  // namespace tandem::placement
