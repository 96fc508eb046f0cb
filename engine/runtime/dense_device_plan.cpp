// plan_dense_device: the device memory layout of CudaDenseExecutor (weights, KV mirror, scratch).
#include "engine/runtime/dense_device_plan.h"

#include <algorithm>
#include <string>

#include "engine/runtime/windowed_kv_cache.h"
#include "kernels/cuda/cuda_weight_types.h"

namespace tandem::runtime {
namespace {

// A bump allocator over one buffer with checked arithmetic; `ok` turns false on overflow.
struct Bump {
  uint64_t used = 0;
  bool ok = true;

  uint64_t take(uint64_t a, uint64_t b = 1, uint64_t c = 1) {
    uint64_t n = 0;
    if (__builtin_mul_overflow(a, b, &n) || __builtin_mul_overflow(n, c, &n)) ok = false;
    const uint64_t at = used;
    uint64_t end = 0;
    if (__builtin_add_overflow(at, n, &end) || end > UINT64_MAX - kDeviceAlign) ok = false;
    used = ok ? (end + kDeviceAlign - 1) / kDeviceAlign * kDeviceAlign : 0;
    return at;
  }
};

const std::string& name_of(const model::TensorInfo* t, const std::string& fallback) {
  return t != nullptr ? t->name : fallback;
}

class Planner {
 public:
  explicit Planner(DenseDevicePlan& plan) : plan_(plan) {}

  DeviceMatrixRef matrix(const kernels::WeightMatrix& w, const model::TensorInfo* info) {
    DeviceMatrixRef ref;
    if (w.data == nullptr) return ref;
    ref.type = w.type;
    ref.rows = w.rows;
    ref.cols = w.cols;
    const uint64_t bytes = static_cast<uint64_t>(w.rows) * w.row_bytes;
    ref.offset = weights.take(w.rows, w.row_bytes);
    plan_.uploads.push_back({name_of(info, "?"), w.data, bytes, ref.offset, true, w.type, w.cols});
    return ref;
  }

  // Head matrices of one type and shape, uploaded back to back (one upload per head: the legacy
  // layout's value heads are row ranges of one checkpoint matrix, its key heads owned floats).
  DeviceMatrixRef heads(const std::vector<kernels::WeightMatrix>& w,
                        const model::TensorInfo* info) {
    DeviceMatrixRef ref;
    if (w.empty()) return ref;
    ref.type = w[0].type;
    ref.rows = w[0].rows;
    ref.cols = w[0].cols;
    const uint64_t head_bytes = static_cast<uint64_t>(w[0].rows) * w[0].row_bytes;
    ref.offset = weights.take(w.size() * w[0].rows, w[0].row_bytes);
    for (size_t j = 0; j < w.size(); ++j) {
      if (w[j].type != ref.type || w[j].rows != ref.rows || w[j].cols != ref.cols) {
        weights.ok = false;  // prepare_weights makes them alike; a plan error if not
      }
      plan_.uploads.push_back({name_of(info, "?") + " head " + std::to_string(j), w[j].data,
                               head_bytes, ref.offset + j * head_bytes, true, w[j].type,
                               w[j].cols});
    }
    return ref;
  }

  DeviceVectorRef vector(const std::vector<float>& v, const model::TensorInfo* info) {
    DeviceVectorRef ref;
    if (v.empty()) return ref;
    ref.n = v.size();
    ref.offset = weights.take(v.size(), sizeof(float));
    plan_.uploads.push_back({name_of(info, "?"), v.data(), v.size() * sizeof(float), ref.offset,
                             false, TensorType::kF32});
    return ref;
  }

  Bump weights;

