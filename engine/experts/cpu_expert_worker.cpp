// CpuExpertWorker: a whole MoE layer's CPU share in three pool phases — gate+up (fused, SiLU·up)
// for every (expert, row block), the hidden activations quantized once, down per (expert, row
// block) — with each token's input quantized once per layer, and the interleaved expert copies.
#include "engine/experts/cpu_expert_worker.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <utility>

#include <spdlog/spdlog.h>

#include "base/check.h"
#include "engine/model/mapped_file.h"
#include "kernels/cpu/dequantize.h"
#include "kernels/cpu/vector_ops.h"

namespace tandem::experts {
namespace {

// Rows of one work item: gate/up rows of a (expert, block) item of phase 1, down rows of phase 3.
// At least kMinGateUpRows / kMinDownRows (multiples of 16, the widest SIMD row group), and
// otherwise as many as still give every thread kItemsPerThread items to balance with: each item
// starts its rows cold (its kernel's prefetches run ahead only inside the item), so in decode,
// where a layer's few experts each see one token and the weights stream from memory, short items
// leave much of each one unprefetched.
constexpr size_t kMinGateUpRows = 32;
constexpr size_t kMinDownRows = 64;
constexpr size_t kItemsPerThread = 4;

size_t rows_per_item(size_t rows, size_t n_active, size_t threads, size_t min_rows) {
  const size_t per = rows * n_active / (threads * kItemsPerThread) / min_rows * min_rows;
  return std::clamp(per, min_rows, std::max(rows, min_rows));
}

// Below this many pairs the quantization of the hidden activations stays on the calling thread.
constexpr size_t kParallelQuantizeRows = 32;

size_t blocks_of(size_t rows, size_t block) {
  return (rows + block - 1) / block;
}

Status same_type(const kernels::WeightMatrix& a, const kernels::WeightMatrix& b, size_t layer,
                 const char* what) {
  if (a.type == b.type) return Status();
  return unimplemented_error("layer " + std::to_string(layer) + ": routed experts mix " +
                             std::string(tensor_type_name(a.type)) + " and " +
                             std::string(tensor_type_name(b.type)) + " " + what +
                             " weights; the CPU expert worker needs one type per projection");
}

}  // namespace

Result<kernels::WeightMatrix> weight_matrix_of(const model::TensorInfo& tensor) {
  uint64_t rows = 0;
  uint64_t cols = 0;
  if (tensor.shape.size() == 2) {
    rows = tensor.shape[0];
    cols = tensor.shape[1];
  } else if (tensor.shape.size() == 1) {
    rows = 1;
    cols = tensor.shape[0];
  } else {
    return invalid_argument_error("tensor " + tensor.name + " is not a matrix");
  }
  auto m = kernels::make_weight_matrix(tensor.type, tensor.data, rows, cols);
  if (!m.ok()) return m.status().with_prefix(tensor.name);
  return m;
}

Result<kernels::WeightMatrix> weight_matrix_of(const model::MatrixView& view) {
  auto m = kernels::make_weight_matrix(view.type, view.data, view.rows, view.cols);
  if (!m.ok() && view.source != nullptr) return m.status().with_prefix(view.source->name);
  return m;
}

Status float_copy_of(const model::TensorInfo* t, std::vector<float>& out) {
  if (t == nullptr) {
    out.clear();
    return Status();
  }
  out.resize(t->n_elements);
  Status s = kernels::dequantize(t->type, t->data, out);
  return s.ok() ? s : s.with_prefix(t->name);
}

Status expert_biases_of(const model::ModelSpec& spec, const model::LayerWeights& lw, size_t layer,
                        std::vector<float>& out) {
  out.clear();
  if (lw[model::WeightRole::kExpertGateBias] == nullptr) return Status();
  std::vector<float> gate, up, down;
  TANDEM_RETURN_IF_ERROR(float_copy_of(lw[model::WeightRole::kExpertGateBias], gate));
  TANDEM_RETURN_IF_ERROR(float_copy_of(lw[model::WeightRole::kExpertUpBias], up));
  TANDEM_RETURN_IF_ERROR(float_copy_of(lw[model::WeightRole::kExpertDownBias], down));
  const size_t n = spec.n_experts;
  if (gate.size() != n * spec.expert_ffn_size || up.size() != n * spec.expert_ffn_size ||
      down.size() != n * spec.hidden_size) {
    return invalid_argument_error("layer " + std::to_string(layer) +
                                  ": expert bias sizes do not match the experts");
  }
  out = std::move(gate);
  out.insert(out.end(), up.begin(), up.end());
  out.insert(out.end(), down.begin(), down.end());
  return Status();
}

namespace {

// The activation between gate/up and down, in place over gate.
void activate(model::ExpertActivation activation, std::span<float> gate,
              std::span<const float> up) {
  if (activation == model::ExpertActivation::kSwiGluOai) {
    kernels::swiglu_oai_mul(gate, up, gate);
  } else {
    kernels::silu_mul(gate, up, gate);
  }
}

void add_bias(float* row, const float* bias, size_t n) {
  if (bias == nullptr) return;
  for (size_t i = 0; i < n; ++i) row[i] += bias[i];
}

// Whether w is copied into its type's interleaved layout: the quantized path meets it and the
// active kernels are faster on that layout.
bool interleaves(const kernels::WeightMatrix& w, kernels::MatmulActivations mode) {
  return kernels::matmul_activation_format(w.type, mode) != kernels::ActivationFormat::kF32 &&
         kernels::interleaved_layout_preferred(w.type);
}

}  // namespace

void CpuExpertWorker::FreeBuffer::operator()(uint8_t* p) const {
  std::free(p);
}

Status CpuExpertWorker::interleave_layer(size_t layer, const std::vector<bool>& plain,
                                         const NumaTopology* numa) {
  constexpr size_t kAlign = 64;  // each copy starts on a cache line
  // The buffer is 2 MiB aligned (so the kernel may back it with transparent huge pages where the
  // system enables them for all memory). It is not asked for them with MADV_HUGEPAGE: on the
  // project's 2-vCPU VM that made startup up to 3.5x slower with no measurable decode gain.
  constexpr size_t kHugePage = size_t{2} << 20;
  std::vector<kernels::WeightMatrix*> matrices;
  for (size_t e = 0; e < layers_[layer].size(); ++e) {
    if (plain[e]) continue;
    ExpertMatrices& m = layers_[layer][e];
    for (kernels::WeightMatrix* w : {&m.gate, &m.up, &m.down}) {
      if (interleaves(*w, mode_)) matrices.push_back(w);
    }
  }
  if (matrices.empty()) return Status();
  std::vector<size_t> offsets(matrices.size() + 1, 0);
  for (size_t i = 0; i < matrices.size(); ++i) {
    const size_t bytes = kernels::interleaved_bytes(*matrices[i]);
    offsets[i + 1] = offsets[i] + (bytes + kAlign - 1) / kAlign * kAlign;
  }
  const size_t size = (offsets.back() + kHugePage - 1) / kHugePage * kHugePage;
  std::unique_ptr<uint8_t, FreeBuffer> buffer(
      static_cast<uint8_t*>(std::aligned_alloc(kHugePage, size)));
  if (buffer == nullptr) {
    return resource_exhausted_error("layer " + std::to_string(layer) + ": cannot allocate " +
                                    std::to_string(size) +
                                    " bytes for the interleaved expert copies");
  }
  uint8_t* base = buffer.get();
  // Untouched yet (aligned_alloc of this size maps fresh pages): the policy decides where each
  // page lands when the copy below first writes it.
  if (numa != nullptr) {
    const Status placed = interleave_over_nodes(base, size, *numa);
    if (!placed.ok()) {
      spdlog::warn("layer {}: the expert copies stay where first written: {}", layer,
                   placed.message());
    }
  }
  std::vector<std::span<const uint8_t>> sources;  // the plain bytes of each matrix
  for (const kernels::WeightMatrix* w : matrices) {
    sources.emplace_back(w->data, w->rows * w->row_bytes);
  }
  run_parallel(matrices.size(), [&](size_t i) {
    kernels::WeightMatrix& w = *matrices[i];
    w = kernels::interleave_rows8(
        w, std::span<uint8_t>(base + offsets[i], kernels::interleaved_bytes(w)),
        kernels::preferred_weight_layout(w.type));
  });
  // The plain bytes are no longer read here: where they are the file's mapped pages they leave the
  // process's resident memory (which would otherwise hold the experts twice), else they are marked
  // cold, so that reclaim takes them first (mapped_file.h).
  model::release_copied_spans(std::move(sources));
  interleaved_[layer] = std::move(buffer);
  interleaved_bytes_ += size;
  return Status();
}

Result<std::unique_ptr<CpuExpertWorker>> CpuExpertWorker::create(const model::ModelSpec& spec,
                                                                 const model::ModelWeights& weights,
                                                                 ThreadPool* pool,
                                                                 kernels::MatmulActivations mode,
                                                                 const ExpertCopies& copies) {
  std::unique_ptr<CpuExpertWorker> worker(new CpuExpertWorker());
  worker->pool_ = pool;
  worker->mode_ = mode;
  worker->activation_ = spec.expert_activation;
  worker->layers_.resize(weights.layers.size());
  worker->biases_.resize(weights.layers.size());
  for (size_t l = 0; l < weights.layers.size(); ++l) {
    const model::LayerWeights& lw = weights.layers[l];
    if (!lw.moe) continue;
    auto& experts = worker->layers_[l];
    experts.resize(spec.n_experts);
    const size_t ffn = spec.expert_ffn_size;
    const size_t hidden = spec.hidden_size;
    TANDEM_RETURN_IF_ERROR(expert_biases_of(spec, lw, l, worker->biases_[l]));
    const bool biased = !worker->biases_[l].empty();
    for (size_t e = 0; e < spec.n_experts; ++e) {
      if (biased) {
        const float* b = worker->biases_[l].data();
        experts[e].gate_bias = b + e * ffn;
        experts[e].up_bias = b + spec.n_experts * ffn + e * ffn;
        experts[e].down_bias = b + 2 * spec.n_experts * ffn + e * hidden;
      }
      TANDEM_ASSIGN_OR_RETURN(experts[e].gate, weight_matrix_of(lw.experts_gate.expert(e)));
      TANDEM_ASSIGN_OR_RETURN(experts[e].up, weight_matrix_of(lw.experts_up.expert(e)));
      TANDEM_ASSIGN_OR_RETURN(experts[e].down, weight_matrix_of(lw.experts_down.expert(e)));
      const ExpertMatrices& m = experts[e];
      if (m.gate.rows != m.up.rows || m.gate.cols != m.up.cols || m.down.cols != m.gate.rows) {
        return invalid_argument_error("layer " + std::to_string(l) + " expert " +
                                      std::to_string(e) + ": gate, up and down shapes disagree");
      }
      TANDEM_RETURN_IF_ERROR(same_type(m.gate, m.up, l, "gate and up"));
      TANDEM_RETURN_IF_ERROR(same_type(experts[0].gate, m.gate, l, "gate"));
      TANDEM_RETURN_IF_ERROR(same_type(experts[0].down, m.down, l, "down"));
    }
  }
  worker->interleaved_.resize(weights.layers.size());
  if (copies.interleave) {
    std::vector<std::vector<bool>> plain(weights.layers.size(),
                                         std::vector<bool>(spec.n_experts, false));
    for (const auto& [layer, expert] : copies.plain) {
      if (layer < plain.size() && expert < spec.n_experts) plain[layer][expert] = true;
    }
    for (size_t l = 0; l < weights.layers.size(); ++l) {
      TANDEM_RETURN_IF_ERROR(worker->interleave_layer(l, plain[l], copies.numa));
      if (copies.after_layer) copies.after_layer();
    }
  }
  return worker;
}

void CpuExpertWorker::run_parallel(size_t n_items, const std::function<void(size_t)>& item) {
  auto chunk = [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) item(i);
  };
  if (pool_ == nullptr || pool_->n_threads() == 1 || n_items == 1) {
    chunk(0, n_items);
    return;
  }
  pool_->parallel_for(0, n_items, 1, chunk);
}

