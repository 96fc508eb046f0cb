// measure_read_bandwidth and decode_weight_bytes for tandem bench.
#include "cli/bench_bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

namespace tandem::cli {

double measure_read_bandwidth(ThreadPool& pool, uint64_t bytes, int repeats) {
  const size_t words = static_cast<size_t>(bytes / sizeof(uint64_t));
  std::unique_ptr<uint64_t[]> buffer(new uint64_t[words]);
  constexpr size_t kSlice = size_t{1} << 17;  // 1 MiB of words per chunk
  // First touch from the pool, so pages land where the readers run.
  pool.parallel_for(0, words, kSlice, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) buffer[i] = i;
  });
  std::vector<uint64_t> sums(words / kSlice + 1);
  double best = 0.0;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(0, words, kSlice, [&](size_t b, size_t e) {
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      size_t i = b;
      for (; i + 4 <= e; i += 4) {
        s0 += buffer[i];
        s1 += buffer[i + 1];
        s2 += buffer[i + 2];
        s3 += buffer[i + 3];
      }
      for (; i < e; ++i) s0 += buffer[i];
      sums[b / kSlice] = s0 + s1 + s2 + s3;  // kept, so the reads cannot be dropped
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(words * sizeof(uint64_t)) / s);
  }
  volatile uint64_t sink = 0;
  for (uint64_t s : sums) sink = sink + s;
  return best;
}

uint64_t decode_weight_bytes(const ModelSession& session) {
  const model::CheckpointSizes sizes = model::checkpoint_sizes(session.checkpoint());
  const runtime::PreparedWeights& w = session.runner().prepared_weights();
  const uint64_t head = static_cast<uint64_t>(w.lm_head.rows) * w.lm_head.row_bytes;
  const uint64_t k = session.runner().spec().n_experts_used;
  return sizes.dense + head + k * sizes.per_expert;
}

}  // namespace tandem::cli
