// `tandem inspect PATH [--json]`: a checkpoint's architecture, hyper-parameters, tensors and sizes.
#include "cli/inspect_command.h"

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "engine/model/model.h"

namespace tandem::cli {

namespace {

using model::Checkpoint;
using model::CheckpointSizes;
using model::ModelSpec;
using nlohmann::json;

constexpr const char* kUsage =
    "usage: tandem inspect PATH [--json]\n"
    "  PATH: a .gguf file, a Hugging Face model directory or a .safetensors file.\n"
    "  Prints the architecture, hyper-parameters, tensor types and where the bytes go.\n"
    "  --json  one JSON object instead of text.\n";

std::string shape_string(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string mib(uint64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%llu B (%.2f MiB)", static_cast<unsigned long long>(bytes),
                static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

std::map<std::string, uint64_t> type_counts(const Checkpoint& c) {
  std::map<std::string, uint64_t> counts;
  for (const model::TensorInfo& t : c.tensors) ++counts[std::string(tensor_type_name(t.type))];
  return counts;
}

json spec_json(const ModelSpec& s) {
  json moe_layers = json::array();
  for (size_t i = 0; i < s.moe_layers.size(); ++i) {
    if (s.moe_layers[i]) moe_layers.push_back(i);
  }
  return json{
      {"n_heads", s.n_heads},
      {"n_kv_heads", s.n_kv_heads},
      {"head_dim", s.head_dim},
      {"rope",
       {{"type", model::rope_type_name(s.rope.type)},
        {"theta", s.rope.theta},
        {"n_dims", s.rope.n_dims},
        {"scaling", model::rope_scaling_type_name(s.rope.scaling)},
        {"scaling_factor", s.rope.scaling_factor}}},
      {"rms_norm_eps", s.rms_norm_eps},
      {"attn_qkv_bias", s.attn_qkv_bias},
      {"qk_norm", s.qk_norm == model::QkNorm::kNone      ? "none"
                  : s.qk_norm == model::QkNorm::kPerHead ? "per_head"
                                                         : "whole_projection"},
      {"attn_out_bias", s.attn_out_bias},
      {"attn_sinks", s.attn_sinks},
      {"sliding_window", s.sliding_window},
      {"swa_layers", s.swa_layers},
      {"attention", model::attention_kind_name(s.attention)},
      {"attn_scale", s.attn_scale},
      {"mla", s.attention != model::AttentionKind::kMla
                  ? json(nullptr)
                  : json{{"q_lora_rank", s.mla.q_lora_rank},
                         {"kv_lora_rank", s.mla.kv_lora_rank},
                         {"qk_nope_head_dim", s.mla.qk_nope_dim},
                         {"qk_rope_head_dim", s.mla.qk_rope_dim},
                         {"v_head_dim", s.mla.v_head_dim},
                         {"kv_b_layout", s.mla.split_kv_b ? "split" : "legacy"},
                         {"cache_floats_per_token_layer", s.mla.cache_row()}}},
      {"routing", model::routing_policy_name(s.routing)},
      {"router_bias", s.router_bias},
      {"router_selection_bias", s.router_selection_bias},
      {"expert_groups", s.n_expert_groups},
      {"expert_groups_used", s.n_expert_groups_used},
      {"expert_weights_scale", s.expert_weights_scale},
      {"expert_activation",
       s.expert_activation == model::ExpertActivation::kSwiGlu ? "swiglu" : "swiglu_oai"},
      {"expert_bias", s.expert_bias},
      {"expert_ffn_size", s.expert_ffn_size},
      {"dense_ffn_size", s.dense_ffn_size},
      {"norm_topk_prob", s.norm_topk_prob},
      {"n_shared_experts", s.n_shared_experts},
      {"shared_expert_ffn_size", s.shared_expert_ffn_size},
      {"shared_expert_gate", s.shared_expert_gate},
      {"moe_layers", moe_layers},
      {"bos_token_id", s.bos_token_id ? json(*s.bos_token_id) : json(nullptr)},
      {"eos_token_id", s.eos_token_id ? json(*s.eos_token_id) : json(nullptr)},
      {"tied_embeddings", s.tied_embeddings},
  };
}

json to_json(const Checkpoint& c, const CheckpointSizes& sz) {
  json j;
  j["path"] = c.path;
  j["format"] = model::checkpoint_format_name(c.format);
  j["files"] = c.files.size();
  const ModelSpec* s = c.spec ? &*c.spec : nullptr;
  j["architecture"] = s ? json(model::architecture_name(s->architecture)) : json("unknown");
  j["supported"] = s != nullptr;
  if (!s) {
    j["file_architecture"] = c.architecture_name;
    j["not_runnable_reason"] = c.not_runnable_reason;
  }
  auto field = [&](const char* key, uint64_t ModelSpec::*member) {
    j[key] = s ? json(s->*member) : json(nullptr);
  };
  field("n_layers", &ModelSpec::n_layers);
  field("n_experts", &ModelSpec::n_experts);
  field("n_experts_used", &ModelSpec::n_experts_used);
  field("hidden_size", &ModelSpec::hidden_size);
  field("vocab_size", &ModelSpec::vocab_size);
  field("context_length", &ModelSpec::context_length);
  if (s) j["spec"] = spec_json(*s);
  j["n_tensors"] = c.tensors.size();
  j["types"] = type_counts(c);
  j["bytes_total"] = sz.total;
  j["bytes_experts"] = s ? json(sz.experts) : json(nullptr);
  j["bytes_dense"] = s ? json(sz.dense) : json(nullptr);
  j["bytes_embeddings"] = s ? json(sz.embeddings) : json(nullptr);
  j["bytes_unused"] = s ? json(sz.unused) : json(nullptr);
  if (s) {
    j["bytes_per_expert"] = sz.per_expert;
    j["bytes_per_expert_per_layer"] = sz.per_expert_per_layer;
    j["placement"] = {
        {"all_cpu", {{"cpu_bytes", sz.total}, {"gpu_bytes", 0}}},
        {"all_gpu",
         {{"gpu_bytes", sz.total},
          {"cpu_bytes", sz.experts},
          {"note", "every weight on the GPU; experts also stay resident in CPU memory"}}},
    };
    json unused = json::array();
    for (const model::TensorInfo* t : c.weights->unused) unused.push_back(t->name);
    j["unused_tensors"] = unused;
  }
  json meta = json::object();
  for (const auto& [k, v] : c.metadata) meta[k] = v;
  j["metadata"] = meta;
  json tensors = json::array();
  for (const model::TensorInfo& t : c.tensors) {
    tensors.push_back({{"name", t.name},
                       {"type", tensor_type_name(t.type)},
                       {"shape", t.shape},
                       {"bytes", t.data.size()}});
  }
  j["tensors"] = tensors;
  return j;
}

void append_line(std::string& out, const std::string& line) {
  out += line;
  out += '\n';
}

std::string to_text(const Checkpoint& c, const CheckpointSizes& sz) {
  std::string o;
  append_line(
      o, "file:          " + c.path + " (" + std::string(model::checkpoint_format_name(c.format)) +
             (c.files.size() > 1 ? ", " + std::to_string(c.files.size()) + " files" : "") + ")");
  if (!c.spec) {
    append_line(o,
                "architecture:  unknown (" +
                    (c.architecture_name.empty() ? std::string("not named") : c.architecture_name) +
                    ") - not a model Tandem can run");
    append_line(o, "reason:        " + c.not_runnable_reason);
  } else {
    const ModelSpec& s = *c.spec;
    append_line(o, "architecture:  " + std::string(model::architecture_name(s.architecture)) +
                       (s.name.empty() ? "" : " (" + s.name + ")"));
    append_line(o, "layers:        " + std::to_string(s.n_layers) + " (MoE " +
                       std::to_string(s.n_moe_layers()) + ")   hidden " +
                       std::to_string(s.hidden_size) + "   heads " + std::to_string(s.n_heads) +
                       " (kv " + std::to_string(s.n_kv_heads) + ", head_dim " +
                       std::to_string(s.head_dim) + ")");
    append_line(o, "experts:       " + std::to_string(s.n_experts) + ", top-" +
                       std::to_string(s.n_experts_used) + ", expert ffn " +
                       std::to_string(s.expert_ffn_size) +
                       ", renormalised top-k: " + (s.norm_topk_prob ? "yes" : "no"));
    if (s.routing != model::RoutingPolicy::kSoftmaxTopK || s.router_bias || s.expert_bias ||
        s.expert_activation != model::ExpertActivation::kSwiGlu) {
      const std::string groups = s.n_expert_groups > 1
                                     ? ", best " + std::to_string(s.n_expert_groups_used) + " of " +
                                           std::to_string(s.n_expert_groups) + " expert groups"
                                     : "";
      char scale[48] = "";
      if (s.expert_weights_scale != 1.0) {
        std::snprintf(scale, sizeof(scale), ", weights x %g", s.expert_weights_scale);
      }
      append_line(
          o, std::string("routing:       ") +
                 (s.routing == model::RoutingPolicy::kTopKSoftmax   ? "top-k logits, then softmax"
                  : s.routing == model::RoutingPolicy::kSigmoidTopK ? "sigmoid, then top-k"
                                                                    : "softmax, then top-k") +
                 (s.router_bias ? ", router bias" : "") +
                 (s.router_selection_bias ? ", selection bias" : "") + groups + scale +
                 "; experts " +
                 (s.expert_activation == model::ExpertActivation::kSwiGluOai
                      ? "clamped SwiGLU (GPT-OSS)"
                      : "SwiGLU") +
                 (s.expert_bias ? " with biases" : ""));
    }
    if (s.attn_sinks || s.sliding_window > 0 || s.attn_out_bias) {
      size_t windowed = 0;
      for (bool w : s.swa_layers) windowed += w ? 1 : 0;
      append_line(o, std::string("attention:     ") + (s.attn_sinks ? "sinks, " : "") +
                         (s.attn_out_bias ? "output bias, " : "") + "sliding window " +
                         std::to_string(s.sliding_window) + " on " + std::to_string(windowed) +
                         " of " + std::to_string(s.n_layers) + " layers");
    }
    if (s.attention == model::AttentionKind::kMla) {
      const model::MlaSpec& m = s.mla;
      append_line(
          o, "attention:     MLA (absorbed), q_lora " + std::to_string(m.q_lora_rank) +
                 ", kv_lora " + std::to_string(m.kv_lora_rank) + ", qk " +
                 std::to_string(m.qk_nope_dim) + " + rope " + std::to_string(m.qk_rope_dim) +
                 ", v " + std::to_string(m.v_head_dim) + "; KV cache " +
                 std::to_string(m.cache_row()) + " floats per token and layer" +
                 (m.split_kv_b ? "" : " (k and v up-projections in one tensor, split at load)"));
    }
    if (s.n_shared_experts > 0) {
      append_line(o, "shared expert: " + std::to_string(s.n_shared_experts) + " x ffn " +
                         std::to_string(s.shared_expert_ffn_size) +
                         (s.shared_expert_gate ? ", sigmoid gate" : ""));
    }
    if (s.dense_ffn_size > 0) {
      append_line(o, "dense ffn:     " + std::to_string(s.dense_ffn_size));
    }
    char rope[160];
    std::snprintf(rope, sizeof(rope), "rope:          %s, theta %g, %llu dims, scaling %s x%g",
                  std::string(model::rope_type_name(s.rope.type)).c_str(), s.rope.theta,
                  static_cast<unsigned long long>(s.rope.n_dims),
                  std::string(model::rope_scaling_type_name(s.rope.scaling)).c_str(),
                  s.rope.scaling_factor);
    append_line(o, rope);
    char eps[64];
    std::snprintf(eps, sizeof(eps), "rms_norm_eps:  %g", s.rms_norm_eps);
    append_line(o, eps);
    auto id = [](const std::optional<uint64_t>& v) {
      return v ? std::to_string(*v) : std::string("-");
    };
    append_line(o, "vocab:         " + std::to_string(s.vocab_size) + "   context " +
                       std::to_string(s.context_length) + "   bos " + id(s.bos_token_id) +
                       "   eos " + id(s.eos_token_id) +
                       "   tied embeddings: " + (s.tied_embeddings ? "yes" : "no"));
  }
  append_line(o, "tensors:       " + std::to_string(c.tensors.size()));
  std::string types;
  for (const auto& [name, n] : type_counts(c)) {
    types += (types.empty() ? "" : ", ") + name + " x" + std::to_string(n);
  }
  append_line(o, "types:         " + (types.empty() ? std::string("-") : types));
  append_line(o, "bytes total:   " + mib(sz.total));
  if (c.spec) {
    append_line(o, "  experts:     " + mib(sz.experts));
    append_line(o, "  dense:       " + mib(sz.dense));
    append_line(o, "  embeddings:  " + mib(sz.embeddings) + " (token embedding + lm head)");
    if (sz.unused > 0) append_line(o, "  unused:      " + mib(sz.unused));
    std::string per_layer;
    for (uint64_t b : sz.per_expert_per_layer) {
      per_layer += (per_layer.empty() ? "" : ", ") + std::to_string(b);
    }
    append_line(o, "per expert:    " + mib(sz.per_expert) + " over all layers; per layer [" +
                       per_layer + "]");
    append_line(o, "all-CPU:       CPU " + mib(sz.total) + ", GPU 0");
    append_line(o, "all-GPU:       GPU " + mib(sz.total) +
                       " (every weight), CPU keeps the experts resident: " + mib(sz.experts));
    for (const model::TensorInfo* t : c.weights->unused) {
      append_line(o, "unused tensor: " + t->name);
    }
  } else {
    append_line(o, "metadata:");
    for (const auto& [k, v] : c.metadata) append_line(o, "  " + k + " = " + v);
    for (const model::TensorInfo& t : c.tensors) {
      append_line(o, "tensor " + t.name + " " + std::string(tensor_type_name(t.type)) + " " +
                         shape_string(t.shape));
    }
  }
  return o;
}

}  // namespace

int inspect_main(std::span<const std::string> args, std::string& out, std::string& err) {
  bool as_json = false;
  std::string path;
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") {
      out += kUsage;
      return 0;
    }
    if (a == "--json") {
      as_json = true;
    } else if (!a.empty() && a[0] == '-') {
      err += "tandem inspect: unknown option '" + a + "'\n" + kUsage;
      return 2;
    } else if (path.empty()) {
      path = a;
    } else {
      err += "tandem inspect: more than one PATH\n" + std::string(kUsage);
      return 2;
    }
  }
  if (path.empty()) {
    err += kUsage;
    return 2;
  }
  Result<Checkpoint> checkpoint = model::open_checkpoint(path);
  if (!checkpoint.ok()) {
    err += "tandem inspect: " + checkpoint.status().to_string() + "\n";
    return 2;
  }
  const CheckpointSizes sizes = model::checkpoint_sizes(*checkpoint);
  if (as_json) {
    out += to_json(*checkpoint, sizes).dump(2, ' ', false, json::error_handler_t::replace);
    out += '\n';
  } else {
    out += to_text(*checkpoint, sizes);
  }
  return 0;
}

int run_inspect(std::span<char*> args) {
  std::vector<std::string> strings(args.begin(), args.end());
  std::string out;
  std::string err;
  const int rc = inspect_main(strings, out, err);
  std::fputs(out.c_str(), stdout);
  std::fputs(err.c_str(), stderr);
  return rc;
}

}  // namespace tandem::cli
