// The CUDA ops MLA's absorbed attention is built from (tag [cuda]), against the CPU reference
// kernels: per-head matrices over strided columns, a norm over the leading part of each row, RoPE
// on the trailing part of each head, attention over a keys-only latent cache. Without a device each
// case WARNs and returns (tests/kernels/cuda_test_support.h).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/kv_type.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/weight_matrix.h"
#include "kernels/cuda/dense_ops.h"
#include "tests/kernels/cuda_test_support.h"
#include "tests/kernels/random_weights.h"

namespace tandem::kernels::cuda {
namespace {

TEST_CASE("CUDA batched matmul applies each head's matrix to its own columns", "[cuda]") {
  if (!have_device()) return;
  std::mt19937 rng(29);
  const size_t heads = 5, rows = 24, cols = 64;
  // Inputs [t][head][40 + cols ... ] with padding between heads; outputs likewise: the padding
  // (poison 100) must come back unchanged.
  // x_pad 3 keeps the per-element loads; 4 makes every token's and head's columns 16-byte
  // aligned, where F32 / F16 / BF16 take the kernel's 16-byte loads.
  for (const size_t x_pad : {size_t{3}, size_t{4}}) {
    const size_t x_batch = cols + 8, x_ld = heads * x_batch + x_pad;
    const size_t y_batch = rows + 5, y_ld = heads * y_batch + 1;
    for (TensorType type : {TensorType::kF32, TensorType::kF16, TensorType::kBF16,
                            TensorType::kQ8_0, TensorType::kQ5_0}) {
      const std::vector<uint8_t> bytes =
          testing::random_weight_bytes(type, heads * rows, cols, 0.4f, rng);
      auto all = make_weight_matrix(type, bytes, heads * rows, cols);
      REQUIRE(all.ok());
      const size_t head_bytes = bytes.size() / heads;
      const DeviceArray<uint8_t> d_w(bytes);
      for (size_t n : {1, 3, 9, 40}) {
        INFO(tensor_type_name(type) << ", " << n << " tokens, x padding " << x_pad);
        const std::vector<float> x = random_floats(n * x_ld, -1.0f, 1.0f, rng);
        std::vector<float> want(n * y_ld, 100.0f);
        for (size_t j = 0; j < heads; ++j) {
          auto head = make_weight_matrix(
              type, std::span<const uint8_t>(bytes).subspan(j * head_bytes, head_bytes), rows,
              cols);
          REQUIRE(head.ok());
          std::vector<float> xj(n * cols), yj(n * rows);
          for (size_t t = 0; t < n; ++t) {
            std::copy_n(x.begin() + t * x_ld + j * x_batch, cols, xj.begin() + t * cols);
          }
          matmul(head.value(), xj, n, yj);
          for (size_t t = 0; t < n; ++t) {
            std::copy_n(yj.begin() + t * rows, rows, want.begin() + t * y_ld + j * y_batch);
          }
        }
        const DeviceArray<float> d_x(x);
        const DeviceArray<float> d_y(std::vector<float>(n * y_ld, 100.0f));
        const MatmulBatch batch{heads, x_ld, x_batch, y_ld, y_batch};
        REQUIRE(batched_matmul_enqueue(DeviceMatrix{type, d_w.get(), rows, cols}, batch, d_x.get(),
                                       n, d_y.get(), nullptr)
                    .ok());
        // As the matmul case: |x| <= 1, |w| <= ~0.4, 64 terms; the padding must stay 100 exactly.
        expect_close(d_y.download(), want, std::vector<double>(want.size(), 1e-5));
      }
    }
  }
}

TEST_CASE("CUDA strided rms_norm and offset rope touch only their part of each row", "[cuda]") {
  if (!have_device()) return;
  std::mt19937 rng(31);
  const size_t n = 7, lora = 48, rope_dim = 16, row = lora + rope_dim;
  const std::vector<float> x = random_floats(n * row, -2.0f, 2.0f, rng);
  const std::vector<float> weight = random_floats(lora, 0.5f, 1.5f, rng);
  const std::vector<int32_t> positions = {0, 1, 2, 9, 100, 4095, 30000};
  std::vector<float> want = x;
  for (size_t t = 0; t < n; ++t) {
    std::span<float> c(want.data() + t * row, lora);
    rms_norm(c, weight, 1e-6f, 1, lora, c);
  }
  RopeConfig config{RopeLayout::kNormal, rope_dim, rope_dim, 10000.0f};
  config.freq_scale = 1.0f / 40.0f;  // DeepSeek-V3's YaRN
  config.ext_factor = 1.0f;
  config.attn_factor = 1.0f / (1.0f + 0.1f * std::log(40.0f));
  config.n_ctx_orig = 4096;
  std::vector<float> pe(n * rope_dim);
  for (size_t t = 0; t < n; ++t) {
    std::copy_n(want.begin() + t * row + lora, rope_dim, pe.begin() + t * rope_dim);
  }
  rope(pe, n, 1, positions, config);
  for (size_t t = 0; t < n; ++t) {
    std::copy_n(pe.begin() + t * rope_dim, rope_dim, want.begin() + t * row + lora);
  }
  const DeviceArray<float> d_x(x), d_w(weight);
  const DeviceArray<int32_t> d_pos(positions);
  REQUIRE(
      rms_norm_strided_enqueue(d_x.get(), d_w.get(), 1e-6f, n, lora, row, d_x.get(), nullptr).ok());
  DeviceRope r = device_rope(config);
  r.head_dim = row;
  r.offset = lora;
  REQUIRE(rope_enqueue(d_x.get(), n, 1, d_pos.get(), r, nullptr).ok());
  // The norm: float rounding of one sum (1e-6 relative); the rope: 2e-6 as above.
  expect_close(d_x.download(), want, relative_tol(want, 2e-6));
}

TEST_CASE("CUDA attention over a keys-only latent cache (MLA's absorbed form)", "[cuda]") {
  if (!have_device()) return;
  std::mt19937 rng(37);
  struct Shape {
    size_t row, lora;  // latent row (latent + rope floats), values: its leading lora floats
    KvType type;
  };
  // A small latent head; DeepSeek-V3's (512 + 64), in floats and in halves.
  for (const Shape sh : {Shape{40, 32, KvType::kF32}, Shape{576, 512, KvType::kF32},
                         Shape{576, 512, KvType::kF16}}) {
    INFO("row " << sh.row << ", values " << sh.lora << ", " << kv_type_name(sh.type));
    const size_t heads = 4, row = sh.row, lora = sh.lora, block_rows = 3, ctx = 70, n_q = 5;
    const size_t n_blocks = (ctx + block_rows - 1) / block_rows + 1;
    std::vector<int32_t> ids(n_blocks);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    std::vector<int32_t> table(ids.begin(), ids.begin() + (ctx + block_rows - 1) / block_rows);
    std::vector<float> keys(n_blocks * block_rows * row, 100.0f);
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
    for (size_t p = 0; p < ctx; ++p) {
      const size_t r = static_cast<size_t>(table[p / block_rows]) * block_rows + p % block_rows;
      for (size_t c = 0; c < row; ++c) keys[r * row + c] = unit(rng);
    }
    // The cache in its element type; both sides read the same elements.
    std::vector<uint8_t> stored(keys.size() * kv_type_bytes(sh.type));
    store_kv_elements(sh.type, keys.data(), stored.data(), keys.size());
    const std::vector<float> q = random_floats(n_q * heads * row, -1.0f, 1.0f, rng);
    AttentionConfig config;
    config.n_heads = heads;
    config.n_kv_heads = 1;
    config.head_dim = row;
    config.value_dim = lora;
    config.scale = 0.2f / std::sqrt(static_cast<float>(row) / 40.0f);
    std::vector<float> want(n_q * heads * lora);
    KvBlocks blocks{stored.data(), stored.data(), table, block_rows, n_blocks};
    blocks.type = sh.type;
    attention_heads(q, n_q, ctx - n_q, blocks, config, want, 0, heads);

    std::vector<int32_t> token_seq(n_q, 0), token_pos(n_q);
    for (size_t i = 0; i < n_q; ++i) token_pos[i] = static_cast<int32_t>(ctx - n_q + i);
    const std::vector<int32_t> table_begin = {0};
    const DeviceArray<uint8_t> d_keys(stored);
    const DeviceArray<float> d_q(q), d_out(want.size());
    const DeviceArray<int32_t> d_seq(token_seq), d_pos(token_pos), d_begin(table_begin),
        d_table(table);
    const DeviceKvLayer layer{d_keys.get(), d_keys.get(), block_rows, n_blocks, row, sh.type};
    const DeviceAttentionBatch batch{n_q, d_seq.get(), d_pos.get(), d_begin.get(), d_table.get()};
    DeviceAttentionShape shape{heads, 1, row, config.scale};
    shape.value_dim = lora;
    REQUIRE(attention_enqueue(d_q.get(), layer, batch, shape, d_out.get(), nullptr).ok());
    expect_close(d_out.download(), want, std::vector<double>(want.size(), 2e-5));
  }
}

}  // namespace
}  // namespace tandem::kernels::cuda
