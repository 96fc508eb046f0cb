// Causal GQA attention scalar reference over contiguous or block-table (paged) KV rows (f32, or
// f16 converted run by run; in a prefill each kv head gathered once), with sliding window and
// attention sinks.
#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "base/check.h"
#include "kernels/cpu/attention_rows.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/vector_ops.h"

namespace tandem::kernels {
namespace {

// The first position the query at position t sees (attention.h's lo(t)).
size_t window_start(size_t t, size_t window) {
  return window == 0 || t < window ? 0 : t + 1 - window;
}

// The inner loops' variant for this CPU (attention_rows.h): AVX-512 where it runs, else AVX2,
// else scalar. All give the same bits.
struct RowKernels {
  decltype(&detail::attention_scores_scalar) scores;
  decltype(&detail::attention_accumulate_scalar) accumulate;
};

const RowKernels& row_kernels() {
#ifdef TANDEM_MATMUL_X86
  const CpuFeatures& f = cpu_features();
  static const RowKernels kernels =
      f.avx512f && f.avx2
          ? RowKernels{detail::attention_scores_avx512, detail::attention_accumulate_avx512}
      : f.avx2 ? RowKernels{detail::attention_scores_avx2, detail::attention_accumulate_avx2}
               : RowKernels{detail::attention_scores_scalar, detail::attention_accumulate_scalar};
#else
  static const RowKernels kernels{detail::attention_scores_scalar,
                                  detail::attention_accumulate_scalar};
#endif
  return kernels;
}

}  // namespace

namespace detail {

// attention_rows.h's dot: 8 lanes of fused multiply-adds, dot_f32's reduction.
float dot_fused(const float* a, const float* b, size_t n) {
  float acc[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (size_t l = 0; l < 8; ++l) acc[l] = std::fma(a[i + l], b[i + l], acc[l]);
  }
  for (; i < n; ++i) acc[i % 8] = std::fma(a[i], b[i], acc[i % 8]);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

void attention_scores_scalar(const float* q, size_t n_heads, const float* k, size_t k_stride,
                             size_t n_rows, size_t dim, float scale, float* scores, size_t stride) {
  for (size_t r = 0; r < n_rows; ++r) {
    for (size_t h = 0; h < n_heads; ++h) {
      scores[h * stride + r] = scale * dot_fused(q + h * dim, k + r * k_stride, dim);
    }
  }
}

void attention_accumulate_scalar(const float* w, size_t stride, size_t n_heads, const float* v,
                                 size_t v_stride, size_t n_rows, size_t vdim, float* out) {
  for (size_t r = 0; r < n_rows; ++r) {
    for (size_t h = 0; h < n_heads; ++h) {
      const float wh = w[h * stride + r];
      float* o = out + h * vdim;
      for (size_t d = 0; d < vdim; ++d) o[d] = std::fma(wh, v[r * v_stride + d], o[d]);
    }
  }
}

}  // namespace detail

void attention_heads(std::span<const float> q, size_t n_q, size_t start_pos, const KvBlocks& kv,
                     const AttentionConfig& config, std::span<float> out, size_t head_begin,
                     size_t head_end) {
  const size_t n_heads = config.n_heads;
  const size_t n_kv = config.n_kv_heads;
  const size_t dim = config.head_dim;
  const size_t vdim = config.value_dim != 0 ? config.value_dim : dim;
  const size_t window = config.window;
  TANDEM_CHECK(n_heads > 0 && n_kv > 0 && dim > 0 && n_heads % n_kv == 0 && vdim <= dim);
  TANDEM_CHECK(q.size() == n_q * n_heads * dim && out.size() == n_q * n_heads * vdim);
  TANDEM_CHECK(head_begin <= head_end && head_end <= n_heads);
  TANDEM_CHECK(config.sinks.empty() || config.sinks.size() == n_heads);
  if (n_q == 0) return;
  const size_t rows = kv.block_rows;
  TANDEM_CHECK(kv.keys != nullptr && kv.values != nullptr && rows > 0);
  const size_t n_ctx = start_pos + n_q;
  const size_t used_blocks = (n_ctx + rows - 1) / rows;
  TANDEM_CHECK(kv.table.size() >= used_blocks);
  // Only blocks from the first query's window start on are read; earlier entries may be freed.
  for (size_t b = window_start(start_pos, window) / rows; b < used_blocks; ++b) {
    TANDEM_CHECK(kv.table[b] >= 0 && static_cast<size_t>(kv.table[b]) < kv.n_blocks);
  }
  const size_t kv_row = n_kv * dim;
  const size_t block_stride = rows * kv_row;
  const size_t group = n_heads / n_kv;
  const size_t elem = kv_type_bytes(kv.type);
  const bool f32 = kv.type == KvType::kF32;
  // f16 rows are converted to floats a run of at most convert_rows rows at a time (16 KiB of
  // floats: the run stays in L1 while the row kernels read it).
  const size_t convert_rows = f32 ? rows : std::max<size_t>(1, 4096 / dim);
  thread_local std::vector<float> converted;
  // With several queries (a prefill), each kv head's rows from the first query's window start on
  // are gathered once into one contiguous run of floats (f16: converted) for all of them, where
  // they fit kGatherBytes: every query then reads contiguous rows, where it read a head's slice of
  // each cached row (and an f16 prefill of 2,048 tokens converted every row 1,024 times on
  // average). One thread, 32 query heads over 4 KV heads of 128, a 2,048-token prefill on a
  // first-generation Zen EPYC: f32 14.1 -> 23.3 GFLOP/s, f16 16.7 -> 23.3 (attention_bench,
  // BM_AttentionPrefill). The buffers are kept for the thread's next call up to kKeptBytes, and
  // freed above it.
  // Where the values are the keys' leading vdim elements (MLA's latent rows) they are read from
  // the gathered keys.
  const size_t first = window_start(start_pos, window);
  constexpr size_t kGatherBytes = size_t{16} << 20;
  constexpr size_t kKeptBytes = size_t{2} << 20;
  const bool shared_values = kv.values == kv.keys;
  const bool gather_once =
      n_q > 1 &&
      (n_ctx - first) * (dim + (shared_values ? 0 : vdim)) * sizeof(float) <= kGatherBytes;
  thread_local std::vector<float> head_keys;
  thread_local std::vector<float> head_values;
  // The bytes of row p's slice of the kv head at head_off in base (keys or values).
  const auto row_bytes = [&](const void* base, size_t p, size_t head_off) {
    const size_t first_elem =
        static_cast<size_t>(kv.table[p / rows]) * block_stride + (p % rows) * kv_row + head_off;
    return static_cast<const uint8_t*>(base) + first_elem * elem;
  };
  // Rows [p, p + n) of the kv head at head_off in base (all within one block, in block
  // table[p / rows]), `width` elements of each: a pointer to their floats (f16: converted into
  // `converted`) and the stride between rows.
  const auto rows_at = [&](const void* base, size_t p, size_t n, size_t head_off,
                           size_t width) -> std::pair<const float*, size_t> {
    const uint8_t* bytes = row_bytes(base, p, head_off);
    if (f32) return {reinterpret_cast<const float*>(bytes), kv_row};
    converted.resize(n * width);
    for (size_t r = 0; r < n; ++r) {
      const uint8_t* row = bytes + r * kv_row * elem;
      // The same slice n rows on (the next run's row when the block goes on; a prefetch past the
      // storage never faults, and the address is formed as an integer): rows come from memory in
      // a model, where the layer's cache left the CPU caches since the last step. One thread,
      // 4096 positions of 4 x 128 halves per row: 7.6 -> 5.1 ms per layer call on a
      // first-generation Zen EPYC (tests/bench/attention_bench, BM_AttentionDecodeCold).
      const uintptr_t ahead = reinterpret_cast<uintptr_t>(row) + n * kv_row * elem;
      for (size_t b = 0; b < width * elem; b += 64) {
        __builtin_prefetch(reinterpret_cast<const void*>(ahead + b));
      }
      load_kv_elements(kv.type, row, converted.data() + r * width, width);
    }
    return {converted.data(), width};
  };
  // The rows of the run that starts at p, ending at `end`: within one block, at most convert_rows.
  const auto run_rows = [&](size_t p, size_t end) {
    return std::min({rows - p % rows, end - p, convert_rows});
  };
  // Rows [first, n_ctx) of one kv head as floats in head_rows (gather_once), prefetching the
  // slice of the row kConvertAhead rows on within the block as rows_at does.
  constexpr size_t kConvertAhead = 8;
  const auto gather_head = [&](const void* base, size_t head_off, size_t width,
                               std::vector<float>& head_rows) {
    head_rows.resize((n_ctx - first) * width);
    for (size_t p = first; p < n_ctx; ++p) {
      const uint8_t* row = row_bytes(base, p, head_off);
      if (p % rows + kConvertAhead < rows) {
        const uintptr_t ahead = reinterpret_cast<uintptr_t>(row) + kConvertAhead * kv_row * elem;
        for (size_t b = 0; b < width * elem; b += 64) {
          __builtin_prefetch(reinterpret_cast<const void*>(ahead + b));
        }
      }
      load_kv_elements(kv.type, row, head_rows.data() + (p - first) * width, width);
    }
  };
  // Rows [p, end) of a kv head for the row kernels: from the head's gathered rows, `stride`
  // floats apart (gather_once: all of them in one run), else one run of contiguous rows (within a
  // block) at a time.
  const auto kv_run = [&](const void* base, const std::vector<float>& head_rows, size_t stride,
                          size_t p, size_t end, size_t head_off, size_t width, size_t& n_rows) {
    if (gather_once) {
      n_rows = end - p;
      return std::pair<const float*, size_t>(head_rows.data() + (p - first) * stride, stride);
    }
    n_rows = run_rows(p, end);
    return rows_at(base, p, n_rows, head_off, width);
  };
  // Heads that share a kv head are processed together: each cached row is read once per group
  // of heads instead of once per head. Per (token, head) the arithmetic and its order are those
  // of attention.h (scores in ascending position, then the softmax, then the weighted sum in
  // ascending position), so neither the grouping, nor the order of queries and groups, nor where
  // rows come from changes a bit.
  const size_t cap = window == 0 ? n_ctx : std::min(window, n_ctx);
  const RowKernels& row_kernel = row_kernels();
  thread_local std::vector<float> scores;
  // Query i against heads [g0, g1) of one kv head.
  const auto attend = [&](size_t i, size_t g0, size_t g1) {
    const size_t nh = g1 - g0;
    const size_t head_off = g0 / group * dim;
    const size_t t = start_pos + i;
    const size_t lo = window_start(t, window);
    const size_t end = t + 1;
    const size_t n_keys = end - lo;
    scores.resize(nh * cap);
    for (size_t p = lo, n_rows = 0; p < end; p += n_rows) {
      const auto [kp, k_stride] = kv_run(kv.keys, head_keys, dim, p, end, head_off, dim, n_rows);
      row_kernel.scores(q.data() + (i * n_heads + g0) * dim, nh, kp, k_stride, n_rows, dim,
                        config.scale, scores.data() + (p - lo), cap);
    }
    for (size_t hh = 0; hh < nh; ++hh) {
      const std::span<float> row(scores.data() + hh * cap, n_keys);
      softmax(row,
              config.sinks.empty() ? std::nullopt : std::optional<float>(config.sinks[g0 + hh]));
      float* oh = out.data() + (i * n_heads + g0 + hh) * vdim;
      std::fill(oh, oh + vdim, 0.0f);
    }
    for (size_t p = lo, n_rows = 0; p < end; p += n_rows) {
      const auto [vp, v_stride] =
          shared_values ? kv_run(kv.keys, head_keys, dim, p, end, head_off, vdim, n_rows)
                        : kv_run(kv.values, head_values, vdim, p, end, head_off, vdim, n_rows);
      row_kernel.accumulate(scores.data() + (p - lo), cap, nh, vp, v_stride, n_rows, vdim,
                            out.data() + (i * n_heads + g0) * vdim);
    }
  };
  // The end of the group of heads that starts at g0.
  const auto group_end = [&](size_t g0) { return std::min(head_end, (g0 / group + 1) * group); };
  if (gather_once) {
    // Group by group: its kv head's rows gathered, then every query over them.
    for (size_t g0 = head_begin; g0 < head_end; g0 = group_end(g0)) {
      gather_head(kv.keys, g0 / group * dim, dim, head_keys);
      if (!shared_values) gather_head(kv.values, g0 / group * dim, vdim, head_values);
      for (size_t i = 0; i < n_q; ++i) attend(i, g0, group_end(g0));
    }
  } else {
    // Query by query, every group: each query reads whole cached rows, one kv head's slice after
    // the other, rather than one head's strided slices for every query.
    for (size_t i = 0; i < n_q; ++i) {
      for (size_t g0 = head_begin; g0 < head_end; g0 = group_end(g0)) attend(i, g0, group_end(g0));
    }
  }
  if ((head_keys.capacity() + head_values.capacity()) * sizeof(float) > kKeptBytes) {
    head_keys = std::vector<float>();
    head_values = std::vector<float>();
  }
}

void attention_heads(std::span<const float> q, size_t n_q, size_t start_pos,
                     std::span<const float> k_cache, std::span<const float> v_cache,
                     const AttentionConfig& config, std::span<float> out, size_t head_begin,
                     size_t head_end) {
  TANDEM_CHECK(config.n_kv_heads > 0 && config.head_dim > 0);
  const size_t kv_row = config.n_kv_heads * config.head_dim;
  TANDEM_CHECK(k_cache.size() == v_cache.size() && k_cache.size() % kv_row == 0);
  TANDEM_CHECK(k_cache.size() / kv_row >= start_pos + n_q);
  static constexpr int32_t kOneBlock[1] = {0};
  KvBlocks kv;
  kv.keys = k_cache.data();
  kv.values = v_cache.data();
  kv.table = kOneBlock;
  kv.block_rows = k_cache.size() / kv_row;
  kv.n_blocks = 1;
  if (kv.block_rows == 0) return;  // then n_q == 0 (checked above): nothing to compute
  attention_heads(q, n_q, start_pos, kv, config, out, head_begin, head_end);
}

void attention(std::span<const float> q, size_t n_q, size_t start_pos,
               std::span<const float> k_cache, std::span<const float> v_cache,
               const AttentionConfig& config, std::span<float> out) {
  attention_heads(q, n_q, start_pos, k_cache, v_cache, config, out, 0, config.n_heads);
}

}  // namespace tandem::kernels
