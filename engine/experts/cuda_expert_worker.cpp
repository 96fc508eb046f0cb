// CudaExpertWorker: device copies of the placed experts; per job gather ids, copy in, two
// grouped launches, copy out, scatter rows.
#include "engine/experts/cuda_expert_worker.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "base/check.h"
#include "engine/experts/cpu_expert_worker.h"
#include "engine/experts/expert_device_bytes.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/cuda_weight_types.h"
#include "kernels/cuda/expert_ffn.h"

namespace tandem::experts {

namespace {

namespace kc = kernels::cuda;

constexpr uint32_t kNoRow = UINT32_MAX;

std::string mib(uint64_t bytes) {
  return kernels::cuda::bytes_and_mib(bytes);
}

// A device allocation freed on destruction.
struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr != nullptr) cudaFree(ptr);
  }
  Status reserve(size_t want, const char* what) {
    if (want <= bytes) return Status();
    if (ptr != nullptr) cudaFree(ptr);
    ptr = nullptr;
    bytes = 0;
    const cudaError_t err = cudaMalloc(&ptr, want);
    if (err != cudaSuccess) {
      ptr = nullptr;
      cudaGetLastError();  // clear the sticky-free error state of a failed allocation
      return resource_exhausted_error(std::string("CUDA expert worker: cannot allocate ") +
                                      mib(want) + " for " + what + ": " + cudaGetErrorString(err));
    }
    bytes = want;
    return Status();
  }
};

// A pinned host allocation freed on destruction.
struct PinnedBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() {
    if (ptr != nullptr) cudaFreeHost(ptr);
  }
  Status reserve(size_t want, const char* what) {
    if (want <= bytes) return Status();
    if (ptr != nullptr) cudaFreeHost(ptr);
    ptr = nullptr;
    bytes = 0;
    const cudaError_t err = cudaMallocHost(&ptr, want);
    if (err != cudaSuccess) {
      ptr = nullptr;
      cudaGetLastError();
      return resource_exhausted_error(std::string("CUDA expert worker: cannot pin ") + mib(want) +
                                      " of host memory for " + what + ": " +
                                      cudaGetErrorString(err));
    }
    bytes = want;
    return Status();
  }
};

}  // namespace

struct CudaExpertWorker::Layer {
  TensorType gate_type = TensorType::kF32;
  TensorType up_type = TensorType::kF32;
  TensorType down_type = TensorType::kF32;
  DeviceBuffer weights;                   // every held expert of the layer
  std::vector<kc::DeviceExpert> experts;  // per model expert; gate == null: not held
};

struct CudaExpertWorker::Buffers {
  cudaStream_t stream = nullptr;
  PinnedBuffer in;    // compacted token rows [n_used x hidden]
  PinnedBuffer meta;  // slot table, tiles, row_input (copied to d_meta in one transfer)
  PinnedBuffer out;   // [n_rows x hidden]
  DeviceBuffer d_x;
  DeviceBuffer d_meta;
  DeviceBuffer d_h;
  DeviceBuffer d_out;
  std::vector<uint32_t> token_slot;  // token -> compacted row, kNoRow when unused
  ~Buffers() {
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
};

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

CudaExpertWorker::CudaExpertWorker() : buffers_(std::make_unique<Buffers>()) {}

CudaExpertWorker::~CudaExpertWorker() {
  // Free on the device the memory came from.
  cudaSetDevice(device_);
  if (buffers_ && buffers_->stream != nullptr) cudaStreamSynchronize(buffers_->stream);
  buffers_.reset();
  layers_.clear();
}

uint64_t CudaExpertWorker::device_bytes() const {
  uint64_t total = weight_bytes_;
  total +=
      buffers_->d_x.bytes + buffers_->d_meta.bytes + buffers_->d_h.bytes + buffers_->d_out.bytes;
  return total;
}

namespace {

// The activation the kernels run for the model's, or UNIMPLEMENTED for one they lack.
Result<kc::ExpertFfnActivation> ffn_activation(const model::ModelSpec& spec) {
  switch (spec.expert_activation) {
    case model::ExpertActivation::kSwiGlu:
      return kc::ExpertFfnActivation::kSwiGlu;
    case model::ExpertActivation::kSwiGluOai:
      return kc::ExpertFfnActivation::kSwiGluOai;
  }
  return unimplemented_error(
      "CUDA expert worker: " + std::string(model::architecture_name(spec.architecture)) +
      " expert activation " + std::to_string(static_cast<int>(spec.expert_activation)) +
      " is not implemented on CUDA; keep these experts on the CPU");
}

// One held expert: its matrices and its float biases (null without; they point into
// ExpertPlan::biases).
struct Held {
  size_t layer = 0;
  size_t expert = 0;
  kernels::WeightMatrix gate, up, down;
  const float* gate_bias = nullptr;  // [ffn]
  const float* up_bias = nullptr;    // [ffn]
  const float* down_bias = nullptr;  // [hidden]
};

// What create() uploads, checked and sized before the device is touched. Move-only: held's bias
// pointers point into biases' rows, which a move keeps and a copy would not.
struct ExpertPlan {
  ExpertPlan() = default;
  ExpertPlan(ExpertPlan&&) = default;
  ExpertPlan& operator=(ExpertPlan&&) = default;
  ExpertPlan(const ExpertPlan&) = delete;
  ExpertPlan& operator=(const ExpertPlan&) = delete;

