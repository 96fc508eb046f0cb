// ModelRunner: the forward pass of a MoE model over a batch of sequences with per-sequence KV
// caches: one layer loop that drives a dense executor (CPU or device) and the MoE layer's workers.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "base/result.h"
#include "base/thread_pool.h"
#include "engine/experts/experts.h"
#include "engine/model/model.h"
#include "engine/runtime/batch.h"
#include "engine/runtime/cpu_dense_executor.h"
#include "engine/runtime/dense_executor.h"
#include "engine/runtime/kv_cache.h"
#include "engine/runtime/pass_timings.h"
#include "engine/runtime/prepared_weights.h"
#include "engine/runtime/windowed_kv_cache.h"
#include "kernels/cpu/rope.h"

namespace tandem::runtime {

struct RunnerOptions {
  // Threads of the runner's pool (0 = hardware concurrency): config runtime.threads.
  int threads = 0;
  // Quantized weights meet activations quantized to the format their type pairs with
  // (MatmulActivations::kQuantized: Q8_0 for Q8_0/Q4_0/MXFP4, Q8_K for K-quants), as llama.cpp's
  // CPU backend computes, for q/k/v/o, experts, shared experts, dense FFNs and the lm head. false:
  // float activations everywhere. Routers and shared-expert gates are always float (files keep
  // them F32), and so are F32/F16/BF16 weights.
  bool quantized_activations = true;
  // Context limit of new KV caches; 0 = the model's context_length.
  size_t context_length = 0;
  // The element type of the K/V rows of every KV cache the runner makes or its scheduler pools
  // (config runtime.kv_cache_type): f16 halves their bytes (rows rounded to nearest half when
  // written; attention reads them exactly). A device dense executor keeps its own float mirror.
  kernels::KvType kv_type = kernels::KvType::kF32;
  // The CPU expert worker copies the expert matrices whose interleaved layout the kernels prefer
  // (MXFP4 with AVX2) into owned interleaved buffers at start (experts::CpuExpertWorker: faster,
  // bit-identical, but the experts' bytes again in memory). false: the mapping only.
  bool interleave_experts = true;
  // (layer, expert) pairs a GPU expert worker will compute: the CPU worker computes them only for
  // the start-up self-check's probe, from the checkpoint's rows, and copies none of them
  // (experts::ExpertCopies::plain), as interleave_dense is off when the dense parts go to the GPU.
  std::vector<std::pair<uint32_t, uint32_t>> gpu_experts = {};
  // experts::ExpertCopies::after_layer: called during create() only, after each layer's expert
  // copies are made.
  std::function<void()> after_expert_layer = {};
  // The same for the dense matrices the runner computes with (interleave_dense_matrices).
  bool interleave_dense = true;
  // On a machine with several NUMA nodes (base/numa.h): the pool's workers pinned, spread evenly
  // over the nodes, and the pages of the interleaved expert copies interleaved over them. One
  // node: nothing. false: neither (config runtime.numa).
  bool numa = true;
  // How the CPU computes MLA attention (cpu_dense_executor.h): kAuto picks the absorbed or the
  // expanded form per sequence by their cost; the others force one (tests).
  MlaPrefill mla_prefill = MlaPrefill::kAuto;
};

// The forward pass over all tokens of the batch at once, one layer loop for every device:
//   x = embed(tokens)                                      (host)
//   per layer: attention half                              (dense executor)
//     MoE layer: h, router logits = moe_input              (dense executor)
//                route (experts::route), routed experts (experts::MoeLayer: CPU and CUDA
//                workers)                                  (host)
//                x += moe_sum [+ shared expert] = moe_output (dense executor)
//     dense layer: x += swiglu FFN                         (dense executor)
//   logits = (rmsnorm(x) * output_norm) W_lm^T for the requested positions (dense executor)
// The dense executor is the runner's CpuDenseExecutor (kernels/cpu, K/V in the sequences' own
// caches; the recipe is in cpu_dense_executor.h) unless set_dense_executor gave it a device one,
// whose K/V live in its mirror of the scheduler's KvPool, addressed by the PagedKvCaches' block
// tables (the host pool's rows are then not written).
//
// Threads: the runner owns its ThreadPool. forward() is called from one thread at a time (the
// scheduler's loop). The spec is copied; the weights (and the checkpoint that maps them) must
// outlive the runner.
// The RoPE of `layer` (window layers may have their own base) and the router's recipe, as the
// spec describes them: the one place that turns a ModelSpec into kernel settings.
kernels::RopeConfig rope_config(const model::ModelSpec& spec, size_t layer);
experts::RouterRecipe router_recipe(const model::ModelSpec& spec);

class ModelRunner {
 public:
  // UNIMPLEMENTED for RoPE scaling other than none, INVALID_ARGUMENT / UNIMPLEMENTED for weights
  // the kernels cannot use.
  static Result<std::unique_ptr<ModelRunner>> create(const model::ModelSpec& spec,
                                                     const model::ModelWeights& weights,
                                                     const RunnerOptions& options);
  ~ModelRunner();

