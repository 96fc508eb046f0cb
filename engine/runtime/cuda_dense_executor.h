// CudaDenseExecutor: the DenseExecutor that runs attention, norms, routers, shared experts, dense
// FFNs and the head on one CUDA device (kernels/cuda/dense_ops.h), with a device mirror of the
// scheduler's KV pool; enable_cuda_dense installs one on a Scheduler's ModelRunner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "base/result.h"
#include "engine/model/model.h"
#include "engine/runtime/dense_device_plan.h"
#include "engine/runtime/dense_executor.h"

namespace tandem::runtime {

class Scheduler;

struct CudaDenseOptions {
  int device = 0;  // CUDA device ordinal
  // The most tokens of one forward pass (scratch is sized for it); 0 = the scheduler's
  // limits().max_batch_tokens (enable_cuda_dense only; create() needs a positive value).
  size_t max_batch_tokens = 0;
  // Rings for the sliding-window layers (the pool holds the full layers only); none: every layer
  // is mirrored. enable_cuda_dense sets them from the scheduler (device_window_rings).
  DeviceWindowRings window_rings = {};
};

// What was set up. A plain value.
struct CudaDenseInfo {
  int device = 0;
  size_t max_batch_tokens = 0;
  CudaDenseBytes bytes;       // device bytes by kind, as allocated by create()
  uint64_t pinned_bytes = 0;  // page-locked host staging
};

// Holds, in device memory it owns (three cudaMallocs: weights, KV, scratch — the sizes of
// estimate_cuda_dense_bytes — plus a larger block-table buffer if a batch ever needs one): every
// dense weight but the token embedding (matrices in their file type, one of
// kernels/cuda/cuda_weight_types.h; MLA's per-head k_b / v_b back to back; norms and biases as
// float), a KV mirror with the host pool's block geometry and element type (f32, or f16 rounded as
// the host rounds it) for every model layer (K and V, or the latent rows alone for MLA) or, with
// CudaDenseOptions::window_rings, for the pool's full layers with the windowed layers in rings
// after it, and scratch for max_batch_tokens tokens; page-locked host buffers
// stage every transfer. All work runs on one stream it owns; moe_input and logits synchronise with
// it, the other calls only enqueue. Arithmetic is float (quantized weights meet float activations),
// so results match the CPU path with quantized_activations = false to float rounding (sums reduced
// in another order), not bit for bit.
//
// Threads: as DenseExecutor (one calling thread at a time; each call makes the device current).
// The host KvPool must outlive every call (not the destructor); the checkpoint only needs to live
// through create().
class CudaDenseExecutor final : public DenseExecutor {
 public:
  // Errors, all before anything is kept: UNAVAILABLE when the runtime reports no device (or no
  // driver); INVALID_ARGUMENT for a device ordinal that does not exist, a zero max_batch_tokens
  // or a pool shaped for another model; UNIMPLEMENTED for a model the kernels do not run
  // (dense_executor_unsupported) or a dense matrix whose type they do not take (naming the
  // tensor and the type); RESOURCE_EXHAUSTED
  // naming the bytes wanted (by kind) and free; INTERNAL with the CUDA error otherwise.
  static Result<std::unique_ptr<CudaDenseExecutor>> create(const model::ModelSpec& spec,
                                                           const model::ModelWeights& weights,
                                                           KvPool& pool,
                                                           const CudaDenseOptions& options);
  ~CudaDenseExecutor() override;
  CudaDenseExecutor(const CudaDenseExecutor&) = delete;
  CudaDenseExecutor& operator=(const CudaDenseExecutor&) = delete;

  const CudaDenseInfo& info() const { return info_; }

  KvPool* mirrored_pool() override { return pool_; }
  size_t max_batch_tokens() const override { return info_.max_batch_tokens; }
  DeviceWindowRings window_rings() const override { return rings_; }
  Status begin(const DenseBatch& batch) override;
  Status attention(size_t layer) override;
  Status dense_ffn(size_t layer) override;
  Status moe_input(size_t layer, std::span<float> h, std::span<float> router_logits) override;
  Status moe_output(size_t layer, std::span<const float> moe_sum) override;
  Status logits(std::span<const int32_t> rows, std::span<float> out) override;
  Status copy_block(BlockId src, BlockId dst) override;

 private:
  struct Device;
  CudaDenseExecutor();
  Status check_layer(size_t layer) const;
  // attention() for multi-head latent attention (cuda_mla_attention.cpp).
  Status mla_attention(size_t layer);
  // out = down(silu(gate h) * up h) on the device, [n x hidden].
  Status swiglu(const DeviceMatrixRef& gate, const DeviceMatrixRef& up, const DeviceMatrixRef& down,
                const float* h, size_t n, float* out);

  model::ModelSpec spec_;
  KvPool* pool_ = nullptr;
  DeviceWindowRings rings_;
  CudaDenseInfo info_;
  std::unique_ptr<Device> d_;
  size_t n_tokens_ = 0;  // of the current pass (0: none)
};

// For the daemon, after Scheduler::create and before start(): creates a CudaDenseExecutor for the
// scheduler's runner (its spec and weights) mirroring the scheduler's KV pool and installs it
// (ModelRunner::set_dense_executor). FAILED_PRECONDITION when the scheduler is running;
// INVALID_ARGUMENT for a max_batch_tokens below the scheduler's limit; otherwise create()'s errors
// (nothing installed on error).
Result<CudaDenseInfo> enable_cuda_dense(Scheduler& scheduler, const CudaDenseOptions& options);

}  // namespace tandem::runtime
