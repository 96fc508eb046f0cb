// CpuExpertWorker: the ExpertWorker that computes routed experts on the CPU with a ThreadPool.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "base/numa.h"
#include "base/result.h"
#include "base/thread_pool.h"
#include "engine/experts/expert_worker.h"
#include "engine/model/model.h"
#include "kernels/cpu/matmul.h"

namespace tandem::experts {

// One expert's three projections as kernel views, and its biases (GPT-OSS) as float rows owned by
// the worker (null when the model has none).
struct ExpertMatrices {
  kernels::WeightMatrix gate;        // [expert_ffn x hidden]
  kernels::WeightMatrix up;          // [expert_ffn x hidden]
  kernels::WeightMatrix down;        // [hidden x expert_ffn]
  const float* gate_bias = nullptr;  // [expert_ffn]
  const float* up_bias = nullptr;    // [expert_ffn]
  const float* down_bias = nullptr;  // [hidden]
};

// Views the routed-expert weights of every MoE layer; with ExpertCopies::interleave (the
// default), the matrices of a type whose interleaved layout the active kernels prefer (MXFP4 with
// AVX2 on the quantized path: kernels::preferred_weight_layout) are instead copied once, at
// create(), into interleaved buffers the worker owns and frees (kernels::WeightLayout::
// kInterleaved8, or Q8_0's kRowQuads8 on AVX2; bit-identical results, faster kernels). The copy
// is anonymous memory (about the whole checkpoint for GPT-OSS); the bytes copied from are handed to
// model::release_copied_spans, so the experts are held once.
// ExpertCopies::interleave = false keeps the mapping only, for memory-tight hosts; experts a GPU
// worker will hold (ExpertCopies::plain) are never copied. The ModelWeights (and the checkpoint
// mapping behind it) and the pool must outlive the worker.
//
// A layer's share runs as three pool phases, not a fork-join per expert or per matmul: (1) every
// (expert, block of 32 ffn rows) item computes its gate and up rows (+ biases) for all of the
// expert's tokens and the activation (spec.expert_activation: SiLU(gate) * up, or GPT-OSS's
// clamped SwiGLU) in place; (2) the hidden activations are quantized once; (3) every (expert,
// block of 64 hidden rows) item computes its down rows (+ bias) and writes them into the pairs'
// output rows. Each token's input is quantized once per layer. Weights meet activations in `mode`
// (the engine passes kQuantized: each type's paired format, llama.cpp's CPU arithmetic). Every
// output element is computed by one thread with the same arithmetic whatever the split, so results
// are bit-identical for any thread count and any split of the pairs across workers. One type per
// projection in a layer (create() refuses a mix). run() is called by one thread at a time (the
// forward pass's, or a MoeLayer helper thread); while it runs, nobody else may call parallel_for on
// the same pool (MoeLayer guarantees this through thread_pool()).
// Which expert matrices CpuExpertWorker::create copies into interleaved buffers, and where the
// copies' pages go.
struct ExpertCopies {
  // Copy the matrices whose interleaved layout the kernels prefer; false: the mapping only.
  bool interleave = true;
  // (layer, expert) pairs left on the checkpoint's rows whatever `interleave` says: the experts a
  // GPU worker will hold, which the CPU computes only for the start-up self-check's probe (the
  // rows give the same bits, more slowly). Copying them would hold their bytes in host memory
  // again for nothing (about 18 GB for the experts a 24 GB card takes of gpt-oss-120b). Pairs
  // outside the model are ignored.
  std::vector<std::pair<uint32_t, uint32_t>> plain = {};
  // Several nodes: interleave the copies' pages over them before they are written (null: first
  // touch).
  const NumaTopology* numa = nullptr;
  // Called on create()'s thread after each layer's copies are made and the bytes they came from
  // handed to model::release_copied_spans: where those bytes are the process's own (a file read
  // into memory, tensors converted at open) the engine frees them there
  // (model::drop_released_copies), so start-up holds the model about once plus the layer being
  // copied, not twice. Empty: nothing is called.
  std::function<void()> after_layer = {};
};

class CpuExpertWorker final : public ExpertWorker {
 public:
  // INVALID_ARGUMENT / UNIMPLEMENTED when an expert matrix has a type or size the kernels refuse.
  // The interleaved copies (`copies`) are made on the pool (parallel_for; same thread rules as
  // run()).
  static Result<std::unique_ptr<CpuExpertWorker>> create(const model::ModelSpec& spec,
                                                         const model::ModelWeights& weights,
                                                         ThreadPool* pool,
                                                         kernels::MatmulActivations mode,
                                                         const ExpertCopies& copies = {});

