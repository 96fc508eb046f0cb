// pooled_matmuls (several matrices of one input in one parallel region) and pooled_matmul against
// kernels::matmul of each matrix on the calling thread: the same bits for every thread count, with
// matrices whose types pair with different activation formats and whose row counts are not whole
// groups of 8.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "engine/experts/pooled_matmul.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/weight_matrix.h"
#include "tests/kernels/random_weights.h"

namespace tandem::experts {
namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct Matrix {
  std::vector<uint8_t> bytes;
  kernels::WeightMatrix w;
};

Matrix random_matrix(TensorType type, size_t rows, size_t cols, std::mt19937& rng) {
  Matrix m;
  m.bytes = testing::random_weight_bytes(type, rows, cols, 0.2f, rng);
  Result<kernels::WeightMatrix> w = kernels::make_weight_matrix(type, m.bytes, rows, cols);
  REQUIRE(w.ok());
  m.w = *w;
  return m;
}

TEST_CASE("pooled_matmuls gives each matrix's single-threaded bits for any thread count",
          "[experts][pooled]") {
  constexpr size_t kCols = 512;
  std::mt19937 rng(7);
  // Q4_K pairs with Q8_K activations, Q8_0 with Q8_0, F32 with floats (in kQuantized mode);
  // row counts of 260, 7 and 40.
  std::vector<Matrix> matrices;
  matrices.push_back(random_matrix(TensorType::kQ4_K, 260, kCols, rng));
  matrices.push_back(random_matrix(TensorType::kQ8_0, 7, kCols, rng));
  matrices.push_back(random_matrix(TensorType::kF32, 40, kCols, rng));
  matrices.push_back(random_matrix(TensorType::kQ6_K, 96, kCols, rng));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (const kernels::MatmulActivations mode :
       {kernels::MatmulActivations::kQuantized, kernels::MatmulActivations::kFloat}) {
    for (const size_t n_tokens : {size_t{1}, size_t{5}, size_t{33}}) {
      INFO("mode " << static_cast<int>(mode) << ", tokens " << n_tokens);
      std::vector<float> x(n_tokens * kCols);
      for (float& v : x) v = u(rng);
      std::vector<std::vector<float>> want(matrices.size());
      for (size_t i = 0; i < matrices.size(); ++i) {
        want[i].resize(n_tokens * matrices[i].w.rows);
        kernels::matmul(matrices[i].w, x, n_tokens, want[i], mode);
      }
      for (const int threads : {1, 2, 3}) {
        INFO("threads " << threads);
        ThreadPool pool(threads);
        MatmulScratch scratch;
        std::vector<std::vector<float>> got(matrices.size());
        std::vector<MatmulOutput> outputs;
        for (size_t i = 0; i < matrices.size(); ++i) {
          got[i].assign(n_tokens * matrices[i].w.rows, -1.0f);
          outputs.push_back({&matrices[i].w, got[i]});
        }
        pooled_matmuls(&pool, outputs, x, n_tokens, mode, scratch);
        for (size_t i = 0; i < matrices.size(); ++i) {
          INFO("matrix " << i);
          CHECK(same_bits(got[i], want[i]));
        }
        // pooled_matmul of one of them, after the scratch held other formats.
        std::vector<float> one(want[1].size(), -1.0f);
        pooled_matmul(&pool, matrices[1].w, x, n_tokens, one, mode, scratch);
        CHECK(same_bits(one, want[1]));
      }
    }
  }
}

}  // namespace
}  // namespace tandem::experts
