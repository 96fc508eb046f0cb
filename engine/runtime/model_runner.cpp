// ModelRunner: set-up, batch validation, the layer loop through a DenseExecutor (the CPU one or a
// device one) with routing and the routed experts between its MoE halves, and the logits rows.
#include "engine/runtime/model_runner.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>

#include <spdlog/spdlog.h>

#include "base/numa.h"
#include "engine/runtime/paged_kv_cache.h"
#include "engine/runtime/windowed_kv_cache.h"
#include "kernels/cuda/dense_ops.h"

namespace tandem::runtime {

using R = model::WeightRole;

experts::RouterRecipe router_recipe(const model::ModelSpec& spec) {
  experts::RouterRecipe recipe;
  recipe.policy = spec.routing;
  recipe.renormalize = spec.norm_topk_prob;
  recipe.n_groups = static_cast<size_t>(spec.n_expert_groups);
  recipe.n_groups_used = static_cast<size_t>(spec.n_expert_groups_used);
  recipe.group_score_top = static_cast<size_t>(spec.expert_group_score_top);
  recipe.scale = static_cast<float>(spec.expert_weights_scale);
  return recipe;
}

kernels::RopeConfig rope_config(const model::ModelSpec& spec, size_t layer) {
  kernels::RopeConfig rope;
  rope.layout = spec.rope.type == model::RopeType::kNeox ? kernels::RopeLayout::kNeox
                                                         : kernels::RopeLayout::kNormal;
  rope.head_dim = spec.head_dim;
  rope.rot_dims = spec.rope.n_dims != 0 ? spec.rope.n_dims : spec.head_dim;
  const double theta =
      spec.windowed(layer) && spec.rope.theta_swa > 0.0 ? spec.rope.theta_swa : spec.rope.theta;
  rope.freq_base = static_cast<float>(theta);
  if (spec.rope.scaling == model::RopeScalingType::kYarn) {
    // llama.cpp's YaRN: ext_factor 1, attention factor 1 (ggml then scales cos/sin by
    // 1 + 0.1 ln(factor)), the correction range from the original context.
    rope.freq_scale = static_cast<float>(1.0 / spec.rope.scaling_factor);
    rope.ext_factor = 1.0f;
    rope.attn_factor = 1.0f;
    rope.n_ctx_orig = spec.rope.original_context_length != 0
                          ? static_cast<size_t>(spec.rope.original_context_length)
                          : static_cast<size_t>(spec.context_length);
    rope.beta_fast = static_cast<float>(spec.rope.yarn_beta_fast);
    rope.beta_slow = static_cast<float>(spec.rope.yarn_beta_slow);
    rope.yarn_round_corr_dims = spec.rope.yarn_truncate;
    if (spec.rope.yarn_mscale_all_dim != 0.0) {
      // DeepSeek: cos/sin unscaled (llama.cpp divides its attention factor by what ggml's rope
      // multiplies by); the factor goes into the softmax scale instead (ModelSpec::attn_scale).
      const float factor = 1.0f / rope.freq_scale;
      rope.attn_factor = 1.0f / (1.0f + 0.1f * std::log(factor));
    }
  }
  return rope;
}

std::string dense_executor_unsupported(const model::ModelSpec& spec) {
  // What the dense executor (the CUDA kernels) does not compute yet.
  std::string missing;
  const auto lacks = [&](bool used, const std::string& what) {
    if (used) missing += (missing.empty() ? "" : ", ") + what;
  };
  // The attention kernel's widest heads (an MLA model's key head is its latent row, its value
  // head the latent).
  const uint64_t value_dim =
      spec.attention == model::AttentionKind::kMla ? spec.mla.kv_lora_rank : spec.head_dim;
  lacks(spec.head_dim > kernels::cuda::kMaxAttentionKeyDim,
        "head_dim " + std::to_string(spec.head_dim) + " (at most " +
            std::to_string(kernels::cuda::kMaxAttentionKeyDim) + ")");
  lacks(value_dim > kernels::cuda::kMaxAttentionValueDim,
        "value heads of " + std::to_string(value_dim) + " (at most " +
            std::to_string(kernels::cuda::kMaxAttentionValueDim) + ")");
  lacks(KvLayerLayout::of(spec).n_full == 0,
        "a full-attention layer (every layer is windowed: no block table addresses the mirror)");
  if (missing.empty()) return "";
  return "the dense executor does not run " +
         std::string(model::architecture_name(spec.architecture)) + " yet: it lacks " + missing;
}

ModelRunner::~ModelRunner() = default;

Result<std::unique_ptr<ModelRunner>> ModelRunner::create(const model::ModelSpec& spec,
                                                         const model::ModelWeights& weights,
                                                         const RunnerOptions& options) {
  if (spec.rope.scaling != model::RopeScalingType::kNone &&
      spec.rope.scaling != model::RopeScalingType::kYarn) {
    return unimplemented_error("RoPE scaling '" +
                               std::string(model::rope_scaling_type_name(spec.rope.scaling)) +
                               "' is not implemented yet (supported: none, yarn)");
  }
  std::unique_ptr<ModelRunner> r(new ModelRunner());
  r->spec_ = spec;
  r->model_weights_ = &weights;
  TANDEM_ASSIGN_OR_RETURN(r->weights_, prepare_weights(spec, weights));
  r->kv_layout_ = KvLayerLayout::of(spec);
  r->kv_layout_.type = options.kv_type;
  r->context_length_ = options.context_length != 0 ? options.context_length : spec.context_length;
  if (r->context_length_ == 0) r->context_length_ = 4096;
  r->mode_ = options.quantized_activations ? kernels::MatmulActivations::kQuantized
                                           : kernels::MatmulActivations::kFloat;
  if (options.interleave_dense) interleave_dense_matrices(r->weights_, r->mode_);
  NumaTopology numa;
  if (options.numa) {
    Result<NumaTopology> topology = read_numa_topology();
    if (topology.ok()) {
      numa = std::move(*topology);
    } else {
      spdlog::warn("NUMA: {}; threads and memory left to the system", topology.status().message());
    }
  }
  const bool multi_node = numa.nodes() > 1;
  r->pool_ = std::make_unique<ThreadPool>(
      options.threads, multi_node
                           ? spread_over_nodes(numa, ThreadPool::thread_count(options.threads))
                           : std::vector<int>{});
  if (multi_node) {
    spdlog::info(
        "NUMA: {} nodes; {} of {} pool workers pinned, spread evenly over them; the interleaved "
        "expert copies' pages interleaved over them (runtime.numa)",
        numa.nodes(), r->pool_->pinned_workers(), r->pool_->n_threads() - 1);
  }
  TANDEM_ASSIGN_OR_RETURN(
      r->cpu_worker_,
      experts::CpuExpertWorker::create(spec, weights, r->pool_.get(), r->mode_,
                                       {options.interleave_experts, options.gpu_experts,
                                        multi_node ? &numa : nullptr, options.after_expert_layer}));
  r->moe_ = std::make_unique<experts::MoeLayer>(
      std::vector<experts::ExpertWorker*>{r->cpu_worker_.get()});
  r->cpu_dense_ = std::make_unique<CpuDenseExecutor>(r->spec_, r->weights_, r->pool_.get(),
                                                     r->mode_, options.mla_prefill);
  return r;
}

std::unique_ptr<KvCache> ModelRunner::new_kv_cache(size_t max_positions) const {
  const size_t limit = max_positions != 0 ? max_positions : context_length_;
  return wrap_kv_cache(std::make_unique<DenseKvCache>(kv_layout_.n_full, spec_.kv_dim(), limit,
                                                      spec_.kv_value_dim() == 0, kv_layout_.type),
                       limit);
}

std::unique_ptr<KvCache> ModelRunner::wrap_kv_cache(std::unique_ptr<KvCache> full_layers,
                                                    size_t max_positions) const {
  if (kv_layout_.n_windowed() == 0) return full_layers;
  if (kv_layout_.n_full == 0) full_layers.reset();
  // A ring slot only for a cache the device executor can address (a paged cache of its pool).
  const auto* paged = dynamic_cast<const PagedKvCache*>(full_layers.get());
  const bool ring =
      ring_slots_ != nullptr && paged != nullptr && &paged->pool() == dense_->mirrored_pool();
  auto cache = std::make_unique<WindowedKvCache>(std::move(full_layers), kv_layout_, spec_.kv_dim(),
                                                 max_positions);
  if (ring) cache->set_device_ring(ring_slots_->acquire());
  return cache;
}

Status ModelRunner::set_expert_workers(std::vector<experts::ExpertWorker*> workers,
                                       experts::ExpertMap map) {
  if (workers.empty() || workers.size() > 255) {
    return invalid_argument_error("between 1 and 255 expert workers are needed");
  }
  for (auto* w : workers) {
    if (w == nullptr) return invalid_argument_error("null expert worker");
  }
  if (map.n_layers() != 0 &&
      (map.n_layers() != spec_.n_layers || map.n_experts() != spec_.n_experts)) {
    return invalid_argument_error("expert map shape does not match the model");
  }
  moe_.reset();  // joins the old executor's helper threads before the new one starts its own
  moe_ = std::make_unique<experts::MoeLayer>(std::move(workers));
  moe_->set_timings(moe_timings_);
  expert_map_ = std::move(map);
  return Status();
}

void ModelRunner::set_moe_timings(experts::MoeLayerTimings* timings) {
  moe_timings_ = timings;
  moe_->set_timings(timings);
}

Status ModelRunner::set_dense_executor(std::unique_ptr<DenseExecutor> executor) {
  if (executor == nullptr) {
    dense_.reset();  // the old pool's hook now holds an expired reference: a no-op
    rings_ = {};
    ring_slots_.reset();
    return Status();
  }
  if (const std::string why = dense_executor_unsupported(spec_); !why.empty()) {
    return unimplemented_error(why);
  }
  if (executor->mirrored_pool() == nullptr) {
    return invalid_argument_error(
        "set_dense_executor takes a device executor (one that mirrors a KV pool)");
  }
  KvPool& pool = *executor->mirrored_pool();
  // Every layer, or the full layers of a model with sliding-window layers (the scheduler's pool:
  // its sequences' caches are WindowedKvCaches over paged caches of it).
  if ((pool.n_layers() != spec_.n_layers && pool.n_layers() != kv_layout_.n_full) ||
      pool.n_layers() == 0 || pool.kv_dim() != spec_.kv_dim() ||
      pool.keys_only() != (spec_.kv_value_dim() == 0)) {
    return invalid_argument_error("the dense executor's KV pool is shaped for another model");
  }
  const DeviceWindowRings rings = executor->window_rings();
  if (rings.slots > 0 && (kv_layout_.n_windowed() == 0 || pool.n_layers() != kv_layout_.n_full ||
                          rings.blocks == 0 || rings.pass_tokens == 0)) {
    return invalid_argument_error(
        "the dense executor keeps window rings, which need a model with sliding-window layers "
        "and a KV pool of its full layers only");
  }
  rings_ = rings;
  ring_slots_ = rings.slots > 0 ? std::make_shared<DeviceRingSlots>(rings.slots) : nullptr;
  dense_ = std::shared_ptr<DenseExecutor>(std::move(executor));
  std::weak_ptr<DenseExecutor> weak = dense_;
  pool.set_copy_hook([weak](BlockId src, BlockId dst) -> Status {
    const std::shared_ptr<DenseExecutor> e = weak.lock();
    return e ? e->copy_block(src, dst) : Status();
  });
  return Status();
}

Status ModelRunner::validate(std::span<const SequenceInput> batch) const {
  if (batch.empty()) return invalid_argument_error("empty batch");
  const size_t vocab = weights_.token_embedding.rows;
  for (size_t s = 0; s < batch.size(); ++s) {
    const SequenceInput& seq = batch[s];
    const std::string where = "sequence " + std::to_string(s) + ": ";
    if (seq.cache == nullptr) return invalid_argument_error(where + "no KV cache");
    if (seq.tokens.empty()) return invalid_argument_error(where + "no tokens");
    if (seq.cache->n_layers() != spec_.n_layers || seq.cache->kv_dim() != spec_.kv_dim() ||
        seq.cache->keys_only() != (spec_.kv_value_dim() == 0)) {
      return invalid_argument_error(where + "KV cache shaped for another model");
    }
    if (seq.start_pos > seq.cache->length()) {
      return invalid_argument_error(where + "start position " + std::to_string(seq.start_pos) +
                                    " is past the cached length " +
                                    std::to_string(seq.cache->length()));
    }
    if (seq.start_pos + seq.tokens.size() > seq.cache->max_positions()) {
      return out_of_range_error(where + std::to_string(seq.start_pos + seq.tokens.size()) +
                                " positions exceed the context limit " +
                                std::to_string(seq.cache->max_positions()));
    }
    for (int32_t id : seq.tokens) {
      if (id < 0 || static_cast<size_t>(id) >= vocab) {
        return invalid_argument_error(where + "token id " + std::to_string(id) +
                                      " is outside the vocabulary of " + std::to_string(vocab));
      }
    }
    for (size_t o = 0; o < s; ++o) {
      if (batch[o].cache == seq.cache) {
        return invalid_argument_error(where + "KV cache used twice in one batch");
      }
    }
  }
  return Status();
}

namespace {

// The paged cache of a sequence's cache: itself, or the full layers of a WindowedKvCache (whose
// block table then addresses every position of every layer in a device mirror); null otherwise.
const PagedKvCache* paged_cache_of(const KvCache* cache) {
  if (const auto* windowed = dynamic_cast<const WindowedKvCache*>(cache)) {
    cache = windowed->full_layers();
  }
  return dynamic_cast<const PagedKvCache*>(cache);
}

}  // namespace

Status ModelRunner::validate_dense(std::span<const SequenceInput> batch) const {
  size_t n = 0;
  for (size_t s = 0; s < batch.size(); ++s) {
    const PagedKvCache* paged = paged_cache_of(batch[s].cache);
    if (paged == nullptr || &paged->pool() != dense_->mirrored_pool()) {
      return invalid_argument_error("sequence " + std::to_string(s) +
                                    ": the dense executor needs a paged KV cache of its pool");
    }
    if (rings_.slots > 0) {
      const auto* windowed = dynamic_cast<const WindowedKvCache*>(batch[s].cache);
      if (windowed == nullptr || windowed->device_ring() < 0) {
        return invalid_argument_error(
            "sequence " + std::to_string(s) +
            ": the dense executor keeps the sliding-window layers in rings, and this cache holds "
            "none of its " +
            std::to_string(rings_.slots) + " (wrapped before the executor, or all are held)");
      }
      if (batch[s].tokens.size() > rings_.pass_tokens) {
        return invalid_argument_error(
            "sequence " + std::to_string(s) + ": " + std::to_string(batch[s].tokens.size()) +
            " tokens in one pass exceed the window rings' " + std::to_string(rings_.pass_tokens));
      }
    }
    n += batch[s].tokens.size();
  }
  if (n > dense_->max_batch_tokens()) {
    return invalid_argument_error("batch of " + std::to_string(n) +
                                  " tokens exceeds the dense executor's limit of " +
                                  std::to_string(dense_->max_batch_tokens()));
  }
  return Status();
}

Status ModelRunner::forward(std::span<const SequenceInput> batch, ForwardOutput& out,
                            const ForwardOptions& options) {
  out.expert_seconds.clear();
  TANDEM_RETURN_IF_ERROR(validate(batch));
  if (dense_ != nullptr) TANDEM_RETURN_IF_ERROR(validate_dense(batch));
  for (const SequenceInput& seq : batch) {
    TANDEM_RETURN_IF_ERROR(
        seq.cache->prepare_write(seq.start_pos, seq.start_pos + seq.tokens.size()));
  }
  size_t n = 0;
  token_offset_.resize(batch.size());
  positions_.clear();
  for (size_t s = 0; s < batch.size(); ++s) {
    token_offset_[s] = n;
    for (size_t i = 0; i < batch[s].tokens.size(); ++i) {
      positions_.push_back(static_cast<int32_t>(batch[s].start_pos + i));
    }
    n += batch[s].tokens.size();
  }
  n_tokens_ = n;
  const size_t hidden = spec_.hidden_size;
  x_.resize(n * hidden);
  for (size_t s = 0; s < batch.size(); ++s) {
    for (size_t i = 0; i < batch[s].tokens.size(); ++i) {
      std::span<float> row(x_.data() + (token_offset_[s] + i) * hidden, hidden);
      TANDEM_RETURN_IF_ERROR(
          kernels::get_row(weights_.token_embedding, static_cast<size_t>(batch[s].tokens[i]), row));
    }
  }
  out.routing.clear();
  if (options.record_routing) out.routing.resize(spec_.n_layers);
  moe_->reset_worker_seconds();
  DenseExecutor& executor = dense_ != nullptr ? *dense_ : *cpu_dense_;
  TANDEM_RETURN_IF_ERROR(run_layers(executor, batch, out, options.record_routing));
  const std::span<const double> seconds = moe_->worker_seconds();
  out.expert_seconds.assign(seconds.begin(), seconds.end());
  return Status();
}

DenseBatch ModelRunner::dense_batch(std::span<const SequenceInput> batch, bool mirrored) {
  const size_t n = n_tokens_;
  dense_seqs_.resize(batch.size());
  token_seq_.clear();
  kv_slots_.clear();
  table_begin_.clear();
  tables_.clear();
  ring_slots_of_tokens_.clear();
  ring_tables_.clear();
  for (size_t s = 0; s < batch.size(); ++s) {
    const size_t ns = batch[s].tokens.size();
    dense_seqs_[s] = DenseSequence{token_offset_[s], ns, batch[s].start_pos, 0, 0};
  }
  if (mirrored) {
    token_seq_.resize(n);
    kv_slots_.resize(n);
    table_begin_.resize(batch.size());
    for (size_t s = 0; s < batch.size(); ++s) {
      const PagedKvCache& cache = *paged_cache_of(batch[s].cache);  // validate_dense checked
      const size_t bt = cache.pool().block_tokens();
      DenseSequence& d = dense_seqs_[s];
      const std::span<const BlockId> table =
          cache.block_table().first((d.start_pos + d.n_tokens + bt - 1) / bt);
      d.table_begin = tables_.size();
      d.table_size = table.size();
      table_begin_[s] = static_cast<int32_t>(tables_.size());
      tables_.insert(tables_.end(), table.begin(), table.end());
      for (size_t i = 0; i < d.n_tokens; ++i) {
        const size_t p = d.start_pos + i;
        token_seq_[d.first_token + i] = static_cast<int32_t>(s);
        kv_slots_[d.first_token + i] =
            static_cast<int32_t>(static_cast<size_t>(table[p / bt]) * bt + p % bt);
      }
      if (rings_.slots > 0) {  // validate_dense checked the ring
        const size_t ring =
            static_cast<size_t>(static_cast<const WindowedKvCache*>(batch[s].cache)->device_ring());
        const size_t base = ring * rings_.blocks;
        for (size_t i = 0; i < table.size(); ++i) {
          ring_tables_.push_back(static_cast<int32_t>(base + i % rings_.blocks));
        }
        for (size_t i = 0; i < d.n_tokens; ++i) {
          const size_t p = d.start_pos + i;
          ring_slots_of_tokens_.push_back(
              static_cast<int32_t>((base + (p / bt) % rings_.blocks) * bt + p % bt));
        }
      }
    }
  }
  DenseBatch db;
  db.n_tokens = n;
  db.host = batch;
  db.x = std::span<const float>(x_.data(), n * spec_.hidden_size);
  db.positions = positions_;
  db.token_seq = token_seq_;
  db.kv_slots = kv_slots_;
  db.table_begin = table_begin_;
  db.tables = tables_;
  db.seqs = dense_seqs_;
  db.ring_slots = ring_slots_of_tokens_;
  db.ring_tables = ring_tables_;
  return db;
}

Status ModelRunner::run_layers(DenseExecutor& e, std::span<const SequenceInput> batch,
                               ForwardOutput& out, bool record) {
  const size_t n = n_tokens_;
  const size_t hidden = spec_.hidden_size;
  const size_t n_experts = spec_.n_experts;
  PassClock clock(pass_timings_);
  TANDEM_RETURN_IF_ERROR(e.begin(dense_batch(batch, e.mirrored_pool() != nullptr)));
  clock.mark(PassPart::kSetup);
  for (size_t l = 0; l < spec_.n_layers; ++l) {
    TANDEM_RETURN_IF_ERROR(e.attention(l));
    clock.mark(PassPart::kAttention);
    if (!weights_.layers[l].moe) {
      TANDEM_RETURN_IF_ERROR(e.dense_ffn(l));
      clock.mark(PassPart::kDenseFfn);
      continue;
    }
    h_.resize(n * hidden);
    router_.resize(n * n_experts);
    moe_sum_.resize(n * hidden);
    TANDEM_RETURN_IF_ERROR(e.moe_input(l, h_, router_));
    clock.mark(PassPart::kMoeInput);
    experts::route(router_, n, n_experts, spec_.n_experts_used, router_recipe(spec_), routing_,
                   weights_.layers[l].vector(R::kRouterSelectionBias));
    if (record) out.routing[l] = routing_;
    clock.mark(PassPart::kRouting);
    TANDEM_RETURN_IF_ERROR(moe_->run(l, n_experts, h_, n, hidden, routing_, expert_map_, moe_sum_));
    clock.mark(PassPart::kExperts);
    TANDEM_RETURN_IF_ERROR(e.moe_output(l, moe_sum_));
    clock.mark(PassPart::kMoeOutput);
  }
  plan_logits(batch, out);
  TANDEM_RETURN_IF_ERROR(e.logits(logit_rows_, out.logits));
  clock.mark(PassPart::kHead);
  clock.finish(n);
  for (const SequenceInput& seq : batch) seq.cache->set_length(seq.start_pos + seq.tokens.size());
  return Status();
}

void ModelRunner::plan_logits(std::span<const SequenceInput> batch, ForwardOutput& out) {
  out.n_vocab = n_vocab();
  out.first_row.resize(batch.size());
  out.n_rows.resize(batch.size());
  logit_rows_.clear();
  for (size_t s = 0; s < batch.size(); ++s) {
    const size_t ns = batch[s].tokens.size();
    out.first_row[s] = logit_rows_.size();
    out.n_rows[s] = batch[s].logits == LogitsWanted::kAll    ? ns
                    : batch[s].logits == LogitsWanted::kLast ? 1
                                                             : 0;
    const size_t skip = ns - out.n_rows[s];
    for (size_t i = 0; i < out.n_rows[s]; ++i) {
      logit_rows_.push_back(static_cast<int32_t>(token_offset_[s] + skip + i));
    }
  }
  out.logits.resize(logit_rows_.size() * out.n_vocab);
}

}  // namespace tandem::runtime