  // Bytes of the interleaved expert copies the worker owns (0 without them).
  size_t interleaved_bytes() const { return interleaved_bytes_; }
  // The views expert `expert` of MoE layer `layer` computes with: its interleaved copies or the
  // checkpoint's rows (layer < the model's layers, a MoE layer, expert < its experts).
  const ExpertMatrices& expert(size_t layer, size_t expert) const { return layers_[layer][expert]; }

  std::string_view name() const override { return "cpu"; }
  Status run(const ExpertJob& job) override;
  const ThreadPool* thread_pool() const override { return pool_; }

 private:
  CpuExpertWorker() = default;
  // Replaces the layer's views that interleaves() picks by interleaved copies in one owned buffer,
  // except those of the experts `plain` marks. numa: interleave the buffer's pages over its nodes
  // first (null: first touch).
  Status interleave_layer(size_t layer, const std::vector<bool>& plain, const NumaTopology* numa);
  // item(i) for i < n_items over the pool (one item per chunk).
  void run_parallel(size_t n_items, const std::function<void(size_t)>& item);

  std::vector<std::vector<ExpertMatrices>> layers_;  // empty for dense layers
  std::vector<std::vector<float>> biases_;  // per layer: gate, up, down biases back to back
  struct FreeBuffer {
    void operator()(uint8_t* p) const;
  };
  // Per layer, the interleaved copies of its expert matrices (null where the layer has none).
  std::vector<std::unique_ptr<uint8_t, FreeBuffer>> interleaved_;
  size_t interleaved_bytes_ = 0;
  model::ExpertActivation activation_ = model::ExpertActivation::kSwiGlu;
  ThreadPool* pool_ = nullptr;
  kernels::MatmulActivations mode_ = kernels::MatmulActivations::kFloat;
  kernels::QuantizedActivations tokens_;   // the job's inputs, one row per token
  kernels::QuantizedActivations pair_in_;  // the same rows gathered per pair (group order)
  std::vector<float> hidden_;              // [pairs x ffn]: act(gate, up)
  kernels::QuantizedActivations mid_;      // hidden_ in the down projection's format
};

// A kernel view of one model matrix (2-D [rows, cols], or 1-D [cols] as one row).
Result<kernels::WeightMatrix> weight_matrix_of(const model::TensorInfo& tensor);
Result<kernels::WeightMatrix> weight_matrix_of(const model::MatrixView& view);

// A norm / bias / sink tensor converted to float (out cleared when t is null); errors name it.
Status float_copy_of(const model::TensorInfo* t, std::vector<float>& out);

// Every routed expert's biases of MoE layer `lw` (index `layer`) in float, projection after
// projection: [gate n x ffn | up n x ffn | down n x hidden] with n, ffn and hidden of `spec`
// (expert e's gate row at e * ffn, up row at (n + e) * ffn, down row at 2 n ffn + e * hidden).
// Empty when the layer has no gate bias. INVALID_ARGUMENT "layer L: expert bias sizes do not match
// the experts" when a bias is missing or of another size.
Status expert_biases_of(const model::ModelSpec& spec, const model::LayerWeights& lw, size_t layer,
                        std::vector<float>& out);

}  // namespace tandem::experts