  kc::ExpertFfnActivation activation = kc::ExpertFfnActivation::kSwiGlu;
  std::vector<Held> held;
  std::vector<uint64_t> layer_bytes;  // device bytes per layer: matrices and biases, aligned
  // Per layer, expert_biases_of's float biases of every expert (empty for a layer without, or
  // one this worker holds nothing of).
  std::vector<std::vector<float>> biases;
  uint64_t total() const {
    uint64_t sum = 0;
    for (uint64_t b : layer_bytes) sum += b;
    return sum;
  }
};

// The experts `map` gives `worker` (an empty map: every expert), checked as create() documents.
Result<ExpertPlan> plan_experts(const model::ModelSpec& spec, const model::ModelWeights& weights,
                                const ExpertMap& map, uint8_t worker) {
  if (map.n_layers() != 0 &&
      (map.n_layers() != weights.layers.size() || map.n_experts() != spec.n_experts)) {
    return invalid_argument_error(
        "expert map covers " + std::to_string(map.n_layers()) + " layers x " +
        std::to_string(map.n_experts()) + " experts; the model has " +
        std::to_string(weights.layers.size()) + " x " + std::to_string(spec.n_experts));
  }
  ExpertPlan plan;
  TANDEM_ASSIGN_OR_RETURN(plan.activation, ffn_activation(spec));
  std::vector<Held>& held = plan.held;
  std::vector<uint64_t>& layer_bytes = plan.layer_bytes;
  layer_bytes.assign(weights.layers.size(), 0);
  plan.biases.resize(weights.layers.size());
  for (size_t l = 0; l < weights.layers.size(); ++l) {
    const model::LayerWeights& lw = weights.layers[l];
    if (!lw.moe) continue;
    const std::vector<float>& biases = plan.biases[l];
    bool any_held = false;
    for (size_t e = 0; e < spec.n_experts && !any_held; ++e) {
      any_held = map.n_layers() == 0 || map.worker(l, e) == worker;
    }
    if (any_held) {
      const Status s = expert_biases_of(spec, lw, l, plan.biases[l]);
      if (!s.ok()) return s.with_prefix("CUDA expert worker");
    }
    for (size_t e = 0; e < spec.n_experts; ++e) {
      if (map.n_layers() != 0 && map.worker(l, e) != worker) continue;
      Held h;
      h.layer = l;
      h.expert = e;
      TANDEM_ASSIGN_OR_RETURN(h.gate, weight_matrix_of(lw.experts_gate.expert(e)));
      TANDEM_ASSIGN_OR_RETURN(h.up, weight_matrix_of(lw.experts_up.expert(e)));
      TANDEM_ASSIGN_OR_RETURN(h.down, weight_matrix_of(lw.experts_down.expert(e)));
      const char* names[3] = {"gate", "up", "down"};
      const kernels::WeightMatrix* ms[3] = {&h.gate, &h.up, &h.down};
      for (int i = 0; i < 3; ++i) {
        if (!kc::expert_ffn_supports(ms[i]->type)) {
          return unimplemented_error("CUDA expert worker: layer " + std::to_string(l) + " expert " +
                                     std::to_string(e) + " " + names[i] + " has weight type " +
                                     std::string(tensor_type_name(ms[i]->type)) +
                                     "; the CUDA kernels take " + kc::cuda_weight_type_names() +
                                     " (place these experts on the CPU)");
        }
      }
      if (h.gate.type != h.up.type) {
        return unimplemented_error("CUDA expert worker: layer " + std::to_string(l) + " expert " +
                                   std::to_string(e) + " has gate type " +
                                   std::string(tensor_type_name(h.gate.type)) + " but up type " +
                                   std::string(tensor_type_name(h.up.type)));
      }
      if (h.gate.cols != spec.hidden_size || h.down.rows != spec.hidden_size ||
          h.up.rows != h.gate.rows || h.down.cols != h.gate.rows) {
        return invalid_argument_error(
            "CUDA expert worker: layer " + std::to_string(l) + " expert " + std::to_string(e) +
            " matrices do not form an FFN of hidden size " + std::to_string(spec.hidden_size));
      }
      layer_bytes[l] += expert_device_part_bytes(h.gate.rows * h.gate.row_bytes) +
                        expert_device_part_bytes(h.up.rows * h.up.row_bytes) +
                        expert_device_part_bytes(h.down.rows * h.down.row_bytes);
      if (!biases.empty()) {
        const size_t n = spec.n_experts;
        const size_t ffn = spec.expert_ffn_size;
        if (h.gate.rows != ffn) {
          return invalid_argument_error("CUDA expert worker: layer " + std::to_string(l) +
                                        " expert " + std::to_string(e) + " has " +
                                        std::to_string(h.gate.rows) + " ffn rows, its biases " +
                                        std::to_string(ffn));
        }
        h.gate_bias = biases.data() + e * ffn;
        h.up_bias = biases.data() + n * ffn + e * ffn;
        h.down_bias = biases.data() + 2 * n * ffn + e * spec.hidden_size;
        layer_bytes[l] += 2 * expert_device_part_bytes(ffn * sizeof(float)) +
                          expert_device_part_bytes(spec.hidden_size * sizeof(float));
      }
      held.push_back(h);
    }
  }
  // One type per projection within a layer, one ffn size in the model.
  for (size_t i = 1; i < held.size(); ++i) {
    const Held& a = held[i - 1];
    const Held& b = held[i];
    if (b.gate.rows != held[0].gate.rows) {
      return unimplemented_error("CUDA expert worker: experts of different ffn sizes (" +
                                 std::to_string(held[0].gate.rows) + ", " +
                                 std::to_string(b.gate.rows) + ")");
    }
    if (a.layer == b.layer && (a.gate.type != b.gate.type || a.down.type != b.down.type)) {
      return unimplemented_error("CUDA expert worker: layer " + std::to_string(b.layer) +
                                 " mixes weight types across experts");
    }
  }
  return plan;
}

}  // namespace

Result<uint64_t> CudaExpertWorker::planned_weight_bytes(const model::ModelSpec& spec,
                                                        const model::ModelWeights& weights,
                                                        const ExpertMap& map, uint8_t worker) {
  TANDEM_ASSIGN_OR_RETURN(const ExpertPlan plan, plan_experts(spec, weights, map, worker));
  return plan.total();
}

Result<std::unique_ptr<CudaExpertWorker>> CudaExpertWorker::create(
    const model::ModelSpec& spec, const model::ModelWeights& weights, const ExpertMap& map,
    const Options& options) {
  int count = 0;
  const cudaError_t count_err = cudaGetDeviceCount(&count);
  if (count_err != cudaSuccess || count == 0) {
    cudaGetLastError();
    return unavailable_error(
        std::string("no CUDA device: the CUDA expert worker needs one (cudaGetDeviceCount: ") +
        (count_err == cudaSuccess ? "0 devices" : cudaGetErrorString(count_err)) + ")");
  }
  if (options.device < 0 || options.device >= count) {
    return invalid_argument_error("CUDA device " + std::to_string(options.device) +
                                  " does not exist (" + std::to_string(count) + " visible)");
  }
  // Plan (and validate) before touching the device.
  TANDEM_ASSIGN_OR_RETURN(const ExpertPlan plan, plan_experts(spec, weights, map, options.worker));
  const std::vector<Held>& held = plan.held;
  const std::vector<uint64_t>& layer_bytes = plan.layer_bytes;
  const uint64_t total = plan.total();

  std::unique_ptr<CudaExpertWorker> worker(new CudaExpertWorker());
  worker->device_ = options.device;
  worker->activation_ = plan.activation;
  worker->hidden_ = spec.hidden_size;
  worker->ffn_ = held.empty() ? spec.expert_ffn_size : held[0].gate.rows;
  TANDEM_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.device), "cudaSetDevice");
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  TANDEM_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  if (total > free_bytes) {
    return resource_exhausted_error("CUDA device " + std::to_string(options.device) + ": " +
                                    std::to_string(held.size()) + " experts want " + mib(total) +
                                    " but only " + mib(free_bytes) + " of " + mib(total_bytes) +
                                    " are free; place fewer experts on the GPU");
  }
  TANDEM_CUDA_RETURN_IF_ERROR(
      cudaStreamCreateWithFlags(&worker->buffers_->stream, cudaStreamNonBlocking),
      "cudaStreamCreate");

  worker->layers_.resize(weights.layers.size());
  for (size_t l = 0; l < weights.layers.size(); ++l) {
    if (layer_bytes[l] == 0) continue;
    auto layer = std::make_unique<Layer>();
    const Status s = layer->weights.reserve(layer_bytes[l], "expert weights");
    if (!s.ok()) {
      cudaMemGetInfo(&free_bytes, &total_bytes);
      return resource_exhausted_error("CUDA device " + std::to_string(options.device) +
                                      ": experts want " + mib(total) + ", " + mib(free_bytes) +
                                      " free now; " + s.message());
    }
    layer->experts.assign(spec.n_experts, kc::DeviceExpert{});
    worker->layers_[l] = std::move(layer);
  }
  std::vector<uint64_t> used(weights.layers.size(), 0);
  for (const Held& h : held) {
    Layer& layer = *worker->layers_[h.layer];
    layer.gate_type = h.gate.type;
    layer.up_type = h.up.type;
    layer.down_type = h.down.type;
    auto* base = static_cast<uint8_t*>(layer.weights.ptr);
    // The matrices, then the biases (when the layer has them), each at the next aligned offset.
    const void* ptrs[6] = {};
    const void* sources[6] = {h.gate.data, h.up.data, h.down.data,
                              h.gate_bias, h.up_bias, h.down_bias};
    const uint64_t sizes[6] = {h.gate.rows * h.gate.row_bytes, h.up.rows * h.up.row_bytes,
                               h.down.rows * h.down.row_bytes, h.gate.rows * sizeof(float),
                               h.gate.rows * sizeof(float),    spec.hidden_size * sizeof(float)};
    for (int i = 0; i < 6; ++i) {
      if (sources[i] == nullptr) continue;
      uint8_t* dst = base + used[h.layer];
      TANDEM_CUDA_RETURN_IF_ERROR(
          cudaMemcpy(dst, sources[i], sizes[i], cudaMemcpyHostToDevice),
          i < 3 ? "copy of expert weights to the device" : "copy of expert biases to the device");
      ptrs[i] = dst;
      used[h.layer] += expert_device_part_bytes(sizes[i]);
    }
    TANDEM_CHECK(used[h.layer] <= layer_bytes[h.layer]);
    kc::DeviceExpert& d = layer.experts[h.expert];
    d.gate = ptrs[0];
    d.up = ptrs[1];
    d.down = ptrs[2];
    d.gate_bias = static_cast<const float*>(ptrs[3]);
    d.up_bias = static_cast<const float*>(ptrs[4]);
    d.down_bias = static_cast<const float*>(ptrs[5]);
  }
  // cudaMemcpy from pageable memory may return before its DMA lands, and the worker's stream
  // does not synchronise with the legacy default stream: wait before any kernel reads them.
  TANDEM_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize(), "cudaDeviceSynchronize after the uploads");
  worker->weight_bytes_ = total;
  worker->n_held_ = held.size();
  if (options.reserve_tokens > 0 && !held.empty()) {
    size_t most_in_a_layer = 0;
    for (const auto& layer : worker->layers_) {
      if (layer == nullptr) continue;
      size_t n = 0;
      for (const kc::DeviceExpert& e : layer->experts) n += e.gate != nullptr ? 1 : 0;
      most_in_a_layer = std::max(most_in_a_layer, n);
    }
    const size_t k = std::max<size_t>(1, options.k);
    TANDEM_RETURN_IF_ERROR(worker->ensure_capacity(options.reserve_tokens,
                                                   options.reserve_tokens * k, most_in_a_layer));
  }
  return worker;
}

