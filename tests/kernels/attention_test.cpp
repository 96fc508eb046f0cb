// Tests of causal grouped-query attention against a numpy float64 reference, and of sliding
// windows and attention sinks (contiguous and paged) against a double-precision reference.
#include "kernels/cpu/attention.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/attention_rows.h"
#include "kernels/cpu/cpu_features.h"
#include "tests/kernels/kernel_fixture.h"

namespace tandem::kernels {
namespace {

using testing::KernelFixture;

TEST_CASE("attention matches numpy causal GQA", "[kernels]") {
  for (const std::string name : {"attention_prefill", "attention_chunk", "attention_decode"}) {
    SECTION(name) {
      const KernelFixture fx(name);
      const auto& p = fx.params();
      AttentionConfig config;
      config.n_heads = p.at("n_heads").get<size_t>();
      config.n_kv_heads = p.at("n_kv_heads").get<size_t>();
      config.head_dim = p.at("head_dim").get<size_t>();
      config.scale = 1.0f / std::sqrt(static_cast<float>(config.head_dim));
      const size_t start_pos = p.at("start_pos").get<size_t>();
      const size_t n_q = p.at("n_q").get<size_t>();
      const std::vector<float> q = fx.array<float>("q");
      const std::vector<float> k = fx.array<float>("k");
      const std::vector<float> v = fx.array<float>("v");
      const std::vector<double> want = fx.array<double>("out");
      std::vector<float> out(q.size(), NAN);
      attention(q, n_q, start_pos, k, v, config, out);
      // q, k, v lie in [-1, 1] and head_dim <= 64: a score's float dot error is typically
      // ~sqrt(64) * 2^-24 * |s| < 1e-6 and the weighted sum of |v| <= 1 adds a few ulps, so
      // outputs land within ~1e-6; 1e-5 is a 10x margin. An off-by-one causal limit pulls in the
      // 1e4 values planted past the last position; a wrong kv head is off by ~0.1.
      for (size_t i = 0; i < out.size(); ++i) {
        INFO("element " << i);
        CHECK(std::fabs(out[i] - want[i]) <= 1e-5);
      }
      // Split over heads (as a pool would): bit-equal.
      std::vector<float> split(q.size(), NAN);
      const size_t mid = config.n_heads / 2;
      attention_heads(q, n_q, start_pos, k, v, config, split, mid, config.n_heads);
      attention_heads(q, n_q, start_pos, k, v, config, split, 0, mid);
      CHECK(split == out);
    }
  }
}

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

size_t first_seen(size_t t, size_t window) {
  return window == 0 || t < window ? 0 : t + 1 - window;
}

// One attention problem: q, and a contiguous cache of n_ctx + 2 rows whose rows the call must not
// read (before the first query's window, and past the last query) are NaN, so any such read
// turns the output NaN.
struct Problem {
  AttentionConfig config;
  size_t n_q = 0, start_pos = 0;
  std::vector<float> q, k, v, sinks;
};

Problem make_problem(size_t n_heads, size_t n_kv, size_t dim, size_t n_q, size_t start_pos,
                     size_t window, std::vector<float> sinks, uint32_t seed) {
  Problem pr;
  pr.config.n_heads = n_heads;
  pr.config.n_kv_heads = n_kv;
  pr.config.head_dim = dim;
  pr.config.scale = 1.0f / std::sqrt(static_cast<float>(dim));
  pr.config.window = window;
  pr.n_q = n_q;
  pr.start_pos = start_pos;
  pr.sinks = std::move(sinks);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  pr.q.resize(n_q * n_heads * dim);
  for (float& x : pr.q) x = dist(rng);
  const size_t n_ctx = start_pos + n_q, kv_row = n_kv * dim;
  const size_t lo = first_seen(start_pos, window);
  pr.k.assign((n_ctx + 2) * kv_row, kNan);
  pr.v.assign((n_ctx + 2) * kv_row, kNan);
  for (size_t i = lo * kv_row; i < n_ctx * kv_row; ++i) {
    pr.k[i] = dist(rng);
    pr.v[i] = dist(rng);
  }
  return pr;
}

// Double-precision reference of attention.h's formula: for each (token, head), the softmax over
// positions lo(t) .. t of scale * q.k plus, with sinks, the raw sink logit in the denominator.
// weight_sum gets sum_p w_p per (token, head), the scale of that row's outputs.
std::vector<double> reference(const Problem& pr, std::vector<double>& weight_sum) {
  const AttentionConfig& c = pr.config;
  const size_t dim = c.head_dim, kv_row = c.n_kv_heads * dim, group = c.n_heads / c.n_kv_heads;
  std::vector<double> out(pr.q.size(), 0.0);
  weight_sum.assign(pr.n_q * c.n_heads, 0.0);
  for (size_t i = 0; i < pr.n_q; ++i) {
    const size_t t = pr.start_pos + i, lo = first_seen(t, c.window);
    for (size_t h = 0; h < c.n_heads; ++h) {
      const float* qh = pr.q.data() + (i * c.n_heads + h) * dim;
      const size_t off = (h / group) * dim;
      std::vector<double> s;
      for (size_t p = lo; p <= t; ++p) {
        double d = 0.0;
        for (size_t e = 0; e < dim; ++e) d += double(qh[e]) * pr.k[p * kv_row + off + e];
        s.push_back(double(c.scale) * d);
      }
      double m = *std::max_element(s.begin(), s.end());
      if (!pr.sinks.empty()) m = std::max(m, double(pr.sinks[h]));
      double denom = pr.sinks.empty() ? 0.0 : std::exp(double(pr.sinks[h]) - m);
      for (const double x : s) denom += std::exp(x - m);
      double* oh = out.data() + (i * c.n_heads + h) * dim;
      for (size_t p = lo; p <= t; ++p) {
        const double w = std::exp(s[p - lo] - m) / denom;
        weight_sum[i * c.n_heads + h] += w;
        for (size_t e = 0; e < dim; ++e) oh[e] += w * pr.v[p * kv_row + off + e];
      }
    }
  }
  return out;
}

std::vector<float> run_contiguous(const Problem& pr) {
  AttentionConfig c = pr.config;
  c.sinks = pr.sinks;
  std::vector<float> out(pr.q.size(), kNan);
  attention(pr.q, pr.n_q, pr.start_pos, pr.k, pr.v, c, out);
  return out;
}

// The same cache in blocks of block_rows rows, stored in reverse order after two NaN spare
// blocks; table entries of blocks wholly before the first query's window are -1.
std::vector<float> run_paged(const Problem& pr, size_t block_rows) {
  const size_t kv_row = pr.config.n_kv_heads * pr.config.head_dim;
  const size_t n_ctx = pr.start_pos + pr.n_q;
  const size_t used = (n_ctx + block_rows - 1) / block_rows;
  const size_t first_live = first_seen(pr.start_pos, pr.config.window) / block_rows;
  const size_t n_blocks = used - first_live + 2;
  std::vector<int32_t> table(used, -1);
  std::vector<float> keys(n_blocks * block_rows * kv_row, kNan), values(keys.size(), kNan);
  for (size_t b = first_live; b < used; ++b) {
    const size_t id = n_blocks - 1 - (b - first_live);
    table[b] = static_cast<int32_t>(id);
    for (size_t r = 0; r < block_rows && b * block_rows + r < n_ctx; ++r) {
      const size_t src = (b * block_rows + r) * kv_row, dst = (id * block_rows + r) * kv_row;
      std::copy_n(pr.k.begin() + src, kv_row, keys.begin() + dst);
      std::copy_n(pr.v.begin() + src, kv_row, values.begin() + dst);
    }
  }
  KvBlocks kv;
  kv.keys = keys.data();
  kv.values = values.data();
  kv.table = table;
  kv.block_rows = block_rows;
  kv.n_blocks = n_blocks;
  AttentionConfig c = pr.config;
  c.sinks = pr.sinks;
  std::vector<float> out(pr.q.size(), kNan);
  attention_heads(pr.q, pr.n_q, pr.start_pos, kv, c, out, 0, c.n_heads);
  return out;
}

// Checks the contiguous kernel against the reference, and every block size, and a split over
// heads, bit for bit against it. Tolerance: q, k, v lie in [-1, 1] and head_dim <= 64, so a float
// score is within ~1e-6 of the double one, which moves each weight by ~1e-6 relative; float exp
// and the float accumulation add a few ulps. Every output is therefore within ~3e-6 * W of the
// reference, W = sum_p w_p <= 1 the row's total value weight (tiny when a large sink takes the
// mass); 1e-5 * W is a 3x margin that still resolves a sink scaled by mistake or ignored.
void check(const Problem& pr) {
  std::vector<double> weight_sum;
  const std::vector<double> want = reference(pr, weight_sum);
  const std::vector<float> got = run_contiguous(pr);
  const size_t dim = pr.config.head_dim;
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(std::fabs(got[i] - want[i]) <= 1e-5 * weight_sum[i / dim]);
  }
  for (const size_t rows : {1, 2, 3, 4, 7, 16, 64}) {
    INFO("block_rows " << rows);
    CHECK(run_paged(pr, rows) == got);
  }
  AttentionConfig c = pr.config;
  c.sinks = pr.sinks;
  std::vector<float> split(pr.q.size(), kNan);
  const size_t mid = c.n_heads / 2;
  attention_heads(pr.q, pr.n_q, pr.start_pos, pr.k, pr.v, c, split, mid, c.n_heads);
  attention_heads(pr.q, pr.n_q, pr.start_pos, pr.k, pr.v, c, split, 0, mid);
  CHECK(split == got);
  // One head per call: heads sharing a kv head are computed together inside a call, which must
  // not change a bit of any head.
  std::vector<float> single(pr.q.size(), kNan);
  for (size_t h = 0; h < c.n_heads; ++h) {
    attention_heads(pr.q, pr.n_q, pr.start_pos, pr.k, pr.v, c, single, h, h + 1);
  }
  CHECK(single == got);
}

TEST_CASE("sliding-window attention matches a double reference, contiguous and paged",
          "[kernels]") {
  struct Case {
    size_t n_heads, n_kv, dim, n_q, start_pos, window;
  };
  const Case cases[] = {
      {4, 2, 16, 1, 0, 1},     // decode at position 0, window 1
      {4, 2, 16, 1, 40, 1},    // decode, window 1: only the token itself
      {8, 2, 32, 1, 57, 8},    // decode, GQA 4, window 8: 50 positions never read
      {4, 4, 16, 1, 57, 58},   // window == context
      {4, 1, 16, 1, 20, 500},  // window > context (MQA)
      {8, 2, 32, 9, 0, 4},     // prefill from 0, window smaller than the chunk
      {8, 2, 32, 6, 13, 5},    // prefill after cached tokens (start_pos > 0)
      {6, 3, 64, 12, 30, 16},  // prefill chunk of 12 under a window of 16, head_dim 64
      {4, 2, 16, 5, 3, 0},     // full causal through the same path
  };
  for (const Case& c : cases) {
    INFO("n_heads " << c.n_heads << " n_kv " << c.n_kv << " dim " << c.dim << " n_q " << c.n_q
                    << " start_pos " << c.start_pos << " window " << c.window);
    check(make_problem(c.n_heads, c.n_kv, c.dim, c.n_q, c.start_pos, c.window, {}, 11));
  }
}

TEST_CASE("attention with a window of 1 returns the token's own value exactly", "[kernels]") {
  const Problem pr = make_problem(4, 2, 16, 3, 10, 1, {}, 12);
  const std::vector<float> got = run_contiguous(pr);
  const size_t kv_row = 2 * 16;
  for (size_t i = 0; i < 3; ++i) {
    for (size_t h = 0; h < 4; ++h) {
      for (size_t e = 0; e < 16; ++e) {
        REQUIRE(got[(i * 4 + h) * 16 + e] == pr.v[(10 + i) * kv_row + (h / 2) * 16 + e]);
      }
    }
  }
}

TEST_CASE("a window covering the context is full attention, bit for bit", "[kernels]") {
  Problem pr =
      make_problem(8, 2, 32, 7, 25, 0, {0.5f, -1.0f, 2.0f, 0.0f, 3.0f, -4.0f, 1.0f, 0.25f}, 13);
  const std::vector<float> full = run_contiguous(pr);
  for (const size_t window : {32, 33, 1000}) {
    pr.config.window = window;
    CHECK(run_contiguous(pr) == full);
    CHECK(run_paged(pr, 4) == full);
  }
}

TEST_CASE("attention sinks join the softmax denominator, unscaled", "[kernels]") {
  // Per-head sinks mixing large (most of the mass), small (none) and moderate values, so a sink
  // read for the wrong head, scaled by `scale`, or left out is off well beyond the tolerance.
  const std::vector<float> sinks = {30.0f, -30.0f, 0.0f, 2.5f, 8.0f, -1.0f, 15.0f, -100.0f};
  struct Case {
    size_t n_q, start_pos, window;
  };
  for (const Case c : {Case{1, 0, 0}, Case{1, 45, 0}, Case{1, 45, 6}, Case{10, 0, 0},
                       Case{7, 19, 5}, Case{4, 30, 1}}) {
    INFO("n_q " << c.n_q << " start_pos " << c.start_pos << " window " << c.window);
    check(make_problem(8, 2, 32, c.n_q, c.start_pos, c.window, sinks, 14));
  }
  // A very negative sink is no sink: exp(-200 - m) underflows to 0 in float for |m| <= 8, so the
  // result equals the sink-free one bit for bit.
  Problem with = make_problem(4, 2, 16, 3, 8, 0, {-200.0f, -200.0f, -200.0f, -200.0f}, 15);
  Problem without = with;
  without.sinks.clear();
  CHECK(run_contiguous(with) == run_contiguous(without));
}

TEST_CASE("windowed attention never reads freed blocks before the window", "[kernels]") {
  // Decode at position 100 with window 8 (positions 93..100) and block_rows 4: blocks 0..22 are
  // freed (-1 in the table, and no storage for them at all); only blocks 23..25 exist.
  const Problem pr = make_problem(4, 2, 16, 1, 100, 8, {1.0f, -1.0f, 0.5f, 2.0f}, 16);
  const std::vector<float> want = run_contiguous(pr);
  const size_t kv_row = 2 * 16, rows = 4;
  std::vector<int32_t> table(26, -1);
  table[23] = 2;
  table[24] = 0;
  table[25] = 1;
  std::vector<float> keys(3 * rows * kv_row, kNan), values(keys.size(), kNan);
  for (size_t p = 93; p <= 100; ++p) {
    const size_t dst = (static_cast<size_t>(table[p / rows]) * rows + p % rows) * kv_row;
    std::copy_n(pr.k.begin() + p * kv_row, kv_row, keys.begin() + dst);
    std::copy_n(pr.v.begin() + p * kv_row, kv_row, values.begin() + dst);
  }
  KvBlocks kv{keys.data(), values.data(), table, rows, 3};
  AttentionConfig c = pr.config;
  c.sinks = pr.sinks;
  std::vector<float> out(pr.q.size(), kNan);
  attention_heads(pr.q, 1, 100, kv, c, out, 0, 4);
  CHECK(out == want);
}

}  // namespace
}  // namespace tandem::kernels

