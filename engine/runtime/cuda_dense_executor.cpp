// CudaDenseExecutor: device set-up from a DenseDevicePlan, the per-layer dense work on one stream,
// and enable_cuda_dense.
#include "engine/runtime/cuda_dense_executor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include "engine/runtime/cuda_dense_device.h"
#include "engine/runtime/model_runner.h"
#include "engine/runtime/scheduler.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/dense_ops.h"

namespace tandem::runtime {

using R = model::WeightRole;
namespace {

namespace kc = kernels::cuda;

std::string mib(uint64_t bytes) {
  return kernels::cuda::bytes_and_mib(bytes);
}

// cudaMalloc, mapping an out-of-memory failure to RESOURCE_EXHAUSTED.
Status device_alloc(void** ptr, uint64_t bytes, const char* what, int device) {
  *ptr = nullptr;
  if (bytes == 0) return Status();
  const cudaError_t err = cudaMalloc(ptr, bytes);
  if (err == cudaSuccess) return Status();
  *ptr = nullptr;
  cudaGetLastError();
  if (err == cudaErrorMemoryAllocation) {
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    return resource_exhausted_error("CUDA device " + std::to_string(device) + ": " + what +
                                    " want " + mib(bytes) + " but only " + mib(free_bytes) +
                                    " are free");
  }
  return kernels::cuda::cuda_error(err, std::string("cudaMalloc of ") + what);
}

}  // namespace

CudaDenseExecutor::CudaDenseExecutor() : d_(std::make_unique<Device>()) {}

CudaDenseExecutor::~CudaDenseExecutor() = default;

Result<std::unique_ptr<CudaDenseExecutor>> CudaDenseExecutor::create(
    const model::ModelSpec& spec, const model::ModelWeights& weights, KvPool& pool,
    const CudaDenseOptions& options) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    return unavailable_error("no CUDA device: the runtime reports none (or no driver)");
  }
  if (options.device < 0 || options.device >= count) {
    return invalid_argument_error("CUDA device " + std::to_string(options.device) +
                                  " does not exist (" + std::to_string(count) + " devices)");
  }
  if (const std::string why = dense_executor_unsupported(spec); !why.empty()) {
    return unimplemented_error(why + "; run the dense layers on the CPU");
  }
  if (pool.keys_only() != (spec.kv_value_dim() == 0)) {
    return invalid_argument_error(
        std::string("the KV pool is ") + (pool.keys_only() ? "keys-only" : "of keys and values") +
        " but the model's attention " + (spec.kv_value_dim() == 0 ? "caches" : "does not cache") +
        " keys only (MLA)");
  }
  const KvGeometry geometry{pool.n_layers(), pool.kv_dim(), pool.block_tokens(),
                            pool.n_blocks(), pool.type(),   options.window_rings};
  TANDEM_ASSIGN_OR_RETURN(DenseDevicePlan plan,
                          plan_dense_device(spec, weights, geometry, options.max_batch_tokens));
  if (const std::string why = cuda_dense_unsupported_tensor(plan); !why.empty()) {
    return unimplemented_error(why);
  }

  std::unique_ptr<CudaDenseExecutor> e(new CudaDenseExecutor());
  e->spec_ = spec;
  e->pool_ = &pool;
  e->rings_ = options.window_rings;
  e->info_.device = options.device;
  e->info_.max_batch_tokens = options.max_batch_tokens;
  e->info_.bytes = plan.bytes;
  e->info_.pinned_bytes = plan.pinned_bytes;
  Device& d = *e->d_;
  d.device = options.device;
  TANDEM_CUDA_RETURN_IF_ERROR(cudaSetDevice(options.device), "cudaSetDevice");
  size_t free_bytes = 0, total_bytes = 0;
  TANDEM_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  if (plan.bytes.total() > free_bytes) {
    return resource_exhausted_error(
        "CUDA device " + std::to_string(options.device) + ": the dense parts want " +
        mib(plan.bytes.total()) + " (weights " + mib(plan.bytes.dense_weights) + ", KV " +
        mib(plan.bytes.kv) + ", scratch " + mib(plan.bytes.scratch) + ") but only " +
        mib(free_bytes) + " of " + mib(total_bytes) + " are free");
  }
  TANDEM_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking),
                              "cudaStreamCreate");
  void* p = nullptr;
  TANDEM_RETURN_IF_ERROR(
      device_alloc(&p, plan.bytes.dense_weights, "dense weights", options.device));
  d.weights = static_cast<uint8_t*>(p);
  TANDEM_RETURN_IF_ERROR(device_alloc(&p, plan.bytes.kv, "the KV mirror", options.device));
  d.kv = static_cast<uint8_t*>(p);
  TANDEM_RETURN_IF_ERROR(device_alloc(&p, plan.bytes.scratch, "scratch", options.device));
  d.scratch = static_cast<uint8_t*>(p);
  TANDEM_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&p, plan.pinned_bytes, cudaHostAllocDefault),
                              "cudaHostAlloc of the staging buffers");
  d.pinned = static_cast<uint8_t*>(p);
  for (const DeviceUpload& u : plan.uploads) {
    TANDEM_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(d.weights + u.offset, u.host, u.bytes, cudaMemcpyHostToDevice),
        "upload of " + u.name);
  }
  // Pageable-memory copies may return before their DMA lands, and the work stream does not
  // synchronise with the legacy default stream: wait here.
  TANDEM_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize(), "cudaDeviceSynchronize after the uploads");
  d.layers = std::move(plan.layers);
  d.output_norm = plan.output_norm;
  d.lm_head = plan.lm_head;
  d.s = plan.scratch;
  d.tables = d.i(d.s.tables);
  d.pin_tables = d.pi(d.s.pin_tables);
  d.table_capacity = d.s.table_capacity;
  d.kv_type = pool.type();
  d.kv_plane_bytes = plan.mirror_plane_bytes;
  d.kv_planes = pool.keys_only() ? 1 : 2;
  d.kv_ring_offset = plan.kv_ring_offset;
  d.ring_plane_bytes = plan.ring_plane_bytes;
  d.ring_blocks = options.window_rings.slots * options.window_rings.blocks;
  const KvLayerLayout layout = KvLayerLayout::of(spec);
  d.mirror_of_layer.assign(spec.n_layers, -1);
  d.ring_of_layer.assign(spec.n_layers, -1);
  for (size_t l = 0, ring = 0; l < spec.n_layers; ++l) {
    if (options.window_rings.slots > 0 && layout.slot[l] < 0) {
      d.ring_of_layer[l] = static_cast<int32_t>(ring++);
    } else {
      d.mirror_of_layer[l] =
          options.window_rings.slots > 0 ? layout.slot[l] : static_cast<int32_t>(l);
    }
  }
  return e;
}