namespace {

// The per-call buffer sizes for n_tokens tokens, n_rows pairs and n_experts experts.
struct ScratchSizes {
  size_t meta = 0;
  size_t x = 0;
  size_t h = 0;
  size_t out = 0;
};

ScratchSizes scratch_sizes(size_t hidden, size_t ffn, size_t n_tokens, size_t n_rows,
                           size_t n_experts) {
  ScratchSizes s;
  s.meta = n_experts * sizeof(kc::DeviceExpert) +
           3 * sizeof(uint32_t) * kc::max_expert_ffn_tiles(n_rows, n_experts) +
           sizeof(uint32_t) * n_rows;
  s.x = std::min(n_tokens, n_rows) * hidden * sizeof(float);
  s.h = n_rows * ffn * sizeof(float);
  s.out = n_rows * hidden * sizeof(float);
  return s;
}

}  // namespace

uint64_t CudaExpertWorker::scratch_bytes(size_t hidden, size_t ffn, size_t n_tokens, size_t k,
                                         size_t n_experts) {
  const ScratchSizes s = scratch_sizes(hidden, ffn, n_tokens, n_tokens * k, n_experts);
  return uint64_t{s.meta} + s.x + s.h + s.out;
}

Status CudaExpertWorker::ensure_capacity(size_t n_tokens, size_t n_rows, size_t n_experts) {
  Buffers& b = *buffers_;
  const ScratchSizes sizes = scratch_sizes(hidden_, ffn_, n_tokens, n_rows, n_experts);
  const size_t meta_bytes = sizes.meta;
  const size_t x_bytes = sizes.x;
  const size_t out_bytes = sizes.out;
  TANDEM_RETURN_IF_ERROR(b.in.reserve(x_bytes, "activations in"));
  TANDEM_RETURN_IF_ERROR(b.meta.reserve(meta_bytes, "expert tables"));
  TANDEM_RETURN_IF_ERROR(b.out.reserve(out_bytes, "partial sums out"));
  TANDEM_RETURN_IF_ERROR(b.d_x.reserve(x_bytes, "activations"));
  TANDEM_RETURN_IF_ERROR(b.d_meta.reserve(meta_bytes, "expert tables"));
  TANDEM_RETURN_IF_ERROR(b.d_h.reserve(sizes.h, "gate/up results"));
  TANDEM_RETURN_IF_ERROR(b.d_out.reserve(out_bytes, "expert outputs"));
  if (b.token_slot.size() < n_tokens) b.token_slot.resize(n_tokens);
  return Status();
}