namespace tandem::kernels {
namespace {

TEST_CASE("MLA-shaped attention: values are the leading value_dim floats of each key row",
          "[kernels]") {
  // 8 query heads over one cached row per position of 24 floats (16 latent + 8 RoPE); values are
  // the 16 latent floats of that same row (KvBlocks::values == keys), out is 8 x 16 per token.
  const size_t heads = 8, row = 24, vdim = 16, n_ctx = 37, start = 30, n_q = n_ctx - start;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> cache(n_ctx * row), q(n_q * heads * row);
  for (float& x : cache) x = u(rng);
  for (float& x : q) x = u(rng);
  AttentionConfig c;
  c.n_heads = heads;
  c.n_kv_heads = 1;
  c.head_dim = row;
  c.value_dim = vdim;
  c.scale = 0.3f;
  static constexpr int32_t kOne[1] = {0};
  KvBlocks kv;
  kv.keys = cache.data();
  kv.values = cache.data();
  kv.table = kOne;
  kv.block_rows = n_ctx;
  kv.n_blocks = 1;
  std::vector<float> out(n_q * heads * vdim, kNan);
  attention_heads(q, n_q, start, kv, c, out, 0, heads);
  for (size_t i = 0; i < n_q; ++i) {
    const size_t t = start + i;
    for (size_t h = 0; h < heads; ++h) {
      std::vector<double> s;
      for (size_t p = 0; p <= t; ++p) {
        double d = 0.0;
        for (size_t e = 0; e < row; ++e)
          d += double(q[(i * heads + h) * row + e]) * cache[p * row + e];
        s.push_back(0.3 * d);
      }
      const double m = *std::max_element(s.begin(), s.end());
      double denom = 0.0;
      for (const double x : s) denom += std::exp(x - m);
      for (size_t e = 0; e < vdim; ++e) {
        double want = 0.0;
        for (size_t p = 0; p <= t; ++p) want += std::exp(s[p] - m) / denom * cache[p * row + e];
        INFO("token " << i << " head " << h << " value " << e);
        CHECK(std::fabs(out[(i * heads + h) * vdim + e] - want) < 1e-5);
      }
    }
  }
  // Head ranges split anywhere give the same bits.
  std::vector<float> split(out.size(), kNan);
  attention_heads(q, n_q, start, kv, c, split, 0, 3);
  attention_heads(q, n_q, start, kv, c, split, 3, heads);
  CHECK(split == out);
}

}  // namespace
}  // namespace tandem::kernels