Status CudaDenseExecutor::check_layer(size_t layer) const {
  if (n_tokens_ == 0) return failed_precondition_error("dense executor: no pass begun");
  if (layer >= d_->layers.size()) {
    return invalid_argument_error("dense executor: layer " + std::to_string(layer) +
                                  " out of range");
  }
  return Status();
}

Status CudaDenseExecutor::begin(const DenseBatch& b) {
  Device& d = *d_;
  n_tokens_ = 0;
  const size_t n = b.n_tokens;
  const size_t hidden = spec_.hidden_size;
  if (n == 0 || n > info_.max_batch_tokens || b.x.size() != n * hidden || b.positions.size() != n ||
      b.token_seq.size() != n || b.kv_slots.size() != n || b.table_begin.size() != b.seqs.size() ||
      b.seqs.empty() || b.seqs.size() > n ||
      (rings_.slots > 0 && (b.ring_slots.size() != n || b.ring_tables.size() != b.tables.size()))) {
    return invalid_argument_error("dense executor: batch of " + std::to_string(n) +
                                  " tokens is malformed or beyond max_batch_tokens " +
                                  std::to_string(info_.max_batch_tokens));
  }
  TANDEM_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device), "cudaSetDevice");
  // A failed pass may have left copies from the staging buffers in flight.
  TANDEM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(d.stream), "cudaStreamSynchronize");
  const size_t table_entries = b.tables.size() + b.ring_tables.size();
  if (table_entries > d.table_capacity) {  // only when tables share blocks (forks)
    const size_t cap = std::max(table_entries, 2 * d.table_capacity);
    if (d.own_tables != nullptr) cudaFree(d.own_tables);
    if (d.own_pin_tables != nullptr) cudaFreeHost(d.own_pin_tables);
    d.own_tables = nullptr;
    d.own_pin_tables = nullptr;
    // Back to the regions inside scratch / pinned until the new buffers exist, so a failed
    // allocation below leaves no pointer to freed memory.
    d.tables = d.i(d.s.tables);
    d.pin_tables = d.pi(d.s.pin_tables);
    d.table_capacity = d.s.table_capacity;
    TANDEM_RETURN_IF_ERROR(
        device_alloc(&d.own_tables, cap * sizeof(int32_t), "block tables", d.device));
    TANDEM_CUDA_RETURN_IF_ERROR(
        cudaHostAlloc(&d.own_pin_tables, cap * sizeof(int32_t), cudaHostAllocDefault),
        "cudaHostAlloc of block tables");
    d.tables = static_cast<int32_t*>(d.own_tables);
    d.pin_tables = static_cast<int32_t*>(d.own_pin_tables);
    d.table_capacity = cap;
  }
  const size_t T = info_.max_batch_tokens;
  float* pin_x = d.pf(d.s.pin_act);
  int32_t* pin_ints = d.pi(d.s.pin_ints);
  // std::copy, not memcpy: a model without rings passes empty vectors, whose data() may be null.
  std::copy_n(b.x.data(), n * hidden, pin_x);
  std::copy_n(b.positions.data(), n, pin_ints);
  std::copy_n(b.token_seq.data(), n, pin_ints + T);
  std::copy_n(b.kv_slots.data(), n, pin_ints + 2 * T);
  std::copy(b.table_begin.begin(), b.table_begin.end(), pin_ints + 3 * T);
  std::copy(b.ring_slots.begin(), b.ring_slots.end(), pin_ints + 4 * T);
  std::copy(b.tables.begin(), b.tables.end(), d.pin_tables);
  std::copy(b.ring_tables.begin(), b.ring_tables.end(), d.pin_tables + b.tables.size());
  d.ring_tables_at = b.tables.size();
  const auto h2d = cudaMemcpyHostToDevice;
  TANDEM_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(d.f(d.s.x), pin_x, n * hidden * sizeof(float), h2d, d.stream), "upload x");
  const std::pair<uint64_t, size_t> ints[] = {{d.s.positions, n},
                                              {d.s.token_seq, n},
                                              {d.s.slots, n},
                                              {d.s.table_begin, b.table_begin.size()},
                                              {d.s.ring_slots, b.ring_slots.size()}};
  for (size_t k = 0; k < 5; ++k) {
    if (ints[k].second == 0) continue;
    TANDEM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(d.i(ints[k].first), pin_ints + k * T,
                                                ints[k].second * sizeof(int32_t), h2d, d.stream),
                                "upload batch indices");
  }
  if (table_entries > 0) {
    TANDEM_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(d.tables, d.pin_tables, table_entries * sizeof(int32_t), h2d, d.stream),
        "upload block tables");
  }
  d.n_seqs = b.seqs.size();
  n_tokens_ = n;
  return Status();
}

