// ModelWeights: the checkpoint's tensors bound to their logical roles, checked against the spec.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "engine/model/model_spec.h"
#include "engine/model/tensor_info.h"
#include "engine/model/weight_names.h"

namespace tandem::model {

// One expert's matrix, 2-D, outermost first ({rows = out_features, cols = in_features}): either a
// whole per-expert tensor or one slice of a fused [n_experts, rows, cols] tensor. A view: `data`
// points into the checkpoint's mapping; nothing is copied.
struct MatrixView {
  const TensorInfo* source = nullptr;  // the checkpoint tensor it comes from
  TensorType type = TensorType::kF32;
  uint64_t rows = 0;
  uint64_t cols = 0;
  std::span<const uint8_t> data;
  uint64_t file_offset = 0;  // absolute offset of `data` in source->file
};

// One projection (gate, up or down) of all experts of one layer, in either layout.
class ExpertWeights {
 public:
  ExpertWeights() = default;
  static ExpertWeights fused(const TensorInfo* tensor);
  static ExpertWeights per_expert(std::vector<const TensorInfo*> tensors);

  bool empty() const { return fused_ == nullptr && per_expert_.empty(); }
  bool is_fused() const { return fused_ != nullptr; }
  uint64_t n_experts() const;
  // Expert e's matrix (e < n_experts(); a bug otherwise). For a fused tensor this is the e-th
  // [rows, cols] slab, which starts on a quantization-block boundary because bind_weights checked
  // that cols is a whole number of blocks.
  MatrixView expert(uint64_t e) const;
  uint64_t bytes() const;  // all experts
  // The checkpoint tensors behind it (one when fused).
  std::vector<const TensorInfo*> tensors() const;

 private:
  const TensorInfo* fused_ = nullptr;
  std::vector<const TensorInfo*> per_expert_;
};

// A layer's weights; null pointers for tensors the architecture / layer kind does not have.
struct LayerWeights {
  const TensorInfo* attn_norm = nullptr;
  const TensorInfo* q = nullptr;
  const TensorInfo* k = nullptr;
  const TensorInfo* v = nullptr;
  const TensorInfo* o = nullptr;
  const TensorInfo* o_bias = nullptr;  // [hidden] (GPT-OSS)
  const TensorInfo* sinks = nullptr;   // [n_heads] (GPT-OSS)
  const TensorInfo* q_bias = nullptr;
  const TensorInfo* k_bias = nullptr;
  const TensorInfo* v_bias = nullptr;
  const TensorInfo* q_norm = nullptr;
  const TensorInfo* k_norm = nullptr;
  // MLA (ModelSpec::mla; q above is set instead of q_a / q_a_norm / q_b when q_lora_rank is 0,
  // k and v are null).
  const TensorInfo* q_a = nullptr;        // [q_lora, hidden]
  const TensorInfo* q_a_norm = nullptr;   // [q_lora]
  const TensorInfo* q_b = nullptr;        // [n_heads * (nope + rope), q_lora]
  const TensorInfo* kv_a = nullptr;       // [kv_lora + rope, hidden]
  const TensorInfo* kv_a_norm = nullptr;  // [kv_lora]
  const TensorInfo* k_b = nullptr;        // [n_heads, kv_lora, nope] (split layout)
  const TensorInfo* v_b = nullptr;        // [n_heads, v_head, kv_lora] (split layout)
  const TensorInfo* kv_b = nullptr;       // [n_heads * (nope + v_head), kv_lora] (legacy layout)
  const TensorInfo* ffn_norm = nullptr;
  bool moe = false;
  // MoE layers.
  const TensorInfo* router = nullptr;          // [n_experts, hidden]
  const TensorInfo* router_bias = nullptr;     // [n_experts] (GPT-OSS)
  const TensorInfo* selection_bias = nullptr;  // [n_experts] (DeepSeek's exp_probs_b)
  ExpertWeights experts_gate;                  // per expert [expert_ffn, hidden]
  ExpertWeights experts_up;                    // per expert [expert_ffn, hidden]
  ExpertWeights experts_down;                  // per expert [hidden, expert_ffn]
  // Expert biases, all experts of the layer in one tensor (GPT-OSS): [n_experts, expert_ffn] for
  // gate and up, [n_experts, hidden] for down; null when the architecture has none.
  const TensorInfo* experts_gate_bias = nullptr;
  const TensorInfo* experts_up_bias = nullptr;
  const TensorInfo* experts_down_bias = nullptr;
  const TensorInfo* shared_gate = nullptr;
  const TensorInfo* shared_up = nullptr;
  const TensorInfo* shared_down = nullptr;
  const TensorInfo* shared_expert_gate = nullptr;  // [1, hidden] (HF) or [hidden] (GGUF)
  // Dense layers.
  const TensorInfo* ffn_gate = nullptr;
  const TensorInfo* ffn_up = nullptr;
  const TensorInfo* ffn_down = nullptr;

  // Every tensor above but the routed experts' (null entries included): the one list that byte
  // counts and placement walk.
  std::vector<const TensorInfo*> dense_tensors() const;
};

// Every weight of a model. Pointers point into the TensorInfo list given to bind_weights, which
// must outlive this object and stay unchanged (moving the vector that holds it is fine).
// Immutable after binding; any thread may read it.
struct ModelWeights {
  const TensorInfo* token_embedding = nullptr;  // [vocab, hidden]
  const TensorInfo* output_norm = nullptr;
  const TensorInfo* lm_head = nullptr;  // == token_embedding when tied
  bool tied_embeddings = false;
  std::vector<LayerWeights> layers;
  // Tensors no role claims (allowed; `inspect` lists them).
  std::vector<const TensorInfo*> unused;
};

// Types Tandem accepts for matrices (the rows of kernels/cpu/weight_type_table.h) and for norms,
// biases and routers (F32, F16, BF16).
bool is_supported_matrix_type(TensorType type);
bool is_supported_vector_type(TensorType type);

// Binds `tensors` to roles following `naming` and checks them against `spec`: every tensor the
// architecture needs is present exactly once, with the shape the spec implies and a supported
// type; expert tensors are complete (all n_experts of each layer, one layout per projection);
// the embedding has vocab_size rows and the lm head too. On failure INVALID_ARGUMENT listing
// EVERY problem, one per line. Pure; any thread.
Result<ModelWeights> bind_weights(const ModelSpec& spec, std::span<const TensorInfo> tensors,
                                  TensorNaming naming);

}  // namespace tandem::model
