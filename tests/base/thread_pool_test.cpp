// ThreadPool: every index is visited exactly once, chunks are fixed by the grain, reuse works.
#include <catch2/catch.hpp>

#include <atomic>
#include <mutex>
#include <set>
#include <vector>

#include "base/thread_pool.h"

namespace tandem {
namespace {

TEST_CASE("parallel_for visits every index exactly once in fixed chunks", "[base][thread_pool]") {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    CHECK(pool.n_threads() == static_cast<size_t>(threads));
    for (int round = 0; round < 20; ++round) {
      std::vector<std::atomic<int>> hits(1003);
      std::mutex mutex;
      std::set<std::pair<size_t, size_t>> chunks;
      pool.parallel_for(3, 1003, 10, [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) hits[i].fetch_add(1);
        std::lock_guard<std::mutex> lock(mutex);
        chunks.insert({b, e});
      });
      for (size_t i = 0; i < hits.size(); ++i) REQUIRE(hits[i].load() == (i >= 3 ? 1 : 0));
      REQUIRE(chunks.size() == 100);
      CHECK(chunks.begin()->first == 3);
      CHECK(chunks.rbegin()->second == 1003);
      for (const auto& [b, e] : chunks) CHECK((e - b == 10 && (b - 3) % 10 == 0));
    }
  }
}

TEST_CASE("parallel_for on an empty range calls nothing; 0 threads means the hardware's",
          "[base][thread_pool]") {
  ThreadPool pool(0);
  CHECK(pool.n_threads() >= 1);
  bool called = false;
  pool.parallel_for(5, 5, 1, [&](size_t, size_t) { called = true; });
  CHECK(!called);
}

}  // namespace
}  // namespace tandem