Status CudaDenseExecutor::attention(size_t layer) {
  TANDEM_RETURN_IF_ERROR(check_layer(layer));
  if (spec_.attention == model::AttentionKind::kMla) return mla_attention(layer);
  Device& d = *d_;
  const DeviceLayerRefs& L = d.layers[layer];
  const size_t n = n_tokens_;
  const size_t hidden = spec_.hidden_size, q_dim = spec_.q_dim(), kv_dim = spec_.kv_dim();
  const size_t hd = spec_.head_dim;
  const float eps = static_cast<float>(spec_.rms_norm_eps);
  void* st = d.stream;
  TANDEM_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device), "cudaSetDevice");
  float* x = d.f(d.s.x);
  float* h = d.f(d.s.h);
  float* q = d.f(d.s.q);
  float* k = d.f(d.s.k);
  float* v = d.f(d.s.v);
  TANDEM_RETURN_IF_ERROR(
      kc::rms_norm_enqueue(x, d.vec(L.vector(R::kAttnNorm)), eps, n, hidden, h, st));
  TANDEM_RETURN_IF_ERROR(kc::matmul_enqueue(d.mat(L.matrix(R::kAttnQ)), h, n, q, st));
  TANDEM_RETURN_IF_ERROR(kc::matmul_enqueue(d.mat(L.matrix(R::kAttnK)), h, n, k, st));
  TANDEM_RETURN_IF_ERROR(kc::matmul_enqueue(d.mat(L.matrix(R::kAttnV)), h, n, v, st));
  if (L.vector(R::kAttnQBias).present()) {
    TANDEM_RETURN_IF_ERROR(kc::add_row_enqueue(q, d.vec(L.vector(R::kAttnQBias)), n, q_dim, st));
  }
  if (L.vector(R::kAttnKBias).present()) {
    TANDEM_RETURN_IF_ERROR(kc::add_row_enqueue(k, d.vec(L.vector(R::kAttnKBias)), n, kv_dim, st));
  }
  if (L.vector(R::kAttnVBias).present()) {
    TANDEM_RETURN_IF_ERROR(kc::add_row_enqueue(v, d.vec(L.vector(R::kAttnVBias)), n, kv_dim, st));
  }
  if (spec_.qk_norm == model::QkNorm::kPerHead) {
    TANDEM_RETURN_IF_ERROR(
        kc::rms_norm_enqueue(q, d.vec(L.vector(R::kAttnQNorm)), eps, n * spec_.n_heads, hd, q, st));
    TANDEM_RETURN_IF_ERROR(kc::rms_norm_enqueue(k, d.vec(L.vector(R::kAttnKNorm)), eps,
                                                n * spec_.n_kv_heads, hd, k, st));
  } else if (spec_.qk_norm == model::QkNorm::kWholeProjection) {
    TANDEM_RETURN_IF_ERROR(
        kc::rms_norm_enqueue(q, d.vec(L.vector(R::kAttnQNorm)), eps, n, q_dim, q, st));
    TANDEM_RETURN_IF_ERROR(
        kc::rms_norm_enqueue(k, d.vec(L.vector(R::kAttnKNorm)), eps, n, kv_dim, k, st));
  }
  const kc::DeviceRope rope = kc::device_rope(rope_config(spec_, layer));
  const int32_t* positions = d.i(d.s.positions);
  TANDEM_RETURN_IF_ERROR(kc::rope_enqueue(q, n, spec_.n_heads, positions, rope, st));
  TANDEM_RETURN_IF_ERROR(kc::rope_enqueue(k, n, spec_.n_kv_heads, positions, rope, st));

  const kc::DeviceKvLayer kv = d.kv_layer(layer, *pool_);
  TANDEM_RETURN_IF_ERROR(kc::kv_write_enqueue(kv, k, v, d.kv_slots(layer), n, st));
  const kc::DeviceAttentionBatch batch = d.attention_batch(n, layer);
  kc::DeviceAttentionShape shape;
  shape.n_heads = spec_.n_heads;
  shape.n_kv_heads = spec_.n_kv_heads;
  shape.head_dim = hd;
  shape.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  shape.window = static_cast<size_t>(spec_.attention_window(layer));
  if (L.vector(R::kAttnSinks).present()) shape.sinks = d.vec(L.vector(R::kAttnSinks));
  float* attn = d.f(d.s.attn);
  TANDEM_RETURN_IF_ERROR(kc::attention_enqueue(q, kv, batch, shape, attn, st));
  float* o = d.f(d.s.tmp);
  TANDEM_RETURN_IF_ERROR(kc::matmul_enqueue(d.mat(L.matrix(R::kAttnO)), attn, n, o, st));
  if (L.vector(R::kAttnOBias).present()) {
    TANDEM_RETURN_IF_ERROR(kc::add_row_enqueue(o, d.vec(L.vector(R::kAttnOBias)), n, hidden, st));
  }
  return kc::add_enqueue(x, o, n * hidden, x, st);
}