  const model::ModelSpec& spec() const { return spec_; }
  size_t n_vocab() const { return weights_.lm_head.rows; }
  size_t context_length() const { return context_length_; }
  ThreadPool& pool() { return *pool_; }

  // A new empty DenseKvCache sized for this model (max_positions 0 = context_length()); for a
  // model with sliding-window layers, a WindowedKvCache over a DenseKvCache of the full layers.
  std::unique_ptr<KvCache> new_kv_cache(size_t max_positions = 0) const;
  // Which layers keep every position (the ones a KV pool must hold) and which only a window.
  const KvLayerLayout& kv_layout() const { return kv_layout_; }
  // A sequence's cache from a cache of the full layers only (kv_layout().n_full layers, e.g. a
  // PagedKvCache of a pool of that many layers): wrapped in a WindowedKvCache when the model has
  // windowed layers, returned as it is otherwise. With a device executor that keeps window rings,
  // the WindowedKvCache holds one of its ring slots for as long as it lives (none when all are
  // held: forward() then refuses the sequence).
  std::unique_ptr<KvCache> wrap_kv_cache(std::unique_ptr<KvCache> full_layers,
                                         size_t max_positions) const;

  // Runs the batch. Errors (nothing is computed, caches untouched): INVALID_ARGUMENT for an empty
  // batch, an empty token list, a null / foreign-shaped / repeated cache, a start_pos beyond the
  // cache's length, or a token id outside the vocabulary; OUT_OF_RANGE when a sequence would
  // pass its cache's max_positions; RESOURCE_EXHAUSTED when the cache cannot grow (a paged cache
  // may then keep blocks it took for earlier sequences of the batch); FAILED_PRECONDITION when a
  // rewind would write KV blocks shared with another sequence. On success
  // each cache's length is start_pos + n_tokens. An error from an expert worker in the middle of
  // the pass leaves the lengths unchanged but the rows from start_pos on undefined: the caller
  // fails those sequences (or rewinds them to start_pos). With a dense executor, also
  // INVALID_ARGUMENT (nothing computed) for a cache that is not a PagedKvCache of the executor's
  // pool or a batch beyond its max_batch_tokens; an executor error mid-pass (or one from its
  // copy-on-write copy in prepare_write) leaves the rows from start_pos undefined as above.
  Status forward(std::span<const SequenceInput> batch, ForwardOutput& out,
                 const ForwardOptions& options = {});

  // Routes experts to other workers: `workers` (non-owning, must outlive the runner; 1..255) and
  // the map of which worker owns which (layer, expert). An empty map means all on workers[0].
  // By default the runner uses its own CPU worker for everything.
  Status set_expert_workers(std::vector<experts::ExpertWorker*> workers, experts::ExpertMap map);
  experts::CpuExpertWorker& cpu_worker() { return *cpu_worker_; }
  // Per-MoE-layer counts and times of every forward pass from now on are added to *timings (see
  // experts::MoeLayerTimings; non-owning, must outlive its use); null (the default) stops
  // measuring. Kept across set_expert_workers. Same thread as forward().
  void set_moe_timings(experts::MoeLayerTimings* timings);
  // The time of each part of every forward pass's layer loop from now on is added to *timings
  // (PassTimings; non-owning, must outlive its use); null (the default) stops measuring. Same
  // thread as forward(), or before the thread that calls forward() starts.
  void set_pass_timings(PassTimings* timings) { pass_timings_ = timings; }

