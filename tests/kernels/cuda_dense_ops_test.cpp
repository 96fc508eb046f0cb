// The CUDA dense ops (kernels/cuda/dense_ops.h) against the CPU reference kernels (tag [cuda]);
// the CPU kernels are themselves checked against numpy/gguf fixtures in kernels_cpu_test.
//
// Catch2 v2 has no SKIP: without a CUDA device each device case WARNs "no CUDA device: ..." and
// returns (it then counts as passed; the warning is in the test output). The argument-check case
// needs no device: every check it hits runs before any CUDA call.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernels/cpu/activation_rows.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/float_convert.h"
#include "kernels/cpu/kv_type.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/rms_norm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/vector_ops.h"
#include "kernels/cpu/weight_matrix.h"
#include "kernels/cuda/cuda_weight_types.h"
#include "kernels/cuda/dense_ops.h"
#include "kernels/cuda/device_info.h"
#include "tests/kernels/cuda_test_support.h"
#include "tests/kernels/random_weights.h"

#include <cuda_runtime.h>

namespace tandem::kernels::cuda {
namespace {

TEST_CASE("CUDA dense ops reject bad arguments before any CUDA call", "[cuda]") {
  constexpr auto kInvalid = StatusCode::kInvalidArgument;
  float buf[64] = {};
  const int32_t ibuf[4] = {};
  alignas(4) uint8_t bytes[64] = {};
  DeviceMatrix w{TensorType::kF32, bytes, 4, 8};

  // matmul
  for (const CudaWeightType& t : kCudaWeightTypes) {
    INFO(tensor_type_name(t.type));
    CHECK(dense_matmul_supports(t.type));
    // The device code's block constants are the type's traits.
    const auto traits = tensor_type_traits(t.type);
    REQUIRE(traits.has_value());
    CHECK(t.block_elements == traits->block_elements);
    CHECK(t.block_bytes == traits->block_bytes);
    CHECK(cuda_weight_type_names().find(std::string(tensor_type_name(t.type))) !=
          std::string::npos);
  }
  CHECK_FALSE(dense_matmul_supports(TensorType::kIQ4_NL));
  DeviceMatrix bad = w;
  bad.type = TensorType::kIQ4_NL;
  const Status unsupported = matmul_enqueue(bad, buf, 1, buf + 32, nullptr);
  CHECK(unsupported.code() == kInvalid);
  CHECK_THAT(
      std::string(unsupported.message()),
      Catch::Contains("iq4_nl") && Catch::Contains("supported: " + cuda_weight_type_names()));
  for (TensorType kquant : {TensorType::kQ4_K, TensorType::kQ5_K, TensorType::kQ6_K}) {
    bad = w;
    bad.type = kquant;
    bad.cols = 288;  // whole 32-element blocks, but not whole 256-element super-blocks
    const Status st = matmul_enqueue(bad, buf, 1, buf + 32, nullptr);
    CHECK(st.code() == kInvalid);
    CHECK_THAT(std::string(st.message()), Catch::Contains("multiple of 256"));
  }
  for (TensorType legacy : {TensorType::kQ4_0, TensorType::kMXFP4}) {
    bad = w;
    bad.type = legacy;
    bad.cols = 48;
    CHECK(matmul_enqueue(bad, buf, 1, buf + 32, nullptr).code() == kInvalid);
  }
  bad = w;
  bad.rows = 0;
  CHECK(matmul_enqueue(bad, buf, 1, buf + 32, nullptr).code() == kInvalid);
  bad = w;
  bad.cols = 0;
  CHECK(matmul_enqueue(bad, buf, 1, buf + 32, nullptr).code() == kInvalid);
  bad = w;
  bad.type = TensorType::kQ8_0;
  bad.cols = 40;  // not whole 32-element blocks
  CHECK(matmul_enqueue(bad, buf, 1, buf + 32, nullptr).code() == kInvalid);
  CHECK(matmul_enqueue(w, nullptr, 1, buf + 32, nullptr).code() == kInvalid);
  CHECK(matmul_enqueue(w, buf, 1, nullptr, nullptr).code() == kInvalid);
  bad = w;
  bad.data = nullptr;
  CHECK(matmul_enqueue(bad, buf, 1, buf + 32, nullptr).code() == kInvalid);
  bad = w;
  bad.type = TensorType::kF16;
  bad.data = bytes + 1;  // misaligned half
  CHECK(matmul_enqueue(bad, buf, 1, buf + 32, nullptr).code() == kInvalid);
  CHECK(matmul_enqueue(w, buf, 2, buf + 8, nullptr).code() == kInvalid);  // y overlaps x
  CHECK(matmul_enqueue(w, nullptr, 0, nullptr, nullptr).ok());            // no tokens: no work
  // Batched: two 4 x 8 matrices over column ranges of wider rows.
  MatmulBatch mb{2, 20, 10, 12, 6};
  CHECK(batched_matmul_enqueue(w, mb, nullptr, 0, nullptr, nullptr).ok());
  MatmulBatch bad_mb = mb;
  bad_mb.n_batches = 0;
  CHECK(batched_matmul_enqueue(w, bad_mb, buf, 1, buf + 32, nullptr).code() == kInvalid);
  bad_mb = mb;
  bad_mb.x_batch = 7;  // batch 0's 8 columns run into batch 1's
  CHECK(batched_matmul_enqueue(w, bad_mb, buf, 1, buf + 32, nullptr).code() == kInvalid);
  bad_mb = mb;
  bad_mb.y_ld = 9;  // batch 1's rows end at 6 + 4 = 10 > 9
  CHECK(batched_matmul_enqueue(w, bad_mb, buf, 1, buf + 32, nullptr).code() == kInvalid);
  bad_mb = mb;
  bad_mb.n_batches = 70000;
  CHECK(batched_matmul_enqueue(w, bad_mb, buf, 1, buf + 32, nullptr).code() == kInvalid);
  // y overlaps x over the strided spans (x: 20 + 18 floats for 2 tokens).
  CHECK(batched_matmul_enqueue(w, mb, buf, 2, buf + 30, nullptr).code() == kInvalid);

  // rms_norm and element-wise
  CHECK(rms_norm_enqueue(buf, buf, 1e-6f, 2, 0, buf, nullptr).code() == kInvalid);
  CHECK(rms_norm_enqueue(nullptr, buf, 1e-6f, 2, 8, buf, nullptr).code() == kInvalid);
  CHECK(rms_norm_enqueue(buf, nullptr, 1e-6f, 2, 8, buf, nullptr).code() == kInvalid);
  CHECK(rms_norm_enqueue(nullptr, nullptr, 1e-6f, 0, 8, nullptr, nullptr).ok());
  CHECK(rms_norm_strided_enqueue(buf, buf, 1e-6f, 2, 8, 7, buf, nullptr).code() == kInvalid);
  CHECK(rms_norm_strided_enqueue(nullptr, nullptr, 1e-6f, 0, 8, 12, nullptr, nullptr).ok());
  CHECK(add_row_enqueue(buf, buf, 2, 0, nullptr).code() == kInvalid);
  CHECK(add_row_enqueue(nullptr, buf, 2, 4, nullptr).code() == kInvalid);
  CHECK(add_enqueue(buf, nullptr, 4, buf, nullptr).code() == kInvalid);
  CHECK(add_enqueue(nullptr, nullptr, 0, nullptr, nullptr).ok());
  CHECK(silu_mul_enqueue(buf, buf, 4, nullptr, nullptr).code() == kInvalid);
  CHECK(scale_rows_by_sigmoid_enqueue(buf, buf, 2, 0, nullptr).code() == kInvalid);
  CHECK(scale_rows_by_sigmoid_enqueue(buf, nullptr, 2, 4, nullptr).code() == kInvalid);

  // rope
  DeviceRope rope{true, 8, 8, 10000.0f};
  DeviceRope bad_rope = rope;
  bad_rope.rot_dims = 7;
  CHECK(rope_enqueue(buf, 1, 2, ibuf, bad_rope, nullptr).code() == kInvalid);
  bad_rope.rot_dims = 10;  // > head_dim
  CHECK(rope_enqueue(buf, 1, 2, ibuf, bad_rope, nullptr).code() == kInvalid);
  bad_rope.rot_dims = 0;
  CHECK(rope_enqueue(buf, 1, 2, ibuf, bad_rope, nullptr).code() == kInvalid);
  bad_rope = rope;
  bad_rope.head_dim = 0;
  CHECK(rope_enqueue(buf, 1, 2, ibuf, bad_rope, nullptr).code() == kInvalid);
  bad_rope = rope;
  bad_rope.rot_dims = 4;
  bad_rope.offset = 6;  // dims 6 .. 9 of a head of 8
  CHECK(rope_enqueue(buf, 1, 2, ibuf, bad_rope, nullptr).code() == kInvalid);
  CHECK(rope_enqueue(buf, 1, 0, ibuf, rope, nullptr).code() == kInvalid);
  CHECK(rope_enqueue(buf, 1, 2, nullptr, rope, nullptr).code() == kInvalid);

  // kv_write and attention
  DeviceKvLayer kv{buf, buf + 32, 2, 2, 8};
  DeviceKvLayer bad_kv = kv;
  bad_kv.block_rows = 0;
  CHECK(kv_write_enqueue(bad_kv, buf, buf, ibuf, 1, nullptr).code() == kInvalid);
  bad_kv = kv;
  bad_kv.keys = nullptr;
  CHECK(kv_write_enqueue(bad_kv, buf, buf, ibuf, 1, nullptr).code() == kInvalid);
  CHECK(kv_write_enqueue(kv, buf, buf, nullptr, 1, nullptr).code() == kInvalid);
  CHECK(kv_write_enqueue(kv, nullptr, nullptr, nullptr, 0, nullptr).ok());
  CHECK(kv_write_enqueue(kv, buf, nullptr, ibuf, 1, nullptr).code() == kInvalid);  // no values
  DeviceKvLayer keys_only = kv;
  keys_only.values = keys_only.keys;
  CHECK(kv_write_enqueue(keys_only, buf, buf, ibuf, 1, nullptr).code() == kInvalid);

  DeviceAttentionBatch batch{1, ibuf, ibuf, ibuf, ibuf};
  DeviceAttentionShape shape{2, 1, 8, 0.35f};
  float out[16] = {};
  DeviceAttentionShape bad_shape = shape;
  bad_shape.n_kv_heads = 0;
  CHECK(attention_enqueue(buf, kv, batch, bad_shape, out, nullptr).code() == kInvalid);
  bad_shape = shape;
  bad_shape.n_heads = 3;  // not a multiple of n_kv_heads
  bad_shape.n_kv_heads = 2;
  CHECK(attention_enqueue(buf, kv, batch, bad_shape, out, nullptr).code() == kInvalid);
  bad_shape = shape;
  bad_shape.head_dim = kMaxAttentionKeyDim + 1;
  CHECK(attention_enqueue(buf, kv, batch, bad_shape, out, nullptr).code() == kInvalid);
  bad_shape = shape;
  bad_shape.value_dim = 6;  // narrower values need a keys-only layer
  CHECK(attention_enqueue(buf, kv, batch, bad_shape, out, nullptr).code() == kInvalid);
  bad_shape.value_dim = 9;  // wider than the key row
  CHECK(attention_enqueue(buf, keys_only, batch, bad_shape, out, nullptr).code() == kInvalid);
  bad_shape = shape;
  bad_shape.n_kv_heads = 2;  // kv_dim 8 != 2 * 8
  CHECK(attention_enqueue(buf, kv, batch, bad_shape, out, nullptr).code() == kInvalid);
  bad_kv = kv;
  bad_kv.n_blocks = 0;
  CHECK(attention_enqueue(buf, bad_kv, batch, shape, out, nullptr).code() == kInvalid);
  DeviceAttentionBatch bad_batch = batch;
  bad_batch.tables = nullptr;
  CHECK(attention_enqueue(buf, kv, bad_batch, shape, out, nullptr).code() == kInvalid);
  CHECK(attention_enqueue(buf, kv, batch, shape, buf + 8, nullptr).code() == kInvalid);  // overlap
  bad_batch.n_tokens = 0;
  CHECK(attention_enqueue(buf, kv, bad_batch, shape, out, nullptr).ok());
}

TEST_CASE("CUDA matmul matches kernels::matmul for every weight type and token count", "[cuda]") {
  if (!have_device()) return;
  std::mt19937 rng(7);
  struct Shape {
    size_t rows, cols;
  };
  // 96 and 544 are whole 32-element blocks but not multiples of 64 (the tile) or 256 (one decode
  // step of a warp); 333 is odd (F32/F16/BF16 only): a partial group of 8 at the end of each row;
  // 768 is three 256-element super-blocks (every type), with rows not a multiple of 8 or 64.
  // Every type a shape's cols allow (whole blocks) runs on it.
  for (const Shape s : {Shape{70, 96}, Shape{130, 544}, Shape{37, 333}, Shape{45, 768}}) {
    for (const CudaWeightType& wt : kCudaWeightTypes) {
      const TensorType type = wt.type;
      if (s.cols % wt.block_elements != 0) continue;
      const std::vector<uint8_t> bytes =
          testing::random_weight_bytes(type, s.rows, s.cols, 0.4f, rng);
      auto wm = make_weight_matrix(type, bytes, s.rows, s.cols);
      REQUIRE(wm.ok());
      std::vector<float> w_float(s.rows * s.cols);
      weight_rows_to_float(wm.value(), 0, s.rows, w_float);
      const DeviceArray<uint8_t> d_w(bytes);
      const DeviceMatrix dm{type, d_w.get(), s.rows, s.cols};
      for (size_t n : {1, 3, 8, 9, 40, 70}) {
        INFO(tensor_type_name(type) << " " << s.rows << " x " << s.cols << ", " << n << " tokens");
        const std::vector<float> x = random_floats(n * s.cols, -1.0f, 1.0f, rng);
        std::vector<float> want(n * s.rows);
        matmul(wm.value(), x, n, want);
        const DeviceArray<float> d_x(x);
        const DeviceArray<float> d_y(n * s.rows);
        REQUIRE(matmul_enqueue(dm, d_x.get(), n, d_y.get(), nullptr).ok());
        // Each side's float sum of cols products is within cols * 2^-24 * sum |x w| of the exact
        // dot (standard summation bound, any order, FMA or not), so they differ by at most twice
        // that; 2.5x covers the rounding of the bound itself. Dequantized weights are exact on
        // both sides. A dropped or doubled term (~sum / cols) exceeds it by far.
        std::vector<double> tol(n * s.rows);
        for (size_t t = 0; t < n; ++t) {
          for (size_t r = 0; r < s.rows; ++r) {
            double abs_sum = 0.0;
            for (size_t c = 0; c < s.cols; ++c) {
              abs_sum +=
                  std::fabs(static_cast<double>(x[t * s.cols + c]) * w_float[r * s.cols + c]);
            }
            tol[t * s.rows + r] = 2.5 * static_cast<double>(s.cols) * 0x1p-24 * abs_sum + 1e-30;
          }
        }
        expect_close(d_y.download(), want, tol);
      }
    }
  }
}

TEST_CASE("CUDA rms_norm matches kernels::rms_norm, in place and per head", "[cuda]") {
  if (!have_device()) return;
  std::mt19937 rng(11);
  // Both sides sum squares in double (only the order differs) and compute the scale in float in
  // the same steps, so results agree to about one float rounding; 1e-6 * (1 + |want|) is ~8 ulps.
  for (size_t dim : {64, 300, 1000}) {
    INFO("dim " << dim);
    const size_t n_rows = 5;
    const std::vector<float> x = random_floats(n_rows * dim, -2.0f, 2.0f, rng);
    const std::vector<float> weight = random_floats(dim, 0.5f, 1.5f, rng);
    std::vector<float> want(x.size());
    rms_norm(x, weight, 1e-6f, n_rows, dim, want);
    const DeviceArray<float> d_x(x);
    const DeviceArray<float> d_w(weight);
    const DeviceArray<float> d_out(x.size());
    REQUIRE(rms_norm_enqueue(d_x.get(), d_w.get(), 1e-6f, n_rows, dim, d_out.get(), nullptr).ok());
    expect_close(d_out.download(), want, relative_tol(want, 1e-6));
    REQUIRE(rms_norm_enqueue(d_x.get(), d_w.get(), 1e-6f, n_rows, dim, d_x.get(), nullptr).ok());
    expect_close(d_x.download(), want, relative_tol(want, 1e-6));
  }
  SECTION("per head") {
    const size_t n_tokens = 3, n_heads = 4, head_dim = 64;
    const std::vector<float> x = random_floats(n_tokens * n_heads * head_dim, -3.0f, 3.0f, rng);
    const std::vector<float> weight = random_floats(head_dim, 0.5f, 1.5f, rng);
    std::vector<float> want(x.size());
    rms_norm_heads(x, weight, 1e-5f, n_tokens, n_heads, head_dim, want);
    const DeviceArray<float> d_x(x);
    const DeviceArray<float> d_w(weight);
    REQUIRE(rms_norm_enqueue(d_x.get(), d_w.get(), 1e-5f, n_tokens * n_heads, head_dim, d_x.get(),
                             nullptr)
                .ok());
    expect_close(d_x.download(), want, relative_tol(want, 1e-6));
  }
}

TEST_CASE("CUDA element-wise ops match kernels::vector_ops", "[cuda]") {
  if (!have_device()) return;
  std::mt19937 rng(13);
  const size_t n_rows = 7, dim = 1000, n = n_rows * dim;
  const std::vector<float> a = random_floats(n, -4.0f, 4.0f, rng);
  const std::vector<float> b = random_floats(n, -4.0f, 4.0f, rng);
  const std::vector<float> row = random_floats(dim, -1.0f, 1.0f, rng);
  const std::vector<float> logit = random_floats(n_rows, -6.0f, 6.0f, rng);
  // add and add_row are one float addition on both sides (exact match expected; 1e-7 relative
  // allows nothing more than a rounding). silu_mul and the sigmoid scale use expf, which CUDA
  // computes to within 2 ulps and glibc to within 1: a few ulps in all, 1e-6 relative is ~8.
  SECTION("add in place") {
    std::vector<float> want(n);
    add(a, b, want);
    const DeviceArray<float> d_a(a);
    const DeviceArray<float> d_b(b);
    REQUIRE(add_enqueue(d_a.get(), d_b.get(), n, d_a.get(), nullptr).ok());
    expect_close(d_a.download(), want, relative_tol(want, 1e-7));
  }
  SECTION("add_row") {
    std::vector<float> want = a;
    for (size_t t = 0; t < n_rows; ++t) {
      for (size_t i = 0; i < dim; ++i) want[t * dim + i] += row[i];
    }
    const DeviceArray<float> d_a(a);
    const DeviceArray<float> d_row(row);
    REQUIRE(add_row_enqueue(d_a.get(), d_row.get(), n_rows, dim, nullptr).ok());
    expect_close(d_a.download(), want, relative_tol(want, 1e-7));
  }
  SECTION("silu_mul into gate") {
    std::vector<float> want(n);
    silu_mul(a, b, want);
    const DeviceArray<float> d_a(a);
    const DeviceArray<float> d_b(b);
    REQUIRE(silu_mul_enqueue(d_a.get(), d_b.get(), n, d_a.get(), nullptr).ok());
    expect_close(d_a.download(), want, relative_tol(want, 1e-6));
  }
  SECTION("scale_rows_by_sigmoid") {
    std::vector<float> s(n_rows);
    sigmoid(logit, s);
    std::vector<float> want = a;
    for (size_t t = 0; t < n_rows; ++t) {
      for (size_t i = 0; i < dim; ++i) want[t * dim + i] *= s[t];
    }
    const DeviceArray<float> d_a(a);
    const DeviceArray<float> d_logit(logit);
    REQUIRE(scale_rows_by_sigmoid_enqueue(d_a.get(), d_logit.get(), n_rows, dim, nullptr).ok());
    expect_close(d_a.download(), want, relative_tol(want, 1e-6));
  }
}

TEST_CASE("CUDA rope matches kernels::rope in both layouts, with YaRN", "[cuda]") {
  if (!have_device()) return;
  std::mt19937 rng(17);
  struct Case {
    bool neox;
    size_t head_dim, rot_dims;
    float base;
    float factor;       // YaRN scaling factor; 0: plain RoPE
    bool round;         // YaRN correction range rounded (ggml) or fractional (gpt-oss's HF)
    float attn_factor;  // DeepSeek's cos/sin factor; 1 elsewhere
  };
  const std::vector<int32_t> positions = {0, 1, 17, 4095, 100000};
  for (const Case c :
       {Case{true, 64, 64, 10000.0f, 0.0f, true, 1.0f},
        Case{false, 64, 64, 10000.0f, 0.0f, true, 1.0f},
        Case{true, 128, 64, 1000000.0f, 0.0f, true, 1.0f},
        Case{false, 96, 32, 500000.0f, 0.0f, true, 1.0f},
        // gpt-oss: NEOX, head 64, YaRN 32 over 4096 positions, fractional range.
        Case{true, 64, 64, 150000.0f, 32.0f, false, 1.0f},
        // DeepSeek-V3: the interleaved rope part of 64, YaRN 40, cos/sin factor 1 / mscale.
        Case{false, 192, 64, 10000.0f, 40.0f, true, 1.0f / (1.0f + 0.1f * std::log(40.0f))},
        // More pairs than a block has threads (128): each thread takes several.
        Case{true, 512, 512, 10000.0f, 0.0f, true, 1.0f},
        Case{false, 512, 300, 10000.0f, 4.0f, true, 0.9f}}) {
    INFO((c.neox ? "neox" : "normal")
         << " head_dim " << c.head_dim << " rot " << c.rot_dims << " yarn " << c.factor);
    const size_t n_tokens = positions.size(), n_heads = 3;
    const std::vector<float> x = random_floats(n_tokens * n_heads * c.head_dim, -1.0f, 1.0f, rng);
    RopeConfig config{c.neox ? RopeLayout::kNeox : RopeLayout::kNormal, c.head_dim, c.rot_dims,
                      c.base};
    if (c.factor != 0.0f) {
      config.freq_scale = 1.0f / c.factor;
      config.ext_factor = 1.0f;
      config.attn_factor = c.attn_factor;
      config.n_ctx_orig = 4096;
      config.yarn_round_corr_dims = c.round;
    }
    std::vector<float> want = x;
    rope(want, n_tokens, n_heads, positions, config);
    const DeviceArray<float> d_x(x);
    const DeviceArray<int32_t> d_pos(positions);
    REQUIRE(
        rope_enqueue(d_x.get(), n_tokens, n_heads, d_pos.get(), device_rope(config), nullptr).ok());
    // Same angle steps as the CPU (double inv_freq and cos/sin rounded to float, float theta and
    // YaRN mix, unfused products), so a match to the bit is expected; 2e-6 absolute on |x| <= 1
    // allows a one-ulp difference of a double pow/sincos result that rounds the other way to
    // float.
    expect_close(d_x.download(), want, std::vector<double>(want.size(), 2e-6));
  }
}

TEST_CASE("CUDA kv_write copies rows to their pool slots", "[cuda]") {
  if (!have_device()) return;
  std::mt19937 rng(19);
  const size_t n_blocks = 6, block_rows = 4, kv_dim = 24, pool_rows = n_blocks * block_rows;
  std::vector<int32_t> order(pool_rows);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<int32_t> slots(order.begin(), order.begin() + 10);
  slots.push_back(-1);                               // out of range: dropped
  slots.push_back(static_cast<int32_t>(pool_rows));  // out of range: dropped
  const size_t n_tokens = slots.size();
  const std::vector<float> k = random_floats(n_tokens * kv_dim, -1.0f, 1.0f, rng);
  const std::vector<float> v = random_floats(n_tokens * kv_dim, -1.0f, 1.0f, rng);
  const DeviceArray<float> d_keys(std::vector<float>(pool_rows * kv_dim, 0.0f));
  const DeviceArray<float> d_values(std::vector<float>(pool_rows * kv_dim, 0.0f));
  const DeviceArray<float> d_k(k);
  const DeviceArray<float> d_v(v);
  const DeviceArray<int32_t> d_slots(slots);
  const DeviceKvLayer layer{d_keys.get(), d_values.get(), block_rows, n_blocks, kv_dim};
  REQUIRE(kv_write_enqueue(layer, d_k.get(), d_v.get(), d_slots.get(), n_tokens, nullptr).ok());
  std::vector<float> want_k(pool_rows * kv_dim, 0.0f), want_v(pool_rows * kv_dim, 0.0f);
  for (size_t t = 0; t + 2 < n_tokens; ++t) {
    std::copy_n(k.begin() + t * kv_dim, kv_dim, want_k.begin() + slots[t] * kv_dim);
    std::copy_n(v.begin() + t * kv_dim, kv_dim, want_v.begin() + slots[t] * kv_dim);
  }
  CHECK(d_keys.download() == want_k);  // a copy: exact
  CHECK(d_values.download() == want_v);
}

TEST_CASE("CUDA attention matches kernels::attention_heads over a paged pool", "[cuda]") {
  if (!have_device()) return;
  std::mt19937 rng(23);
  struct Seq {
    size_t ctx;  // positions 0 .. ctx - 1 in the cache
    size_t n_q;  // query tokens at positions ctx - n_q .. ctx - 1
  };
  // A decode token, a chunk crossing the 64-position chunk boundary of the kernel, a prefill.
  const std::vector<Seq> seqs = {{5, 1}, {70, 6}, {20, 20}};
  const std::vector<size_t> table_order = {1, 0, 2};  // tables stored out of sequence order
  struct Shape {
    size_t n_heads, n_kv_heads, head_dim;
  };
  // Plain causal attention; a sliding window shorter than a chunk of the kernel and one longer,
  // each with GPT-OSS's sinks (one raw logit per head, some far above the scores so that they
  // take most of the weight).
  struct Variant {
    size_t window;
    bool sinks;
  };
  for (size_t block_rows : {1, 3, 16}) {
    for (const Variant var :
         {Variant{0, false}, Variant{8, true}, Variant{66, false}, Variant{0, true}}) {
      for (const Shape sh : {Shape{4, 2, 64}, Shape{3, 3, 160}, Shape{8, 2, 40}}) {
        INFO("block_rows " << block_rows << ", heads " << sh.n_heads << "/" << sh.n_kv_heads
                           << ", head_dim " << sh.head_dim << ", window " << var.window
                           << (var.sinks ? ", sinks" : ""));
        const size_t kv_dim = sh.n_kv_heads * sh.head_dim;
        size_t used = 0;
        for (const Seq& s : seqs) used += (s.ctx + block_rows - 1) / block_rows;
        const size_t n_blocks = used + 2;  // two spare blocks nobody's table names
        std::vector<int32_t> ids(n_blocks);
        std::iota(ids.begin(), ids.end(), 0);
        std::shuffle(ids.begin(), ids.end(), rng);
        // Every row starts as poison (100): a read of an unwritten, future or foreign row shows.
        std::vector<float> keys(n_blocks * block_rows * kv_dim, 100.0f);
        std::vector<float> values = keys;
        std::vector<std::vector<int32_t>> tables(seqs.size());
        std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
        size_t next = 0;
        for (size_t i = 0; i < seqs.size(); ++i) {
          for (size_t p = 0; p < seqs[i].ctx; ++p) {
            if (p % block_rows == 0) tables[i].push_back(ids[next++]);
            // Rows before every query's window stay poison: the kernel must not read them.
            const size_t first_q = seqs[i].ctx - seqs[i].n_q;
            if (var.window != 0 && p + var.window <= first_q) continue;
            const size_t row = static_cast<size_t>(tables[i].back()) * block_rows + p % block_rows;
            for (size_t c = 0; c < kv_dim; ++c) {
              keys[row * kv_dim + c] = unit(rng);
              values[row * kv_dim + c] = unit(rng);
            }
          }
        }
        std::vector<int32_t> table_begin(seqs.size()), all_tables;
        for (size_t i : table_order) {
          table_begin[i] = static_cast<int32_t>(all_tables.size());
          all_tables.insert(all_tables.end(), tables[i].begin(), tables[i].end());
        }
        std::vector<int32_t> token_seq, token_pos;
        for (size_t i = 0; i < seqs.size(); ++i) {
          for (size_t p = seqs[i].ctx - seqs[i].n_q; p < seqs[i].ctx; ++p) {
            token_seq.push_back(static_cast<int32_t>(i));
            token_pos.push_back(static_cast<int32_t>(p));
          }
        }
        const size_t n_tokens = token_seq.size();
        const size_t q_row = sh.n_heads * sh.head_dim;
        const std::vector<float> q = random_floats(n_tokens * q_row, -1.0f, 1.0f, rng);
        AttentionConfig config;
        config.n_heads = sh.n_heads;
        config.n_kv_heads = sh.n_kv_heads;
        config.head_dim = sh.head_dim;
        config.scale = 1.0f / std::sqrt(static_cast<float>(sh.head_dim));
        config.window = var.window;
        std::vector<float> sinks;
        if (var.sinks) {
          for (size_t h = 0; h < sh.n_heads; ++h) sinks.push_back(h % 2 == 0 ? unit(rng) : 4.0f);
          config.sinks = sinks;
        }
        std::vector<float> want(q.size());
        for (size_t i = 0, t0 = 0; i < seqs.size(); t0 += seqs[i].n_q, ++i) {
          const KvBlocks blocks{keys.data(), values.data(), tables[i], block_rows, n_blocks};
          attention_heads(std::span<const float>(q).subspan(t0 * q_row, seqs[i].n_q * q_row),
                          seqs[i].n_q, seqs[i].ctx - seqs[i].n_q, blocks, config,
                          std::span<float>(want).subspan(t0 * q_row, seqs[i].n_q * q_row), 0,
                          sh.n_heads);
        }
        const DeviceArray<float> d_keys(keys), d_values(values), d_q(q), d_out(q.size());
        const DeviceArray<int32_t> d_seq(token_seq), d_pos(token_pos), d_begin(table_begin),
            d_tables(all_tables);
        const DeviceKvLayer layer{d_keys.get(), d_values.get(), block_rows, n_blocks, kv_dim};
        const DeviceAttentionBatch batch{n_tokens, d_seq.get(), d_pos.get(), d_begin.get(),
                                         d_tables.get()};
        const DeviceArray<float> d_sinks(sinks);
        DeviceAttentionShape shape{sh.n_heads, sh.n_kv_heads, sh.head_dim, config.scale};
        shape.window = var.window;
        if (var.sinks) shape.sinks = d_sinks.get();
        REQUIRE(attention_enqueue(d_q.get(), layer, batch, shape, d_out.get(), nullptr).ok());
        // Outputs are convex combinations of V rows in [-1, 1]. The two sides differ in the dot
        // order (a score error of ~sqrt(head_dim) * 2^-24 * |score| typically, < 1e-6) and in the
        // softmax rescaling (online, a few float roundings per weight), so outputs agree to ~1e-6;
        // 2e-5 leaves a 20x margin. A poison row (100) or a wrong kv head is off by >= ~0.01.
        expect_close(d_out.download(), want, std::vector<double>(want.size(), 2e-5));
      }
    }
  }
}

TEST_CASE("CUDA kv_write and attention over an f16 pool: the host's halves, read exactly",
          "[cuda]") {
  if (!have_device()) return;
  std::mt19937 rng(31);
  // One sequence of 40 positions in blocks of 16 (table 2, 0, 1), the last 7 as queries; keys
  // and values written by kv_write from floats, including values a half cannot hold (rounded,
  // overflowed to infinity in a row no query reads: position 0 lies outside the window of 32).
  const size_t block_rows = 16, n_blocks = 3, n_heads = 4, n_kv_heads = 2, head_dim = 64;
  const size_t kv_dim = n_kv_heads * head_dim, ctx = 40, n_q = 7, window = 32;
  const std::vector<int32_t> table = {2, 0, 1};
  std::vector<float> k = random_floats(ctx * kv_dim, -1.0f, 1.0f, rng);
  std::vector<float> v = random_floats(ctx * kv_dim, -1.0f, 1.0f, rng);
  k[5] = 1e6f;   // position 0: infinity as a half
  v[9] = 1e-9f;  // a subnormal-range value: rounds to zero
  std::vector<int32_t> slots(ctx);
  for (size_t p = 0; p < ctx; ++p) {
    slots[p] = table[p / block_rows] * static_cast<int32_t>(block_rows) +
               static_cast<int32_t>(p % block_rows);
  }
  const size_t pool = n_blocks * block_rows * kv_dim;
  const DeviceArray<uint16_t> d_keys(std::vector<uint16_t>(pool, 0x7e00));  // NaN poison
  const DeviceArray<uint16_t> d_values(std::vector<uint16_t>(pool, 0x7e00));
  const DeviceArray<float> d_k(k), d_v(v);
  const DeviceArray<int32_t> d_slots(slots);
  const DeviceKvLayer layer{d_keys.get(), d_values.get(), block_rows,
                            n_blocks,     kv_dim,         KvType::kF16};
  REQUIRE(kv_write_enqueue(layer, d_k.get(), d_v.get(), d_slots.get(), ctx, nullptr).ok());
  // The host's rounding, slot by slot: the same bits.
  std::vector<uint16_t> want_k(pool, 0x7e00), want_v(pool, 0x7e00);
  for (size_t p = 0; p < ctx; ++p) {
    const size_t row = static_cast<size_t>(slots[p]) * kv_dim;
    store_kv_elements(KvType::kF16, k.data() + p * kv_dim, want_k.data() + row, kv_dim);
    store_kv_elements(KvType::kF16, v.data() + p * kv_dim, want_v.data() + row, kv_dim);
  }
  const std::vector<uint16_t> got_k = d_keys.download();
  const std::vector<uint16_t> got_v = d_values.download();
  CHECK(got_k == want_k);
  CHECK(got_v == want_v);

  const std::vector<float> q = random_floats(n_q * n_heads * head_dim, -1.0f, 1.0f, rng);
  AttentionConfig config;
  config.n_heads = n_heads;
  config.n_kv_heads = n_kv_heads;
  config.head_dim = head_dim;
  config.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  config.window = window;
  std::vector<float> want(q.size());
  KvBlocks blocks{want_k.data(), want_v.data(), table, block_rows, n_blocks};
  blocks.type = KvType::kF16;
  attention_heads(q, n_q, ctx - n_q, blocks, config, want, 0, n_heads);
  std::vector<int32_t> token_seq(n_q, 0), token_pos(n_q);
  std::iota(token_pos.begin(), token_pos.end(), static_cast<int32_t>(ctx - n_q));
  const DeviceArray<float> d_q(q), d_out(q.size());
  const DeviceArray<int32_t> d_seq(token_seq), d_pos(token_pos), d_begin(std::vector<int32_t>{0}),
      d_tables(table);
  const DeviceAttentionBatch batch{n_q, d_seq.get(), d_pos.get(), d_begin.get(), d_tables.get()};
  DeviceAttentionShape shape{n_heads, n_kv_heads, head_dim, config.scale};
  shape.window = window;
  REQUIRE(attention_enqueue(d_q.get(), layer, batch, shape, d_out.get(), nullptr).ok());
  // The bound of the f32 test above: both sides read the same halves as exact floats.
  expect_close(d_out.download(), want, std::vector<double>(want.size(), 2e-5));
}

TEST_CASE("CUDA attention gives NaN for a token whose table names a block outside the layer",
          "[cuda]") {
  if (!have_device()) return;
  // Two sequences over a layer of 4 blocks of 2 rows: the first one's table names block 9 (a
  // corrupt table must not make the kernel read outside the pool), the second one's is sound.
  const size_t head_dim = 8;
  const std::vector<float> kv(4 * 2 * head_dim, 0.5f);
  const DeviceArray<float> d_keys(kv), d_values(kv);
  const DeviceArray<float> d_q(std::vector<float>(2 * head_dim, 0.1f)), d_out(2 * head_dim);
  const DeviceArray<int32_t> d_seq(std::vector<int32_t>{0, 1}), d_pos(std::vector<int32_t>{2, 1}),
      d_begin(std::vector<int32_t>{0, 2}), d_tables(std::vector<int32_t>{0, 9, 1, 2});
  const DeviceKvLayer layer{d_keys.get(), d_values.get(), 2, 4, head_dim};
  const DeviceAttentionBatch batch{2, d_seq.get(), d_pos.get(), d_begin.get(), d_tables.get()};
  const DeviceAttentionShape shape{1, 1, head_dim, 0.3f};
  REQUIRE(attention_enqueue(d_q.get(), layer, batch, shape, d_out.get(), nullptr).ok());
  const std::vector<float> out = d_out.download();
  for (size_t c = 0; c < head_dim; ++c) {
    CHECK(std::isnan(out[c]));
    CHECK(out[head_dim + c] == Approx(0.5f));  // every value row holds 0.5
  }
}

}  // namespace
}  // namespace tandem::kernels::cuda