Status CudaDenseExecutor::swiglu(const DeviceMatrixRef& gate, const DeviceMatrixRef& up,
                                 const DeviceMatrixRef& down, const float* h, size_t n,
                                 float* out) {
  const Device& d = *d_;
  void* st = d.stream;
  float* a = d.f(d.s.ffn_a);
  float* b = d.f(d.s.ffn_b);
  TANDEM_RETURN_IF_ERROR(kc::matmul_enqueue(d.mat(gate), h, n, a, st));
  TANDEM_RETURN_IF_ERROR(kc::matmul_enqueue(d.mat(up), h, n, b, st));
  TANDEM_RETURN_IF_ERROR(kc::silu_mul_enqueue(a, b, n * gate.rows, a, st));
  return kc::matmul_enqueue(d.mat(down), a, n, out, st);
}

Status CudaDenseExecutor::dense_ffn(size_t layer) {
  TANDEM_RETURN_IF_ERROR(check_layer(layer));
  Device& d = *d_;
  const DeviceLayerRefs& L = d.layers[layer];
  if (L.moe) return invalid_argument_error("dense_ffn on MoE layer " + std::to_string(layer));
  const size_t n = n_tokens_;
  const size_t hidden = spec_.hidden_size;
  TANDEM_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device), "cudaSetDevice");
  float* x = d.f(d.s.x);
  float* h = d.f(d.s.h);
  float* ffn = d.f(d.s.tmp);
  TANDEM_RETURN_IF_ERROR(kc::rms_norm_enqueue(x, d.vec(L.vector(R::kFfnNorm)),
                                              static_cast<float>(spec_.rms_norm_eps), n, hidden, h,
                                              d.stream));
  TANDEM_RETURN_IF_ERROR(
      swiglu(L.matrix(R::kDenseGate), L.matrix(R::kDenseUp), L.matrix(R::kDenseDown), h, n, ffn));
  return kc::add_enqueue(x, ffn, n * hidden, x, d.stream);
}