  // Runs the dense parts of every later forward pass on the device executor `executor` (one with a
  // mirrored pool; null: back to the CPU executor, whose KV then no longer matches what the
  // device executor wrote). Installs a copy hook on executor->pool()
  // so that copy-on-write copies reach the executor's mirror (the hook does nothing once this
  // executor is replaced or the runner is gone). From then on forward() takes only PagedKvCaches
  // of that pool and batches of at most executor->max_batch_tokens() tokens (INVALID_ARGUMENT
  // naming the sequence otherwise). INVALID_ARGUMENT (nothing changes) when the pool is shaped
  // for another model, or the executor keeps window rings (DenseExecutor::window_rings) and the
  // pool is not one of the full layers only; with rings, forward() also takes only
  // WindowedKvCaches wrapped after this call (wrap_kv_cache), with at most rings.pass_tokens
  // tokens per sequence. Same thread as forward().
  Status set_dense_executor(std::unique_ptr<DenseExecutor> executor);
  // The device executor, null while the dense parts run on the CPU.
  DenseExecutor* dense_executor() { return dense_.get(); }

  // What the runner was created from: the checkpoint's weights (non-owning) and their kernel views.
  const model::ModelWeights& model_weights() const { return *model_weights_; }
  const PreparedWeights& prepared_weights() const { return weights_; }

 private:
  ModelRunner() = default;
  Status validate(std::span<const SequenceInput> batch) const;
  Status validate_dense(std::span<const SequenceInput> batch) const;
  // Fills out's first_row / n_rows / n_vocab, sizes out.logits and lists the batch tokens whose
  // logits are wanted in logit_rows_.
  void plan_logits(std::span<const SequenceInput> batch, ForwardOutput& out);
  // The batch as the executor sees it (block tables and KV slots only for a mirrored pool).
  DenseBatch dense_batch(std::span<const SequenceInput> batch, bool mirrored);
  // The layer loop and the head on `e` (x_ holds the embeddings).
  Status run_layers(DenseExecutor& e, std::span<const SequenceInput> batch, ForwardOutput& out,
                    bool record);

  model::ModelSpec spec_;
  const model::ModelWeights* model_weights_ = nullptr;
  PreparedWeights weights_;
  size_t context_length_ = 0;
  KvLayerLayout kv_layout_;
  kernels::MatmulActivations mode_ = kernels::MatmulActivations::kQuantized;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<experts::CpuExpertWorker> cpu_worker_;
  std::unique_ptr<experts::MoeLayer> moe_;
  experts::ExpertMap expert_map_;
  experts::MoeLayerTimings* moe_timings_ = nullptr;
  PassTimings* pass_timings_ = nullptr;
  // The dense parts on the CPU (after pool_ and weights_, which it uses).
  std::unique_ptr<CpuDenseExecutor> cpu_dense_;

  // Per-forward buffers, reused.
  size_t n_tokens_ = 0;
  std::vector<int32_t> positions_;
  std::vector<size_t> token_offset_;  // per sequence
  std::vector<float> x_, h_, router_, moe_sum_;
  experts::Routing routing_;
  std::vector<int32_t> logit_rows_;

  // The device executor (shared with the pool's copy hook, which holds a weak reference), null
  // when the dense parts run on cpu_dense_; the per-pass tables of either.
  std::shared_ptr<DenseExecutor> dense_;
  // Its window rings and their slots (null without rings).
  DeviceWindowRings rings_;
  std::shared_ptr<DeviceRingSlots> ring_slots_;
  std::vector<int32_t> token_seq_, kv_slots_, table_begin_, tables_, ring_slots_of_tokens_,
      ring_tables_;
  std::vector<DenseSequence> dense_seqs_;
};

}  // namespace tandem::runtime