Status CudaExpertWorker::run(const ExpertJob& job) {
  TANDEM_CHECK(job.groups != nullptr);
  const ExpertGroups& g = *job.groups;
  const size_t n_experts = g.expert_ids.size();
  const size_t n_rows = g.pairs.size();
  if (n_experts == 0 || n_rows == 0) return Status();
  if (job.layer >= layers_.size() || layers_[job.layer] == nullptr) {
    return failed_precondition_error("CUDA expert worker holds no experts of layer " +
                                     std::to_string(job.layer));
  }
  if (job.hidden != hidden_) {
    return failed_precondition_error("CUDA expert worker: hidden size " +
                                     std::to_string(job.hidden) + ", the model's is " +
                                     std::to_string(hidden_));
  }
  const Layer& layer = *layers_[job.layer];
  for (int32_t e : g.expert_ids) {
    if (e < 0 || static_cast<size_t>(e) >= layer.experts.size() ||
        layer.experts[static_cast<size_t>(e)].gate == nullptr) {
      return failed_precondition_error("CUDA expert worker does not hold layer " +
                                       std::to_string(job.layer) + " expert " + std::to_string(e));
    }
  }
  TANDEM_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_), "cudaSetDevice");
  // A failed run may have left copies from (or into) the pinned buffers in flight: wait before
  // they are rewritten or reallocated (a no-op after a successful run).
  TANDEM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(buffers_->stream), "cudaStreamSynchronize");
  TANDEM_RETURN_IF_ERROR(ensure_capacity(job.n_tokens, n_rows, n_experts));
  Buffers& b = *buffers_;
  const size_t hidden = hidden_;

  // Tables: slot -> device expert, tiles, row -> compacted input row; and the input rows.
  auto* meta = static_cast<uint8_t*>(b.meta.ptr);
  auto* slots = reinterpret_cast<kc::DeviceExpert*>(meta);
  for (size_t i = 0; i < n_experts; ++i) {
    slots[i] = layer.experts[static_cast<size_t>(g.expert_ids[i])];
  }
  const size_t slots_bytes = n_experts * sizeof(kc::DeviceExpert);
  auto* tiles = reinterpret_cast<uint32_t*>(meta + slots_bytes);
  const size_t n_tiles = kc::make_expert_ffn_tiles(g.offsets.data(), n_experts, tiles);
  const size_t tiles_bytes = 3 * sizeof(uint32_t) * n_tiles;
  auto* row_input = reinterpret_cast<uint32_t*>(meta + slots_bytes + tiles_bytes);
  const size_t meta_bytes = slots_bytes + tiles_bytes + sizeof(uint32_t) * n_rows;

  std::fill_n(b.token_slot.begin(), job.n_tokens, kNoRow);
  auto* in = static_cast<float*>(b.in.ptr);
  uint32_t n_used = 0;
  for (size_t r = 0; r < n_rows; ++r) {
    const size_t token = g.pairs[r] / job.k;
    TANDEM_CHECK(token < job.n_tokens);
    if (b.token_slot[token] == kNoRow) {
      b.token_slot[token] = n_used;
      std::memcpy(in + static_cast<size_t>(n_used) * hidden, job.input.data() + token * hidden,
                  hidden * sizeof(float));
      ++n_used;
    }
    row_input[r] = b.token_slot[token];
  }

  cudaStream_t stream = b.stream;
  TANDEM_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(b.d_meta.ptr, meta, meta_bytes, cudaMemcpyHostToDevice, stream),
      "copy of expert tables to the device");
  TANDEM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(b.d_x.ptr, in, n_used * hidden * sizeof(float),
                                              cudaMemcpyHostToDevice, stream),
                              "copy of activations to the device");
  auto* d_meta = static_cast<uint8_t*>(b.d_meta.ptr);
  kc::ExpertFfnGroup group;
  group.gate_type = layer.gate_type;
  group.up_type = layer.up_type;
  group.down_type = layer.down_type;
  group.activation = activation_;
  group.hidden = hidden;
  group.ffn = ffn_;
  group.n_experts = n_experts;
  group.n_rows = n_rows;
  group.experts = reinterpret_cast<const kc::DeviceExpert*>(d_meta);
  group.tiles = reinterpret_cast<const uint32_t*>(d_meta + slots_bytes);
  group.n_tiles = n_tiles;
  group.row_input = reinterpret_cast<const uint32_t*>(d_meta + slots_bytes + tiles_bytes);
  group.row_scale = nullptr;  // ExpertJob wants unscaled rows; MoeLayer applies the weights
  group.x = static_cast<const float*>(b.d_x.ptr);
  group.h = static_cast<float*>(b.d_h.ptr);
  group.out = static_cast<float*>(b.d_out.ptr);
  TANDEM_RETURN_IF_ERROR(kc::expert_ffn_enqueue(group, stream));
  TANDEM_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(b.out.ptr, b.d_out.ptr, n_rows * hidden * sizeof(float),
                      cudaMemcpyDeviceToHost, stream),
      "copy of expert outputs to the host");
  TANDEM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream), "expert FFN on the device");

  const auto* out = static_cast<const float*>(b.out.ptr);
  for (size_t r = 0; r < n_rows; ++r) {
    std::memcpy(job.pair_out.data() + static_cast<size_t>(g.pairs[r]) * hidden, out + r * hidden,
                hidden * sizeof(float));
  }
  return Status();
}

}  // namespace tandem::experts