Status CudaDenseExecutor::moe_input(size_t layer, std::span<float> h_out,
                                    std::span<float> router_out) {
  TANDEM_RETURN_IF_ERROR(check_layer(layer));
  Device& d = *d_;
  const DeviceLayerRefs& L = d.layers[layer];
  const size_t n = n_tokens_;
  const size_t hidden = spec_.hidden_size;
  const size_t n_experts = spec_.n_experts;
  if (!L.moe || h_out.size() != n * hidden || router_out.size() != n * n_experts) {
    return invalid_argument_error("moe_input: layer " + std::to_string(layer) +
                                  " is not MoE or the output sizes are wrong");
  }
  TANDEM_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device), "cudaSetDevice");
  float* h = d.f(d.s.h);
  float* router = d.f(d.s.router);
  TANDEM_RETURN_IF_ERROR(kc::rms_norm_enqueue(d.f(d.s.x), d.vec(L.vector(R::kFfnNorm)),
                                              static_cast<float>(spec_.rms_norm_eps), n, hidden, h,
                                              d.stream));
  TANDEM_RETURN_IF_ERROR(kc::matmul_enqueue(d.mat(L.matrix(R::kRouter)), h, n, router, d.stream));
  if (L.vector(R::kRouterBias).present()) {
    TANDEM_RETURN_IF_ERROR(
        kc::add_row_enqueue(router, d.vec(L.vector(R::kRouterBias)), n, n_experts, d.stream));
  }
  float* pin_h = d.pf(d.s.pin_act);
  float* pin_r = d.pf(d.s.pin_router);
  const auto d2h = cudaMemcpyDeviceToHost;
  TANDEM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(pin_h, h, n * hidden * sizeof(float), d2h, d.stream),
                              "download h");
  TANDEM_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(pin_r, router, n * n_experts * sizeof(float), d2h, d.stream),
      "download router logits");
  TANDEM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(d.stream), "cudaStreamSynchronize");
  std::memcpy(h_out.data(), pin_h, h_out.size() * sizeof(float));
  std::memcpy(router_out.data(), pin_r, router_out.size() * sizeof(float));
  return Status();
}