 private:
  DenseDevicePlan& plan_;
};

}  // namespace

Result<DenseDevicePlan> plan_dense_device(const model::ModelSpec& spec,
                                          const model::ModelWeights& weights, const KvGeometry& kv,
                                          size_t max_batch_tokens, PrepareUse use) {
  if (max_batch_tokens == 0) return invalid_argument_error("max_batch_tokens must be positive");
  if (kv.n_layers == 0 || kv.kv_dim == 0 || kv.block_tokens == 0 || kv.n_blocks == 0) {
    return invalid_argument_error("KV geometry dimensions must be positive");
  }
  // The pool holds every layer, or (a scheduler's pool for a model with sliding-window layers)
  // the full-attention layers only; the mirror holds every layer either way.
  const size_t n_full = KvLayerLayout::of(spec).n_full;
  if ((kv.n_layers != spec.n_layers && kv.n_layers != n_full) || kv.kv_dim != spec.kv_dim()) {
    return invalid_argument_error(
        "KV geometry (" + std::to_string(kv.n_layers) + " layers, kv_dim " +
        std::to_string(kv.kv_dim) + ") does not match the model (" + std::to_string(spec.n_layers) +
        (n_full != spec.n_layers ? " or its " + std::to_string(n_full) + " full layers"
                                 : std::string()) +
        ", " + std::to_string(spec.kv_dim()) + ")");
  }
  if (weights.layers.size() != spec.n_layers) {
    return invalid_argument_error("weights hold another number of layers than the spec");
  }
  const bool rings = kv.rings.slots > 0;
  if (rings && (n_full == spec.n_layers || kv.n_layers != n_full || kv.rings.blocks == 0)) {
    return invalid_argument_error(
        "window rings need a model with sliding-window layers, a KV pool of its full layers only "
        "and ring blocks");
  }
  if (rings && kv.rings.blocks < device_window_ring_blocks(spec.sliding_window,
                                                           kv.rings.pass_tokens, kv.block_tokens)) {
    // A pass would overwrite window positions it then reads.
    return invalid_argument_error(
        "window rings of " + std::to_string(kv.rings.blocks) + " blocks are too small for a " +
        std::to_string(spec.sliding_window) + "-token window and passes of " +
        std::to_string(kv.rings.pass_tokens) + " tokens (device_window_ring_blocks: " +
        std::to_string(
            device_window_ring_blocks(spec.sliding_window, kv.rings.pass_tokens, kv.block_tokens)) +
        ")");
  }
  DenseDevicePlan plan;
  TANDEM_ASSIGN_OR_RETURN(plan.prepared, prepare_weights(spec, weights, use));
  plan.max_batch_tokens = max_batch_tokens;
  const PreparedWeights& p = plan.prepared;
  Planner planner(plan);
  plan.output_norm = planner.vector(p.output_norm, weights.output_norm);
  plan.lm_head = planner.matrix(p.lm_head, weights.lm_head);
  plan.layers.resize(p.layers.size());
  size_t ffn_max = 0;
  for (size_t l = 0; l < p.layers.size(); ++l) {
    const PreparedLayer& L = p.layers[l];
    const model::LayerWeights& W = weights.layers[l];
    DeviceLayerRefs& d = plan.layers[l];
    d.moe = L.moe;
    for (const model::LayerRole& r : model::layer_roles()) {
      const size_t i = static_cast<size_t>(r.role);
      if (r.use == model::RoleUse::kMatrix) {
        d.matrices[i] = planner.matrix(L.matrices[i], W[r.role]);
      } else if (r.use == model::RoleUse::kVector) {
        d.vectors[i] = planner.vector(L.vectors[i], W[r.role]);
      }
    }
    using R = model::WeightRole;
    const bool legacy = W[R::kAttnKvB] != nullptr;
    d.k_b = planner.heads(L.k_b, W[legacy ? R::kAttnKvB : R::kAttnKB]);
    d.v_b = planner.heads(L.v_b, W[legacy ? R::kAttnKvB : R::kAttnVB]);
    ffn_max = std::max({ffn_max, L.matrix(R::kSharedGate).rows, L.matrix(R::kDenseGate).rows});
  }

  // Exact: one allocation of the mirror then the rings (no padding, so not Bump::take, which would
  // round the row count up to kDeviceAlign before the kv_dim factor). Without rings every model
  // layer is mirrored: a sliding-window layer keeps every position on the device too, addressed
  // by the full layers' block ids (its attention reads only the window). MLA keeps keys only.
  Bump kvb;
  const uint64_t kv_planes = spec.kv_value_dim() == 0 ? 1 : 2;
  const uint64_t row_bytes = kv.kv_dim * kernels::kv_type_bytes(kv.type);
  const uint64_t mirrored = rings ? n_full : spec.n_layers;
  const uint64_t windowed = rings ? spec.n_layers - n_full : 0;
  uint64_t mirror_plane = 0, ring_plane = 0, mirror_bytes = 0, ring_bytes = 0;
  if (__builtin_mul_overflow(kv.n_blocks, kv.block_tokens, &mirror_plane) ||
      __builtin_mul_overflow(mirror_plane, row_bytes, &mirror_plane) ||
      __builtin_mul_overflow(mirror_plane, kv_planes * mirrored, &mirror_bytes) ||
      __builtin_mul_overflow(kv.rings.slots, kv.rings.blocks, &ring_plane) ||
      __builtin_mul_overflow(ring_plane, kv.block_tokens, &ring_plane) ||
      __builtin_mul_overflow(ring_plane, row_bytes, &ring_plane) ||
      __builtin_mul_overflow(ring_plane, kv_planes * windowed, &ring_bytes) ||
      __builtin_add_overflow(mirror_bytes, ring_bytes, &kvb.used)) {
    kvb.ok = false;
  }
  plan.kv_ring_offset = mirror_bytes;
  plan.mirror_plane_bytes = mirror_plane;
  plan.ring_plane_bytes = ring_plane;

  const uint64_t T = max_batch_tokens;
  const uint64_t hidden = spec.hidden_size;
  const uint64_t f = sizeof(float);
  DeviceScratchLayout& s = plan.scratch;
  Bump sb;
  s.ffn_max = ffn_max;
  s.logit_chunk = std::min(max_batch_tokens, kLogitsChunkRows);
  s.table_capacity = (kv.n_blocks + max_batch_tokens) * (rings ? 2 : 1);
  s.x = sb.take(T, hidden, f);
  s.h = sb.take(T, hidden, f);
  s.tmp = sb.take(T, hidden, f);
  s.shared = sb.take(T, hidden, f);
  s.q = sb.take(T, spec.q_dim(), f);
  s.attn = sb.take(T, spec.q_dim(), f);
  s.k = sb.take(T, spec.kv_dim(), f);
  s.v = sb.take(T, spec.kv_dim(), f);
  s.ffn_a = sb.take(T, ffn_max, f);
  s.ffn_b = sb.take(T, ffn_max, f);
  s.router = sb.take(T, std::max<uint64_t>(spec.n_experts, 1), f);
  s.gate_logit = sb.take(T, f);
  const bool mla = spec.attention == model::AttentionKind::kMla;
  const model::MlaSpec& m = spec.mla;
  s.mla_qa = sb.take(T, mla ? m.q_lora_rank : 0, f);
  s.mla_q = sb.take(T, mla ? spec.n_heads * m.q_head_dim() : 0, f);
  s.mla_heads = sb.take(T, mla ? spec.n_heads * m.v_head_dim : 0, f);
  s.head_rows = sb.take(s.logit_chunk, hidden, f);
  s.logits = sb.take(s.logit_chunk, plan.lm_head.rows, f);
  s.positions = sb.take(T, sizeof(int32_t));
  s.token_seq = sb.take(T, sizeof(int32_t));
  s.slots = sb.take(T, sizeof(int32_t));
  s.table_begin = sb.take(T, sizeof(int32_t));
  s.ring_slots = sb.take(rings ? T : 0, sizeof(int32_t));
  s.tables = sb.take(s.table_capacity, sizeof(int32_t));

  Bump pb;
  s.pin_act = pb.take(T, hidden, f);
  s.pin_router = pb.take(T, std::max<uint64_t>(spec.n_experts, 1), f);
  s.pin_logits = pb.take(s.logit_chunk, plan.lm_head.rows, f);
  s.pin_ints = pb.take(5 * T, sizeof(int32_t));
  s.pin_tables = pb.take(s.table_capacity, sizeof(int32_t));

  if (!planner.weights.ok || !kvb.ok || !sb.ok || !pb.ok) {
    return invalid_argument_error("device memory plan overflows 64-bit sizes");
  }
  plan.bytes.dense_weights = planner.weights.used;
  plan.bytes.kv = kvb.used;
  plan.bytes.scratch = sb.used;
  plan.pinned_bytes = pb.used;
  return plan;
}

std::string cuda_dense_unsupported_tensor(const DenseDevicePlan& plan) {
  for (const DeviceUpload& u : plan.uploads) {
    if (!u.matrix) continue;
    if (kernels::cuda::find_cuda_weight_type(u.type) == nullptr) {
      return "tensor '" + u.name + "' has type " + std::string(tensor_type_name(u.type)) +
             ", which the CUDA dense kernels do not take (supported: " +
             kernels::cuda::cuda_weight_type_names() + ")";
    }
    const Status cols = kernels::cuda::check_cuda_weight_cols(
        u.type, u.cols, "tensor '" + u.name + "'", "its columns");
    if (!cols.ok()) return cols.message();
  }
  return "";
}

Result<CudaDenseBytes> estimate_cuda_dense_bytes(const model::ModelSpec& spec,
                                                 const model::ModelWeights& weights,
                                                 const KvGeometry& kv, size_t max_batch_tokens) {
  TANDEM_ASSIGN_OR_RETURN(
      DenseDevicePlan plan,
      plan_dense_device(spec, weights, kv, max_batch_tokens, PrepareUse::kLayout));
  return plan.bytes;
}

}  // namespace tandem::runtime