Status CpuExpertWorker::run(const ExpertJob& job) {
  TANDEM_CHECK(job.layer < layers_.size() && job.groups != nullptr);
  const auto& experts = layers_[job.layer];
  const ExpertGroups& g = *job.groups;
  const size_t n_active = g.expert_ids.size();
  if (n_active == 0) return Status();
  const size_t hidden = job.hidden;
  const ExpertMatrices& first = experts[static_cast<size_t>(g.expert_ids[0])];
  TANDEM_CHECK(first.gate.cols == hidden && first.down.rows == hidden);
  const size_t ffn = first.gate.rows;
  const size_t n_pairs = g.offsets[n_active];
  const kernels::ActivationFormat in_format =
      kernels::matmul_activation_format(first.gate.type, mode_);
  const kernels::ActivationFormat mid_format =
      kernels::matmul_activation_format(first.down.type, mode_);

  // Each token's input in the gate/up format, once; then gathered per pair (a row copy).
  kernels::quantize_activations(in_format, job.input, job.n_tokens, hidden, tokens_);
  kernels::quantize_activations_resize(in_format, n_pairs, hidden, pair_in_);
  for (size_t j = 0; j < n_pairs; ++j) {
    kernels::copy_activation_row(tokens_, g.pairs[j] / job.k, pair_in_, j);
  }

  // Work item `item` of a phase with `blocks` row blocks of `per` rows (of `rows`) per expert:
  // the expert's matrices, its pairs [p0, p0 + n) and the rows [r0, r1).
  struct Item {
    const ExpertMatrices& m;
    size_t p0, n, r0, r1;
  };
  const auto item_of = [&](size_t item, size_t blocks, size_t per, size_t rows) {
    const size_t i = item / blocks;
    const size_t r0 = (item % blocks) * per;
    return Item{experts[static_cast<size_t>(g.expert_ids[i])], g.offsets[i],
                g.offsets[i + 1] - g.offsets[i], r0, std::min(rows, r0 + per)};
  };

  // Phase 1: h[j] = act(gate x_j + b_g, up x_j + b_u) for pair j, by (expert, block of ffn rows).
  if (hidden_.size() < n_pairs * ffn) hidden_.resize(n_pairs * ffn);
  const size_t threads = pool_ != nullptr ? pool_->n_threads() : 1;
  const size_t up_rows = rows_per_item(ffn, n_active, threads, kMinGateUpRows);
  const size_t up_blocks = blocks_of(ffn, up_rows);
  run_parallel(n_active * up_blocks, [&](size_t item) {
    const auto [m, p0, n, r0, r1] = item_of(item, up_blocks, up_rows, ffn);
    const kernels::ActivationRows x = kernels::view_of(pair_in_, p0, p0 + n);
    thread_local std::vector<float> up;
    if (up.size() < n * up_rows) up.resize(n * up_rows);
    float* gate = hidden_.data() + p0 * ffn + r0;
    kernels::matmul_rows(m.gate, x, gate, ffn, r0, r1);
    kernels::matmul_rows(m.up, x, up.data(), up_rows, r0, r1);
    const float* gate_bias = m.gate_bias != nullptr ? m.gate_bias + r0 : nullptr;
    const float* up_bias = m.up_bias != nullptr ? m.up_bias + r0 : nullptr;
    for (size_t t = 0; t < n; ++t) {
      float* g_row = gate + t * ffn;
      float* u_row = up.data() + t * up_rows;
      add_bias(g_row, gate_bias, r1 - r0);
      add_bias(u_row, up_bias, r1 - r0);
      activate(activation_, std::span<float>(g_row, r1 - r0),
               std::span<const float>(u_row, r1 - r0));
    }
  });

  // Phase 2: the hidden activations in the down format, once.
  kernels::ActivationRows mid_all;
  if (mid_format == kernels::ActivationFormat::kF32) {
    mid_all = kernels::ActivationRows{mid_format, n_pairs, ffn, hidden_.data()};
  } else {
    kernels::quantize_activations_resize(mid_format, n_pairs, ffn, mid_);
    const std::span<const float> h(hidden_.data(), n_pairs * ffn);
    if (n_pairs < kParallelQuantizeRows) {
      kernels::quantize_activation_rows(h, 0, n_pairs, mid_);
    } else {
      constexpr size_t kRowsPerItem = 8;
      run_parallel(blocks_of(n_pairs, kRowsPerItem), [&](size_t item) {
        kernels::quantize_activation_rows(h, item * kRowsPerItem,
                                          std::min(n_pairs, (item + 1) * kRowsPerItem), mid_);
      });
    }
    mid_all = kernels::view_of(mid_);
  }

  // Phase 3: pair_out[pair] = down h[j], by (expert, block of hidden rows), written straight into
  // the pair's output row.
  const size_t down_rows = rows_per_item(hidden, n_active, threads, kMinDownRows);
  const size_t down_blocks = blocks_of(hidden, down_rows);
  run_parallel(n_active * down_blocks, [&](size_t item) {
    const auto [m, p0, n, r0, r1] = item_of(item, down_blocks, down_rows, hidden);
    const kernels::ActivationRows x = kernels::row_range(mid_all, p0, p0 + n);
    thread_local std::vector<float> out;
    if (out.size() < n * down_rows) out.resize(n * down_rows);
    kernels::matmul_rows(m.down, x, out.data(), down_rows, r0, r1);
    const float* down_bias = m.down_bias != nullptr ? m.down_bias + r0 : nullptr;
    for (size_t t = 0; t < n; ++t) {
      add_bias(out.data() + t * down_rows, down_bias, r1 - r0);
      std::copy_n(out.data() + t * down_rows, r1 - r0,
                  job.pair_out.data() + static_cast<size_t>(g.pairs[p0 + t]) * hidden + r0);
    }
  });
  return Status();
}

}  // namespace tandem::experts