Status CudaDenseExecutor::moe_output(size_t layer, std::span<const float> moe_sum) {
  TANDEM_RETURN_IF_ERROR(check_layer(layer));
  Device& d = *d_;
  const DeviceLayerRefs& L = d.layers[layer];
  const size_t n = n_tokens_;
  const size_t hidden = spec_.hidden_size;
  if (!L.moe || moe_sum.size() != n * hidden) {
    return invalid_argument_error("moe_output: layer " + std::to_string(layer) +
                                  " is not MoE or the input size is wrong");
  }
  TANDEM_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device), "cudaSetDevice");
  // moe_input synchronised the stream: nothing still reads the staging buffer.
  float* pin = d.pf(d.s.pin_act);
  std::memcpy(pin, moe_sum.data(), moe_sum.size() * sizeof(float));
  float* ffn = d.f(d.s.tmp);
  TANDEM_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(ffn, pin, n * hidden * sizeof(float), cudaMemcpyHostToDevice, d.stream),
      "upload the MoE sum");
  if (L.matrix(R::kSharedGate).present()) {
    const float* h = d.f(d.s.h);
    float* shared = d.f(d.s.shared);
    TANDEM_RETURN_IF_ERROR(swiglu(L.matrix(R::kSharedGate), L.matrix(R::kSharedUp),
                                  L.matrix(R::kSharedDown), h, n, shared));
    if (L.matrix(R::kSharedExpertGate).present()) {
      float* logit = d.f(d.s.gate_logit);
      TANDEM_RETURN_IF_ERROR(
          kc::matmul_enqueue(d.mat(L.matrix(R::kSharedExpertGate)), h, n, logit, d.stream));
      TANDEM_RETURN_IF_ERROR(kc::scale_rows_by_sigmoid_enqueue(shared, logit, n, hidden, d.stream));
    }
    TANDEM_RETURN_IF_ERROR(kc::add_enqueue(ffn, shared, n * hidden, ffn, d.stream));
  }
  float* x = d.f(d.s.x);
  return kc::add_enqueue(x, ffn, n * hidden, x, d.stream);
}

Status CudaDenseExecutor::logits(std::span<const int32_t> rows, std::span<float> out) {
  if (n_tokens_ == 0) return failed_precondition_error("dense executor: no pass begun");
  Device& d = *d_;
  const size_t hidden = spec_.hidden_size;
  const size_t vocab = d.lm_head.rows;
  if (out.size() != rows.size() * vocab) {
    return invalid_argument_error("logits: output holds " + std::to_string(out.size()) +
                                  " floats, not rows x n_vocab");
  }
  for (int32_t r : rows) {
    if (r < 0 || static_cast<size_t>(r) >= n_tokens_) {
      return invalid_argument_error("logits: row " + std::to_string(r) + " outside the batch");
    }
  }
  TANDEM_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device), "cudaSetDevice");
  const float* x = d.f(d.s.x);
  float* hr = d.f(d.s.head_rows);
  float* dev_logits = d.f(d.s.logits);
  float* pin = d.pf(d.s.pin_logits);
  const size_t row_bytes = hidden * sizeof(float);
  for (size_t r0 = 0; r0 < rows.size(); r0 += d.s.logit_chunk) {
    const size_t c = std::min(d.s.logit_chunk, rows.size() - r0);
    for (size_t i = 0; i < c;) {  // gather runs of consecutive rows
      size_t run = 1;
      while (i + run < c && rows[r0 + i + run] == rows[r0 + i] + static_cast<int32_t>(run)) ++run;
      TANDEM_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(hr + i * hidden, x + static_cast<size_t>(rows[r0 + i]) * hidden,
                          run * row_bytes, cudaMemcpyDeviceToDevice, d.stream),
          "gather logit rows");
      i += run;
    }
    TANDEM_RETURN_IF_ERROR(kc::rms_norm_enqueue(
        hr, d.vec(d.output_norm), static_cast<float>(spec_.rms_norm_eps), c, hidden, hr, d.stream));
    TANDEM_RETURN_IF_ERROR(kc::matmul_enqueue(d.mat(d.lm_head), hr, c, dev_logits, d.stream));
    TANDEM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(pin, dev_logits, c * vocab * sizeof(float),
                                                cudaMemcpyDeviceToHost, d.stream),
                                "download logits");
    TANDEM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(d.stream), "cudaStreamSynchronize");
    std::memcpy(out.data() + r0 * vocab, pin, c * vocab * sizeof(float));
  }
  // Surface faults of a pass without logit rows too.
  TANDEM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(d.stream), "cudaStreamSynchronize");
  n_tokens_ = 0;
  return Status();
}