namespace tandem::kernels {
namespace {

TEST_CASE("attention's AVX2 and AVX-512 row kernels give the scalar ones' bits", "[kernels]") {
#if defined(__x86_64__) || defined(_M_X64)
  if (!cpu_features().avx2) {
    WARN("attention AVX2 row kernels skipped: no AVX2 (the scalar ones run everywhere)");
    return;
  }
  const bool avx512 = cpu_features().avx512f;
  if (!avx512) WARN("attention AVX-512 row kernels skipped: no AVX-512 on this CPU");
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (const size_t dim : {1, 7, 8, 16, 37, 64, 128, 576}) {
    // Head counts and row runs that take every blocking (8 heads, 4, 3, 2, 1 and their row and
    // column remainders) and runs of rows longer than one pass of the AVX2 walks (8 to 512 rows
    // a pass, by the row width).
    for (const size_t heads : {1, 2, 3, 5, 8, 13, 16}) {
      for (const size_t rows : {1, 3, 8, 11, 70, 601}) {
        INFO("dim " << dim << ", heads " << heads << ", rows " << rows);
        const size_t stride = rows + 2, row_stride = dim + 3;
        std::vector<float> q(heads * dim), k(rows * row_stride), w(heads * stride);
        for (float& x : q) x = u(rng);
        for (float& x : k) x = u(rng);
        for (float& x : w) x = u(rng);
        std::vector<float> s1(heads * stride, 0.0f), s2(heads * stride, 0.0f);
        detail::attention_scores_scalar(q.data(), heads, k.data(), row_stride, rows, dim, 0.37f,
                                        s1.data(), stride);
        detail::attention_scores_avx2(q.data(), heads, k.data(), row_stride, rows, dim, 0.37f,
                                      s2.data(), stride);
        CHECK(s1 == s2);
        if (avx512) {
          std::vector<float> s3(heads * stride, 0.0f);
          detail::attention_scores_avx512(q.data(), heads, k.data(), row_stride, rows, dim, 0.37f,
                                          s3.data(), stride);
          CHECK(s1 == s3);
        }
        std::vector<float> o1(heads * dim), o2, o3;
        for (float& x : o1) x = u(rng);
        o2 = o1;
        o3 = o1;
        detail::attention_accumulate_scalar(w.data(), stride, heads, k.data(), row_stride, rows,
                                            dim, o1.data());
        detail::attention_accumulate_avx2(w.data(), stride, heads, k.data(), row_stride, rows, dim,
                                          o2.data());
        CHECK(o1 == o2);
        if (avx512) {
          detail::attention_accumulate_avx512(w.data(), stride, heads, k.data(), row_stride, rows,
                                              dim, o3.data());
          CHECK(o1 == o3);
        }
      }
    }
  }
#else
  WARN("attention AVX2 row kernels skipped: not an x86-64 build");
#endif
}

}  // namespace
}  // namespace tandem::kernels
