// The readers spec_from_gguf and spec_from_hf_config build a ModelSpec with: GGUF metadata keys
// (KeyReader) and config.json fields (FieldReader), both collecting every missing or mistyped
// entry instead of stopping at the first; the per-architecture readers (engine/model/archs/) use
// them too.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "engine/model/gguf_file.h"
#include "engine/model/model_spec.h"

namespace tandem::model {

// Collects every missing / mistyped key instead of stopping at the first.
class KeyReader {
 public:
  explicit KeyReader(const GgufFile& file) : file_(file) {}

  uint64_t required_u64(const std::string& key) {
    Result<uint64_t> v = file_.get_u64(key);
    if (!v.ok()) {
      problems_.push_back(v.status().code() == StatusCode::kNotFound ? "missing key " + key
                                                                     : v.status().message());
      return 0;
    }
    return *v;
  }

  std::optional<uint64_t> optional_u64(const std::string& key) {
    if (!file_.contains(key)) return std::nullopt;
    Result<uint64_t> v = file_.get_u64(key);
    if (!v.ok()) {
      problems_.push_back(v.status().message());
      return std::nullopt;
    }
    return *v;
  }

  std::optional<double> optional_f64(const std::string& key) {
    if (!file_.contains(key)) return std::nullopt;
    Result<double> v = file_.get_f64(key);
    if (!v.ok()) {
      problems_.push_back(v.status().message());
      return std::nullopt;
    }
    return *v;
  }

  double required_f64(const std::string& key) {
    std::optional<double> v = optional_f64(key);
    if (!v && !file_.contains(key)) problems_.push_back("missing key " + key);
    return v.value_or(0.0);
  }

  std::optional<std::string> optional_string(const std::string& key) {
    if (!file_.contains(key)) return std::nullopt;
    Result<std::string_view> v = file_.get_string(key);
    if (!v.ok()) {
      problems_.push_back(v.status().message());
      return std::nullopt;
    }
    return std::string(*v);
  }

  std::optional<bool> optional_bool(const std::string& key) {
    if (!file_.contains(key)) return std::nullopt;
    Result<bool> v = file_.get_bool(key);
    if (!v.ok()) {
      problems_.push_back(v.status().message());
      return std::nullopt;
    }
    return *v;
  }

  void problem(std::string p) { problems_.push_back(std::move(p)); }

  Status status() const {
    if (problems_.empty()) return Status();
    std::string message = file_.name() + ": bad model metadata:";
    for (const std::string& p : problems_) message += "\n  " + p;
    return invalid_argument_error(std::move(message));
  }

 private:
  const GgufFile& file_;
  std::vector<std::string> problems_;
};

using nlohmann::json;

// Reads config fields, collecting every missing / mistyped one.
class FieldReader {
 public:
  FieldReader(const json& config, std::string_view source) : config_(config), source_(source) {}

  const json* find(const json& obj, const std::string& key) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return nullptr;
    return &*it;
  }

  std::optional<uint64_t> optional_u64(const std::string& key, const json* obj = nullptr) {
    const json* v = find(obj ? *obj : config_, key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number_integer() ||
        (v->is_number_integer() && !v->is_number_unsigned() && v->get<int64_t>() < 0)) {
      problems_.push_back(key + " must be a non-negative integer, got " + v->dump());
      return std::nullopt;
    }
    return v->get<uint64_t>();
  }

  uint64_t required_u64(const std::string& key) {
    if (find(config_, key) == nullptr) {
      problems_.push_back("missing field " + key);
      return 0;
    }
    return optional_u64(key).value_or(0);
  }

  std::optional<double> optional_f64(const std::string& key, const json* obj = nullptr) {
    const json* v = find(obj ? *obj : config_, key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number()) {
      problems_.push_back(key + " must be a number, got " + v->dump());
      return std::nullopt;
    }
    return v->get<double>();
  }

  std::optional<bool> optional_bool(const std::string& key, const json* obj = nullptr) {
    const json* v = find(obj ? *obj : config_, key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_boolean()) {
      problems_.push_back(key + " must be true or false, got " + v->dump());
      return std::nullopt;
    }
    return v->get<bool>();
  }

  std::string optional_string(const std::string& key, const json* obj = nullptr) {
    const json* v = find(obj ? *obj : config_, key);
    if (v == nullptr) return "";
    if (!v->is_string()) {
      problems_.push_back(key + " must be a string, got " + v->dump());
      return "";
    }
    return v->get<std::string>();
  }

  // An integer or a list of integers (eos_token_id may be a list; the first is kept).
  std::optional<uint64_t> token_id(const std::string& key) {
    const json* v = find(config_, key);
    if (v != nullptr && v->is_array()) {
      if (v->empty()) return std::nullopt;
      json first = json::object({{key, (*v)[0]}});
      return optional_u64(key, &first);
    }
    return optional_u64(key);
  }

  // The expert count: num_experts (Qwen, OLMoE, older files) or num_local_experts (Mixtral, and
  // Qwen3-MoE as transformers 5 writes it).
  uint64_t expert_count() {
    if (find(config_, "num_experts") != nullptr) return optional_u64("num_experts").value_or(0);
    if (find(config_, "num_local_experts") != nullptr) {
      return optional_u64("num_local_experts").value_or(0);
    }
    problems_.push_back("missing field num_experts (or num_local_experts)");
    return 0;
  }

  void problem(std::string p) { problems_.push_back(std::move(p)); }

  Status status() const {
    if (problems_.empty()) return Status();
    std::string message = std::string(source_) + ": bad model config:";
    for (const std::string& p : problems_) message += "\n  " + p;
    return invalid_argument_error(std::move(message));
  }

  const json& config() const { return config_; }

 private:
  const json& config_;
  std::string_view source_;
  std::vector<std::string> problems_;
};

// rope_theta, the RoPE scaling and YaRN's parameters of an HF config (architecture_hf.cpp).
void read_rope(FieldReader& f, double default_theta, uint64_t context_length, RopeSpec& rope);

// The routed experts of most HF configs: FieldReader::expert_count(), num_experts_per_tok, and
// the expert FFN size from `ffn_field` ("intermediate_size", "moe_intermediate_size").
void read_routed_experts_hf(FieldReader& f, const std::string& ffn_field, ModelSpec& s);

}  // namespace tandem::model
