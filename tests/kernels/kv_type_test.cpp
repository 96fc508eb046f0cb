// Tests of the KV cache element types (kernels/cpu/kv_type.h): the names, the fp16 conversions
// (F16C against the scalar reference, the reference against numpy-style rounding facts), and
// attention over an f16 cache, which must give exactly what attention over an f32 cache holding
// the rounded values gives.
#include "kernels/cpu/kv_type.h"

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/float_convert.h"

namespace tandem::kernels {
namespace {

TEST_CASE("KV types: names round-trip, sizes, unknown names refused", "[kernels][kv]") {
  for (const KvType t : {KvType::kF32, KvType::kF16}) {
    CHECK(parse_kv_type(kv_type_name(t)) == t);
  }
  CHECK(kv_type_names().size() == 2);
  CHECK(kv_type_bytes(KvType::kF32) == 4);
  CHECK(kv_type_bytes(KvType::kF16) == 2);
  CHECK_FALSE(parse_kv_type("F16").has_value());
  CHECK_FALSE(parse_kv_type("q8_0").has_value());
  CHECK_FALSE(parse_kv_type("").has_value());
}

TEST_CASE("f16 KV elements: rounding to nearest even, exact read-back", "[kernels][kv]") {
  // Known values: 1 + 2^-11 is half-way between 1 and the next half (1 + 2^-10): ties to even
  // gives 1; 1 + 3 * 2^-11 goes up to 1 + 2^-9. 65520 rounds to infinity, 65519 to 65504; 2^-25
  // (half the smallest subnormal) ties to 0, 3 * 2^-26 rounds up to 2^-24.
  const std::vector<float> in{
      1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65519.0f, 65520.0f,    -65520.0f,
      0x1p-25f,        3 * 0x1p-26f,        -0.0f,    0.333333343f};
  const std::vector<float> want{1.0f, 1.0f + 0x1p-9f, 65504.0f, INFINITY,    -INFINITY,
                                0.0f, 0x1p-24f,       -0.0f,    0.333251953f};
  std::vector<uint16_t> half(in.size());
  store_kv_elements(KvType::kF16, in.data(), half.data(), in.size());
  std::vector<float> back(in.size());
  load_kv_elements(KvType::kF16, half.data(), back.data(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    INFO("input " << in[i]);
    CHECK(std::bit_cast<uint32_t>(back[i]) == std::bit_cast<uint32_t>(want[i]));
  }
  // f32 stores the floats as they are.
  std::vector<float> same(in.size());
  store_kv_elements(KvType::kF32, in.data(), same.data(), in.size());
  CHECK(same == in);
}

TEST_CASE("f16 KV conversions: F16C gives the scalar reference's bits", "[kernels][kv]") {
  if (!(cpu_features().avx && cpu_features().f16c)) {
    WARN("F16C KV conversions skipped: this CPU has no F16C (the scalar ones run everywhere)");
    return;
  }
  // Every half (33 elements at a time, so that the 8-wide loop and the scalar tail both run).
  std::vector<uint16_t> halves(65536);
  for (size_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<uint16_t>(i);
  std::vector<float> a(halves.size()), b(halves.size());
  for (size_t i = 0; i < halves.size(); i += 33) {
    const size_t n = std::min<size_t>(33, halves.size() - i);
    detail::fp16_to_fp32_scalar(halves.data() + i, a.data() + i, n);
    detail::fp16_to_fp32_f16c(halves.data() + i, b.data() + i, n);
  }
  for (size_t i = 0; i < halves.size(); ++i) {
    INFO("half 0x" << std::hex << i);
    if (std::isnan(a[i])) {
      CHECK(std::isnan(b[i]));  // F16C quiets signalling NaNs; only the payload may differ
    } else {
      CHECK(std::bit_cast<uint32_t>(a[i]) == std::bit_cast<uint32_t>(b[i]));
    }
  }
  // Floats: random bit patterns over every exponent, plus the values around each half's rounding
  // boundary (ties), the overflow threshold and the subnormal range.
  std::mt19937 rng(5);
  std::vector<float> floats;
  for (int i = 0; i < 200000; ++i) {
    const float f = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    if (!std::isnan(f)) floats.push_back(f);
  }
  for (uint32_t h = 0; h < 0x7c00u; h += 7) {
    const uint32_t bits = fp16_to_fp32_bits(static_cast<uint16_t>(h));
    for (const int32_t d : {-1, 0, 1, 0x1000, 0x0fff, 0x1001}) {
      floats.push_back(std::bit_cast<float>(bits + static_cast<uint32_t>(d)));
    }
  }
  for (const float f : {65504.0f, 65519.99f, 65520.0f, 0x1p-24f, 0x1p-25f, 0x1p-14f, 1e-30f}) {
    floats.push_back(f);
    floats.push_back(-f);
  }
  std::vector<uint16_t> x(floats.size()), y(floats.size());
  for (size_t i = 0; i < floats.size(); i += 37) {
    const size_t n = std::min<size_t>(37, floats.size() - i);
    detail::fp32_to_fp16_scalar(floats.data() + i, x.data() + i, n);
    detail::fp32_to_fp16_f16c(floats.data() + i, y.data() + i, n);
  }
  size_t mismatches = 0;
  for (size_t i = 0; i < floats.size(); ++i) mismatches += x[i] != y[i];
  CHECK(mismatches == 0);
}

// One layer's cache in blocks of `block_rows` rows, stored in reverse block order, as elements of
// `type`; `rows` holds n_ctx rows of kv_row floats.
struct BlockCache {
  std::vector<uint8_t> keys, values;
  std::vector<int32_t> table;
  KvBlocks view(size_t block_rows, KvType type, bool keys_only) const {
    KvBlocks kv;
    kv.keys = keys.data();
    kv.values = keys_only ? keys.data() : values.data();
    kv.table = table;
    kv.block_rows = block_rows;
    kv.n_blocks = table.size();
    kv.type = type;
    return kv;
  }
};

BlockCache make_cache(const std::vector<float>& k, const std::vector<float>& v, size_t kv_row,
                      size_t n_ctx, size_t block_rows, KvType type) {
  BlockCache c;
  const size_t n_blocks = (n_ctx + block_rows - 1) / block_rows;
  const size_t elem = kv_type_bytes(type);
  c.keys.assign(n_blocks * block_rows * kv_row * elem, 0);
  c.values.assign(c.keys.size(), 0);
  c.table.resize(n_blocks);
  for (size_t b = 0; b < n_blocks; ++b) {
    const size_t id = n_blocks - 1 - b;
    c.table[b] = static_cast<int32_t>(id);
    for (size_t r = 0; r < block_rows && b * block_rows + r < n_ctx; ++r) {
      const size_t src = (b * block_rows + r) * kv_row, dst = (id * block_rows + r) * kv_row;
      store_kv_elements(type, k.data() + src, c.keys.data() + dst * elem, kv_row);
      store_kv_elements(type, v.data() + src, c.values.data() + dst * elem, kv_row);
    }
  }
  return c;
}

// The floats an f16 cache holds for `x`.
std::vector<float> rounded(const std::vector<float>& x) {
  std::vector<uint16_t> h(x.size());
  store_kv_elements(KvType::kF16, x.data(), h.data(), x.size());
  std::vector<float> out(x.size());
  load_kv_elements(KvType::kF16, h.data(), out.data(), x.size());
  return out;
}

TEST_CASE(
    "attention over an f16 cache is attention over the rounded floats, bit for bit, "
    "in one call or query by query",
    "[kernels][kv]") {
  struct Shape {
    size_t heads, kv_heads, dim, value_dim, n_ctx, n_q, window, block_rows;
    bool sinks;
  };
  // GQA with a window and sinks; a head_dim with a tail (not a multiple of 8); a 128-dim head
  // over more rows than one conversion run holds (32), in blocks larger and smaller than a run;
  // MLA's shape (one kv head, values the leading value_dim elements of each key row). Several
  // queries convert each kv head's rows once for the call (a prefill), one query run by run; the
  // last shape's rows (8200 x 2 x 128 floats) exceed what a call converts at once, so its two
  // queries go run by run too.
  const Shape shapes[] = {
      {8, 2, 64, 0, 41, 5, 16, 8, true},    {6, 3, 20, 0, 19, 19, 0, 7, false},
      {8, 1, 128, 0, 150, 2, 0, 64, false}, {4, 2, 128, 0, 150, 1, 0, 20, true},
      {8, 1, 72, 64, 90, 3, 0, 16, false},  {2, 1, 128, 0, 8200, 2, 0, 256, false}};
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (const Shape& s : shapes) {
    INFO("heads " << s.heads << " dim " << s.dim << " context " << s.n_ctx << " block rows "
                  << s.block_rows);
    const bool keys_only = s.value_dim != 0;
    const size_t vdim = keys_only ? s.value_dim : s.dim;
    const size_t kv_row = s.kv_heads * s.dim;
    std::vector<float> q(s.n_q * s.heads * s.dim), k(s.n_ctx * kv_row), v(k.size());
    for (float& x : q) x = u(rng);
    // Values of several magnitudes, so that the f16 rounding really changes them.
    for (size_t i = 0; i < k.size(); ++i) {
      k[i] = u(rng) * (1.0f + static_cast<float>(i % 5));
      v[i] = u(rng) * 3.0f;
    }
    std::vector<float> sinks(s.sinks ? s.heads : 0);
    for (float& x : sinks) x = u(rng);
    AttentionConfig c;
    c.n_heads = s.heads;
    c.n_kv_heads = s.kv_heads;
    c.head_dim = s.dim;
    c.value_dim = s.value_dim;
    c.scale = 1.0f / std::sqrt(static_cast<float>(s.dim));
    c.window = s.window;
    c.sinks = sinks;
    const size_t start = s.n_ctx - s.n_q;
    const BlockCache half = make_cache(k, v, kv_row, s.n_ctx, s.block_rows, KvType::kF16);
    const BlockCache full =
        make_cache(rounded(k), rounded(v), kv_row, s.n_ctx, s.block_rows, KvType::kF32);
    std::vector<float> got(s.n_q * s.heads * vdim, NAN), want(got.size(), NAN);
    attention_heads(q, s.n_q, start, half.view(s.block_rows, KvType::kF16, keys_only), c, got, 0,
                    s.heads);
    attention_heads(q, s.n_q, start, full.view(s.block_rows, KvType::kF32, keys_only), c, want, 0,
                    s.heads);
    CHECK(got == want);
    // Heads split between two calls (as threads split them) give the same bits.
    std::vector<float> split(got.size(), NAN);
    const KvBlocks view = half.view(s.block_rows, KvType::kF16, keys_only);
    attention_heads(q, s.n_q, start, view, c, split, 0, s.heads / 2 + 1);
    attention_heads(q, s.n_q, start, view, c, split, s.heads / 2 + 1, s.heads);
    CHECK(split == got);
    // A call of several queries (each kv head's rows gathered once) gives the bits of its queries
    // one at a time (rows read run by run), over either cache.
    for (const bool f16 : {true, false}) {
      const KvBlocks one_view = f16 ? view : full.view(s.block_rows, KvType::kF32, keys_only);
      std::vector<float> alone(got.size(), NAN);
      for (size_t i = 0; i < s.n_q; ++i) {
        const std::span<const float> qi(q.data() + i * s.heads * s.dim, s.heads * s.dim);
        const std::span<float> oi(alone.data() + i * s.heads * vdim, s.heads * vdim);
        attention_heads(qi, 1, start + i, one_view, c, oi, 0, s.heads);
      }
      CHECK(alone == (f16 ? got : want));
    }
    // The rounding did change the inputs (so the comparison above is not between equal caches of
    // unrounded floats), and the f16 result stays close to the unrounded f32 one.
    CHECK(rounded(k) != k);
    const BlockCache exact = make_cache(k, v, kv_row, s.n_ctx, s.block_rows, KvType::kF32);
    std::vector<float> ref(got.size(), NAN);
    attention_heads(q, s.n_q, start, exact.view(s.block_rows, KvType::kF32, keys_only), c, ref, 0,
                    s.heads);
    float worst = 0.0f;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - ref[i]));
    // |v| <= 3 rounded with relative error <= 2^-11 (1.5e-3 absolute), and the scores' rounding
    // moves the weights by about |q| |k| 2^-11 sqrt(dim) / sqrt(dim) <= 5 * 2^-11 relative: a
    // bound of 2e-2 is loose, yet 100x under what a misread row (an O(1) error) would give.
    CHECK(worst < 2e-2f);
  }
}

}  // namespace
}  // namespace tandem::kernels
