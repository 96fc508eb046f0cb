// Tests of base/numa.h: CPU list parsing, the topology read from a sysfs-shaped directory (a fake
// two-node tree, and this machine's), spreading threads over nodes, the pool pinning its workers,
// and the page policy call.
#include "base/numa.h"

#include <sched.h>
#include <sys/mman.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/thread_pool.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

// A sysfs-shaped tree under a fresh temporary directory: node<id>/cpulist per entry.
struct FakeSysfs {
  fs::path root;
  explicit FakeSysfs(const std::vector<std::pair<std::string, std::string>>& nodes) {
    root = fs::temp_directory_path() /
           ("tandem-numa-test-" + std::to_string(reinterpret_cast<uintptr_t>(this)));
    fs::remove_all(root);
    fs::create_directories(root);
    for (const auto& [name, list] : nodes) {
      fs::create_directories(root / name);
      std::ofstream(root / name / "cpulist") << list << "\n";
    }
    fs::create_directories(root / "power");  // not a node
  }
  ~FakeSysfs() { fs::remove_all(root); }
};

TEST_CASE("parse_cpu_list reads sysfs CPU lists and names malformed ones", "[base][numa]") {
  CHECK(*parse_cpu_list("0-3,8,10-11\n") == std::vector<int>{0, 1, 2, 3, 8, 10, 11});
  CHECK(*parse_cpu_list(" 5 ") == std::vector<int>{5});
  CHECK(parse_cpu_list("")->empty());
  CHECK(*parse_cpu_list("3,1-2,2") == std::vector<int>{1, 2, 3});
  for (const char* bad : {"4-2", "a", "1,,2", "1-", "-3", "1-x"}) {
    INFO(bad);
    const Result<std::vector<int>> r = parse_cpu_list(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().message().find("CPU list") != std::string::npos);
  }
}

TEST_CASE("read_numa_topology keeps the allowed CPUs of each node, in node order", "[base][numa]") {
  const FakeSysfs sysfs({{"node1", "4-7"}, {"node0", "0-3"}, {"node2", "8-9"}});
  const Result<NumaTopology> t = read_numa_topology(sysfs.root.string(), {1, 2, 5, 6, 7, 20});
  REQUIRE(t.ok());
  // node2 has none of the allowed CPUs: left out.
  CHECK(t->node_ids == std::vector<int>{0, 1});
  REQUIRE(t->nodes() == 2);
  CHECK(t->node_cpus[0] == std::vector<int>{1, 2});
  CHECK(t->node_cpus[1] == std::vector<int>{5, 6, 7});

  // Threads take turns over the nodes; a node's CPUs are reused once it runs out.
  CHECK(spread_over_nodes(*t, 7) == std::vector<int>{1, 5, 2, 6, 1, 7, 2});
  CHECK(spread_over_nodes(NumaTopology{}, 3).empty());

  const FakeSysfs broken({{"node0", "0-1"}, {"node1", "3-1"}});
  const Result<NumaTopology> bad = read_numa_topology(broken.root.string(), {0, 1, 2, 3});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("node1") != std::string::npos);

  const Result<NumaTopology> none = read_numa_topology("/nonexistent/tandem/numa", {0});
  REQUIRE(none.ok());
  CHECK(none->nodes() == 0);
}

TEST_CASE("this machine's topology covers the CPUs the process may use", "[base][numa]") {
  const Result<NumaTopology> t = read_numa_topology();
  REQUIRE(t.ok());
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(sched_getaffinity(0, sizeof(set), &set) == 0);
  size_t listed = 0;
  for (const std::vector<int>& cpus : t->node_cpus) {
    for (const int c : cpus) {
      CHECK(CPU_ISSET(c, &set));
      ++listed;
    }
  }
  if (t->nodes() == 0) {
    WARN("no NUMA nodes in sysfs here; the topology is empty");
  } else {
    CHECK(listed == static_cast<size_t>(CPU_COUNT(&set)));
  }
}

TEST_CASE("a pool pins its workers to the CPUs it is given", "[base][numa]") {
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(sched_getaffinity(0, sizeof(set), &set) == 0);
  std::vector<int> allowed;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) allowed.push_back(c);
  }
  REQUIRE(!allowed.empty());
  // Three threads; both workers on the last allowed CPU (thread 0, the caller, is not pinned).
  const int target = allowed.back();
  ThreadPool pool(3, {allowed.front(), target, target});
  CHECK(pool.pinned_workers() == 2);
  std::mutex mu;
  std::set<int> worker_cpus;
  const std::thread::id caller = std::this_thread::get_id();
  for (int round = 0; round < 50; ++round) {
    pool.parallel_for(0, 64, 1, [&](size_t, size_t) {
      // Long enough chunks that the workers get some.
      const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
      while (std::chrono::steady_clock::now() < until) {
      }
      if (std::this_thread::get_id() == caller) return;
      const int cpu = sched_getcpu();
      std::lock_guard<std::mutex> lock(mu);
      worker_cpus.insert(cpu);
    });
  }
  if (worker_cpus.empty()) {
    WARN("the caller ran every chunk; nothing to check");
  } else {
    CHECK(worker_cpus == std::set<int>{target});
  }
  CHECK(ThreadPool(3).pinned_workers() == 0);
}

TEST_CASE("interleave_over_nodes sets the policy on multi-node topologies only", "[base][numa]") {
  const size_t bytes = size_t{4} << 20;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(p != MAP_FAILED);
  // One node: nothing to do, whatever it is.
  NumaTopology one;
  one.node_ids = {0};
  one.node_cpus = {{0}};
  CHECK(interleave_over_nodes(p, bytes, one).ok());
  // Node ids the kernel cannot take are refused before the call.
  NumaTopology wild;
  wild.node_ids = {0, 5000};
  wild.node_cpus = {{0}, {1}};
  CHECK_FALSE(interleave_over_nodes(p, bytes, wild).ok());
  // This machine's own nodes: with two or more the kernel accepts the policy.
  const Result<NumaTopology> here = read_numa_topology();
  REQUIRE(here.ok());
  if (here->nodes() < 2) {
    WARN("single-node machine: the multi-node mbind path did not run here");
  } else {
    CHECK(interleave_over_nodes(p, bytes, *here).ok());
  }
  ::munmap(p, bytes);
}

}  // namespace
}  // namespace tandem
