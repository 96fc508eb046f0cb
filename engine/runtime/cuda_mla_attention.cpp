// CudaDenseExecutor::mla_attention: DeepSeek's multi-head latent attention on the device, in the
// absorbed form of the CPU path (mla_attention_layer.cpp), step for step: the cache holds one
// row per token, [rmsnorm(c_kv) | rope(k_pe)] (kv_lora_rank + qk_rope floats), shared by every
// head; each head's query is [k_b q_nope | rope(q_pe)]; the head's output is v_b applied to the
// softmax-weighted latent. The CPU's expanded form for long prefills has no device counterpart:
// the device runs the absorbed form for every batch (the same arithmetic the GGUF references use).
#include <cuda_runtime.h>

#include "engine/runtime/cuda_dense_device.h"
#include "engine/runtime/cuda_dense_executor.h"
#include "engine/runtime/model_runner.h"
#include "kernels/cpu/rope.h"
#include "kernels/cuda/cuda_status.h"
#include "kernels/cuda/dense_ops.h"

namespace tandem::runtime {

using R = model::WeightRole;
namespace kc = kernels::cuda;
namespace {

// One matrix per head over [tokens x heads x in_head] inputs and [tokens x heads x out_head]
// outputs (out_head may be wider than the matrix's rows: the rest of each head is left alone).
kc::MatmulBatch per_head(size_t heads, size_t in_head, size_t out_head) {
  kc::MatmulBatch b;
  b.n_batches = heads;
  b.x_ld = heads * in_head;
  b.x_batch = in_head;
  b.y_ld = heads * out_head;
  b.y_batch = out_head;
  return b;
}

}  // namespace

Status CudaDenseExecutor::mla_attention(size_t layer) {
  Device& d = *d_;
  const DeviceLayerRefs& L = d.layers[layer];
  const model::MlaSpec& m = spec_.mla;
  const size_t n = n_tokens_;
  const size_t hidden = spec_.hidden_size;
  const size_t heads = spec_.n_heads;
  const size_t lora = m.kv_lora_rank;
  const size_t rope_dim = m.qk_rope_dim;
  const size_t nope = m.qk_nope_dim;
  const size_t q_head = m.q_head_dim();
  const size_t row = m.cache_row();  // = spec_.head_dim
  const size_t v_head = m.v_head_dim;
  const float eps = static_cast<float>(spec_.rms_norm_eps);
  void* st = d.stream;
  TANDEM_CUDA_RETURN_IF_ERROR(cudaSetDevice(d.device), "cudaSetDevice");
  float* x = d.f(d.s.x);
  float* h = d.f(d.s.h);
  float* q_raw = d.f(d.s.mla_q);  // [n x heads x q_head]
  float* q_abs = d.f(d.s.q);      // [n x heads x row]
  float* kv = d.f(d.s.k);         // [n x row]
  float* latent = d.f(d.s.attn);  // [n x heads x lora]
  float* heads_out = d.f(d.s.mla_heads);
  TANDEM_RETURN_IF_ERROR(
      kc::rms_norm_enqueue(x, d.vec(L.vector(R::kAttnNorm)), eps, n, hidden, h, st));

  // Queries, through the low-rank q when the model has one.
  if (m.q_lora_rank > 0) {
    float* qa = d.f(d.s.mla_qa);
    TANDEM_RETURN_IF_ERROR(kc::matmul_enqueue(d.mat(L.matrix(R::kAttnQA)), h, n, qa, st));
    TANDEM_RETURN_IF_ERROR(
        kc::rms_norm_enqueue(qa, d.vec(L.vector(R::kAttnQANorm)), eps, n, m.q_lora_rank, qa, st));
    TANDEM_RETURN_IF_ERROR(kc::matmul_enqueue(d.mat(L.matrix(R::kAttnQB)), qa, n, q_raw, st));
  } else {
    TANDEM_RETURN_IF_ERROR(kc::matmul_enqueue(d.mat(L.matrix(R::kAttnQ)), h, n, q_raw, st));
  }

  // The cache rows: [c_kv | k_pe] from one projection; c_kv normed, k_pe rotated in place.
  TANDEM_RETURN_IF_ERROR(kc::matmul_enqueue(d.mat(L.matrix(R::kAttnKvA)), h, n, kv, st));
  TANDEM_RETURN_IF_ERROR(kc::rms_norm_strided_enqueue(kv, d.vec(L.vector(R::kAttnKvANorm)), eps, n,
                                                      lora, row, kv, st));
  kernels::RopeConfig rope_cpu = rope_config(spec_, layer);
  rope_cpu.head_dim = rope_dim;
  rope_cpu.rot_dims = rope_dim;
  kc::DeviceRope rope = kc::device_rope(rope_cpu);
  const int32_t* positions = d.i(d.s.positions);
  rope.head_dim = row;
  rope.offset = lora;
  TANDEM_RETURN_IF_ERROR(kc::rope_enqueue(kv, n, 1, positions, rope, st));
  // q_pe in place (the last rope_dim floats of each head's projected query).
  rope.head_dim = q_head;
  rope.offset = nope;
  TANDEM_RETURN_IF_ERROR(kc::rope_enqueue(q_raw, n, heads, positions, rope, st));

  // Absorbed queries [n x heads x row]: q_pe copied behind the latent part, q_nope mapped into
  // the latent by each head's k_b.
  TANDEM_CUDA_RETURN_IF_ERROR(
      cudaMemcpy2DAsync(q_abs + lora, row * sizeof(float), q_raw + nope, q_head * sizeof(float),
                        rope_dim * sizeof(float), n * heads, cudaMemcpyDeviceToDevice,
                        static_cast<cudaStream_t>(st)),
      "copy q_pe");
  TANDEM_RETURN_IF_ERROR(
      kc::batched_matmul_enqueue(d.mat(L.k_b), per_head(heads, q_head, row), q_raw, n, q_abs, st));

  const kc::DeviceKvLayer cache = d.kv_layer(layer, *pool_);
  TANDEM_RETURN_IF_ERROR(kc::kv_write_enqueue(cache, kv, nullptr, d.kv_slots(layer), n, st));
  kc::DeviceAttentionShape shape;
  shape.n_heads = heads;
  shape.n_kv_heads = 1;
  shape.head_dim = row;
  shape.value_dim = lora;
  shape.scale = static_cast<float>(spec_.attn_scale);
  TANDEM_RETURN_IF_ERROR(
      kc::attention_enqueue(q_abs, cache, d.attention_batch(n, layer), shape, latent, st));

  // Each head's latent output back to its value space, then the output projection.
  TANDEM_RETURN_IF_ERROR(kc::batched_matmul_enqueue(d.mat(L.v_b), per_head(heads, lora, v_head),
                                                    latent, n, heads_out, st));
  float* o = d.f(d.s.tmp);
  TANDEM_RETURN_IF_ERROR(kc::matmul_enqueue(d.mat(L.matrix(R::kAttnO)), heads_out, n, o, st));
  return kc::add_enqueue(x, o, n * hidden, x, st);
}

}  // namespace tandem::runtime
