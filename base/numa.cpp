// NUMA topology from sysfs, thread spreading and page interleaving (numa.h).
#include "base/numa.h"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace tandem {
namespace {

constexpr int kMpolInterleave = 3;  // MPOL_INTERLEAVE (linux/mempolicy.h)

std::string_view trim(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

Result<int> parse_cpu(std::string_view s, std::string_view whole) {
  int v = -1;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < 0) {
    return invalid_argument_error("malformed CPU list '" + std::string(whole) + "'");
  }
  return v;
}

std::vector<int> process_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

}  // namespace

Result<std::vector<int>> parse_cpu_list(std::string_view text) {
  const std::string_view whole = trim(text);
  std::vector<int> cpus;
  std::string_view rest = whole;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const size_t dash = item.find('-');
    TANDEM_ASSIGN_OR_RETURN(const int first, parse_cpu(item.substr(0, dash), whole));
    int last = first;
    if (dash != std::string_view::npos) {
      TANDEM_ASSIGN_OR_RETURN(last, parse_cpu(item.substr(dash + 1), whole));
      if (last < first) {
        return invalid_argument_error("malformed CPU list '" + std::string(whole) +
                                      "': a range ends before it starts");
      }
    }
    for (int c = first; c <= last; ++c) cpus.push_back(c);
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

Result<NumaTopology> read_numa_topology(const std::string& sysfs_root,
                                        const std::vector<int>& allowed) {
  namespace fs = std::filesystem;
  NumaTopology t;
  std::error_code ec;
  if (!fs::is_directory(sysfs_root, ec)) return t;
  const std::vector<int> mask = allowed.empty() ? process_cpus() : allowed;
  std::vector<std::pair<int, std::vector<int>>> nodes;
  for (const fs::directory_entry& e : fs::directory_iterator(sysfs_root, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() <= 4 || name.compare(0, 4, "node") != 0) continue;
    int id = -1;
    const auto [end, err] = std::from_chars(name.data() + 4, name.data() + name.size(), id);
    if (err != std::errc() || end != name.data() + name.size()) continue;
    std::ifstream in(e.path() / "cpulist");
    if (!in) return not_found_error("cannot read " + (e.path() / "cpulist").string());
    std::stringstream text;
    text << in.rdbuf();
    Result<std::vector<int>> cpus = parse_cpu_list(text.str());
    if (!cpus.ok()) {
      return invalid_argument_error((e.path() / "cpulist").string() + ": " +
                                    cpus.status().message());
    }
    std::vector<int> usable;
    for (const int c : *cpus) {
      if (std::binary_search(mask.begin(), mask.end(), c)) usable.push_back(c);
    }
    if (!usable.empty()) nodes.emplace_back(id, std::move(usable));
  }
  std::sort(nodes.begin(), nodes.end());
  for (auto& [id, cpus] : nodes) {
    t.node_ids.push_back(id);
    t.node_cpus.push_back(std::move(cpus));
  }
  return t;
}

std::vector<int> spread_over_nodes(const NumaTopology& topology, size_t n) {
  std::vector<int> out;
  const size_t nodes = topology.nodes();
  if (nodes == 0) return out;
  std::vector<size_t> next(nodes, 0);
  for (size_t i = 0; i < n; ++i) {
    const std::vector<int>& cpus = topology.node_cpus[i % nodes];
    out.push_back(cpus[next[i % nodes]++ % cpus.size()]);
  }
  return out;
}

Status interleave_over_nodes(void* data, size_t bytes, const NumaTopology& topology) {
  if (topology.nodes() < 2 || bytes == 0) return Status();
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) / page * page;
  if (begin >= end) return Status();
  constexpr size_t kMaskBits = 1024;
  uint64_t mask[kMaskBits / 64] = {};
  for (const int id : topology.node_ids) {
    if (id < 0 || static_cast<size_t>(id) >= kMaskBits) {
      return invalid_argument_error("NUMA node id " + std::to_string(id) + " out of range");
    }
    mask[id / 64] |= uint64_t{1} << (id % 64);
  }
  if (::syscall(SYS_mbind, begin, end - begin, kMpolInterleave, mask, kMaskBits + 1, 0) != 0) {
    return internal_error(std::string("mbind(MPOL_INTERLEAVE): ") + std::strerror(errno));
  }
  return Status();
}

}  // namespace tandem
