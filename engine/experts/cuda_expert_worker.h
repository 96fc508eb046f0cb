// CudaExpertWorker: the ExpertWorker that computes its share of routed experts on a CUDA device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "engine/experts/expert_worker.h"
#include "engine/experts/moe_layer.h"
#include "engine/model/model.h"
#include "kernels/cuda/expert_ffn.h"

namespace tandem::experts {

// Holds device copies of the experts an ExpertMap gives to one worker index (every expert also
// stays in CPU memory: the worker copies, it never moves), and runs them with the grouped
// kernels of kernels/cuda/expert_ffn.h: per layer and call, one launch for gate/up + activation
// and one for down over all of the job's experts, on one stream owned by the worker. Activations
// go in and expert outputs come back through pinned host buffers. Runs the model's expert
// activation (SwiGLU, or GPT-OSS's clamped SwiGLU) and its expert biases (GPT-OSS: gate and up
// [n_experts x ffn], down [n_experts x hidden], uploaded as float next to each held expert's
// weights), in CpuExpertWorker's order: bias after each matmul, then the activation.
//
// Owns its device memory (plain cudaMalloc, one allocation per layer plus per-call scratch
// that grows on demand) and frees it in the destructor. Weights are of a type of
// kernels/cuda/cuda_weight_types.h (F32, F16, BF16, Q8_0, Q4_0, MXFP4, Q4_K, Q5_K, Q6_K,
// F8_E4M3_B128), dequantized in-kernel; arithmetic is float (quantized weights meet float
// activations, i.e. the CPU worker's kFloat mode, not its kQuantized path), so results match the
// CPU worker to rounding, not bit for bit. The clamped SwiGLU and the biases are written and
// compiled but have never run on a GPU.
//
// Threading: create() and run() from one thread at a time (the MoE executor's); the worker
// makes its device current on that thread. run() blocks until the device has finished.
class CudaExpertWorker final : public ExpertWorker {
 public:
  struct Options {
    int device = 0;      // CUDA device ordinal
    uint8_t worker = 1;  // the ExpertMap worker index whose experts this worker holds
    // Scratch for a forward pass of up to reserve_tokens tokens with top-k routing is allocated
    // by create(), so a full batch never allocates (or fails to) while serving; 0 = grown on
    // demand by run() instead.
    size_t reserve_tokens = 0;
    size_t k = 0;
  };

  // Device bytes of the per-call scratch (activations, gate/up results, outputs, tables) for
  // n_tokens tokens whose n_tokens * k pairs all go to this worker, over at most n_experts
  // experts of one layer: what create() reserves for Options::reserve_tokens. Pure.
  static uint64_t scratch_bytes(size_t hidden, size_t ffn, size_t n_tokens, size_t k,
                                size_t n_experts);

  // Device bytes create() allocates for the expert weights (and biases) of the experts `map`
  // gives `worker` (an empty map: every expert): per held expert its gate, up and down bytes as
  // stored and, in a layer with expert biases, its float gate and up [ffn] and down [hidden]
  // biases, each part rounded up to 256 bytes. Runs create()'s checks of the model and map (the
  // same INVALID_ARGUMENT / UNIMPLEMENTED errors) without a device. Pure.
  static Result<uint64_t> planned_weight_bytes(const model::ModelSpec& spec,
                                               const model::ModelWeights& weights,
                                               const ExpertMap& map, uint8_t worker);

  // Copies to the device every routed expert (layer, e) with map.worker(layer, e) ==
  // options.worker (an empty map: every expert), with its biases when the model has them. Errors,
  // all before anything is kept:
  //  UNAVAILABLE "no CUDA device ..." when the runtime reports no device (or no driver),
  //  INVALID_ARGUMENT for a device ordinal that does not exist, a map of another shape, or expert
  //    biases whose sizes do not match the experts,
  //  UNIMPLEMENTED for a held expert whose weight type the kernels do not take (naming layer,
  //    expert, tensor and type) or whose gate and up types differ, or an expert activation the
  //    kernels lack,
  //  RESOURCE_EXHAUSTED when the experts (and the reserved scratch) do not fit, naming the bytes
  //    wanted and free,
  //  INTERNAL for any other CUDA failure (naming the CUDA error).
  static Result<std::unique_ptr<CudaExpertWorker>> create(const model::ModelSpec& spec,
                                                          const model::ModelWeights& weights,
                                                          const ExpertMap& map,
                                                          const Options& options);
  ~CudaExpertWorker() override;
  CudaExpertWorker(const CudaExpertWorker&) = delete;
  CudaExpertWorker& operator=(const CudaExpertWorker&) = delete;

  std::string_view name() const override { return "cuda"; }
  // FAILED_PRECONDITION when the job names an expert this worker does not hold or a hidden size
  // that is not the model's; INTERNAL with the CUDA error when the device fails.
  Status run(const ExpertJob& job) override;

  // Device bytes held for expert weights (biases included), and in all (weights + scratch +
  // tables), right now.
  uint64_t weight_bytes() const { return weight_bytes_; }
  uint64_t device_bytes() const;
  size_t n_experts_held() const { return n_held_; }
  int device() const { return device_; }

 private:
  struct Layer;
  struct Buffers;
  CudaExpertWorker();

  Status ensure_capacity(size_t n_tokens, size_t n_rows, size_t n_experts);

  int device_ = 0;
  size_t hidden_ = 0;
  size_t ffn_ = 0;
  kernels::cuda::ExpertFfnActivation activation_ = kernels::cuda::ExpertFfnActivation::kSwiGlu;
  uint64_t weight_bytes_ = 0;
  size_t n_held_ = 0;
  std::vector<std::unique_ptr<Layer>> layers_;  // null for dense layers / nothing held
  std::unique_ptr<Buffers> buffers_;
};

// The number of CUDA devices the runtime reports (0 without a device or without a driver).
// Any thread.
int cuda_device_count();

}  // namespace tandem::experts
