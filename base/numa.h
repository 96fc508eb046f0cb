// The machine's NUMA nodes as Linux reports them (/sys/devices/system/node), and the two things
// the CPU path does with them on a machine with more than one: spread the pool's threads evenly
// over the nodes (pinned), and interleave the pages of the weight copies it makes over the nodes,
// so that every socket's memory serves a share of each weight stream. parallel_for hands chunks to
// whichever thread is free, so no expert has a home node; interleaving is the placement that
// keeps every socket's bandwidth in use for any assignment. A single-node machine (or one where
// sysfs says nothing) gets neither: no pinning, no memory policy.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/status.h"

namespace tandem {

struct NumaTopology {
  // Per node (ascending node id), the CPUs of the node this process may run on (its affinity
  // mask); nodes with none of them are left out.
  std::vector<int> node_ids;
  std::vector<std::vector<int>> node_cpus;

  size_t nodes() const { return node_ids.size(); }
};

// A sysfs CPU list ("0-3,8,10-11", whitespace around it ignored; empty = no CPU) as ascending
// CPU ids. Malformed text (a range end before its start, a non-number) is an error naming it.
Result<std::vector<int>> parse_cpu_list(std::string_view text);

// The nodes under sysfs_root (directories node<N> with a cpulist file), each with the CPUs of its
// list that are in `allowed` (empty `allowed`: this process's affinity mask). A missing root or
// no node directory gives an empty topology; an unreadable or malformed cpulist is an error.
Result<NumaTopology> read_numa_topology(const std::string& sysfs_root = "/sys/devices/system/node",
                                        const std::vector<int>& allowed = {});

// The CPU for each of n threads, thread 0 first: the nodes take turns (thread i on node i % nodes,
// in node order), each node's CPUs in ascending order and reused round-robin when a node has
// fewer CPUs than its threads. Empty for an empty topology.
std::vector<int> spread_over_nodes(const NumaTopology& topology, size_t n);

// Sets the memory policy of the page-aligned part of [data, data + bytes) to interleave over the
// topology's nodes (mbind MPOL_INTERLEAVE), for pages not yet touched. Nothing for fewer than two
// nodes; an error (the policy is then unchanged) if the kernel refuses.
Status interleave_over_nodes(void* data, size_t bytes, const NumaTopology& topology);

}  // namespace tandem