Status CudaDenseExecutor::copy_block(BlockId src, BlockId dst) {
  Device& d = *d_;
  const size_t n_blocks = pool_->n_blocks();
  if (src < 0 || dst < 0 || static_cast<size_t>(src) >= n_blocks ||
      static_cast<size_t>(dst) >= n_blocks || src == dst) {
    return invalid_argument_error("copy_block: blocks " + std::to_string(src) + " -> " +
                                  std::to_string(dst) + " out of range");
  }
  TANDEM_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device), "cudaSetDevice");
  const size_t block = pool_->block_tokens() * pool_->kv_dim() * kernels::kv_type_bytes(d.kv_type);
  // Every plane of every mirrored layer (a sequence's window rings are its own).
  const size_t mirrored = rings_.slots > 0 ? pool_->n_layers() : spec_.n_layers;
  for (size_t l = 0; l < d.kv_planes * mirrored; ++l) {
    uint8_t* base = d.kv + l * d.kv_plane_bytes;
    TANDEM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(base + static_cast<size_t>(dst) * block,
                                                base + static_cast<size_t>(src) * block, block,
                                                cudaMemcpyDeviceToDevice, d.stream),
                                "KV block copy");
  }
  return Status();
}

Result<CudaDenseInfo> enable_cuda_dense(Scheduler& scheduler, const CudaDenseOptions& options) {
  if (scheduler.running()) {
    return failed_precondition_error("enable_cuda_dense must run before the scheduler starts");
  }
  ModelRunner& runner = scheduler.runner();
  CudaDenseOptions o = options;
  const auto limit = static_cast<size_t>(std::max<int64_t>(1, scheduler.limits().max_batch_tokens));
  if (o.max_batch_tokens == 0) o.max_batch_tokens = limit;
  if (o.window_rings.slots == 0 && scheduler.kv_pool().n_layers() == runner.kv_layout().n_full) {
    o.window_rings = device_window_rings(runner.kv_layout(), scheduler.limits(),
                                         scheduler.kv_pool().block_tokens());
  }
  if (o.max_batch_tokens < limit) {
    return invalid_argument_error(
        "CUDA dense max_batch_tokens " + std::to_string(o.max_batch_tokens) +
        " is below the scheduler's max_batch_tokens " + std::to_string(limit));
  }
  TANDEM_ASSIGN_OR_RETURN(
      std::unique_ptr<CudaDenseExecutor> executor,
      CudaDenseExecutor::create(runner.spec(), runner.model_weights(), scheduler.kv_pool(), o));
  const CudaDenseInfo info = executor->info();
  TANDEM_RETURN_IF_ERROR(runner.set_dense_executor(std::move(executor)));
  return info;
}

}  // namespace tandem::runtime
