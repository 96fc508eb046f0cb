// Test helper: loads one case of tests/fixtures/kernels/ (written by
// scripts/fixtures/make_kernel_fixtures.py: index.json plus <case>.bin of little-endian arrays).
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tandem::kernels::testing {

class KernelFixture {
 public:
  explicit KernelFixture(const std::string& case_name) {
    const std::string dir = TANDEM_SOURCE_DIR "/tests/fixtures/kernels/";
    std::ifstream index_in(dir + "index.json");
    REQUIRE(index_in.good());
    const nlohmann::json index = nlohmann::json::parse(index_in);
    REQUIRE(index.contains(case_name));
    entry_ = index.at(case_name);
    std::ifstream bin(dir + case_name + ".bin", std::ios::binary);
    REQUIRE(bin.good());
    blob_.assign(std::istreambuf_iterator<char>(bin), std::istreambuf_iterator<char>());
  }

  const nlohmann::json& params() const { return entry_.at("params"); }

  std::vector<size_t> shape(const std::string& name) const {
    return entry_.at("arrays").at(name).at("shape").get<std::vector<size_t>>();
  }

  // The array's elements as T; its stored element size must be sizeof(T) (this host is
  // little-endian, as the fixtures are).
  template <typename T>
  std::vector<T> array(const std::string& name) const {
    const nlohmann::json& a = entry_.at("arrays").at(name);
    const size_t offset = a.at("offset").get<size_t>();
    const size_t size = a.at("size").get<size_t>();
    REQUIRE(offset + size <= blob_.size());
    REQUIRE(size % sizeof(T) == 0);
    size_t elements = 1;
    for (const size_t d : shape(name)) elements *= d;
    REQUIRE(elements * sizeof(T) == size);
    std::vector<T> out(elements);
    if (size != 0) std::memcpy(out.data(), blob_.data() + offset, size);
    return out;
  }

 private:
  nlohmann::json entry_;
  std::vector<char> blob_;
};

}  // namespace tandem::kernels::testing
