// Test-side safetensors writer: builds valid and deliberately broken files byte by byte.
#pragma once

#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace tandem::model::testing {

// 8-byte little-endian `n`, then `header`, then `data`.
inline std::string safetensors_bytes_with_length(uint64_t n, const std::string& header,
                                                 const std::string& data) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

// A well-formed length prefix for `header`.
inline std::string safetensors_bytes(const std::string& header, const std::string& data) {
  return safetensors_bytes_with_length(header.size(), header, data);
}

// One header entry: "name": {"dtype": .., "shape": [..], "data_offsets": [b, e]}.
inline std::string entry(const std::string& name, const std::string& dtype,
                         const std::string& shape, uint64_t begin, uint64_t end) {
  return "\"" + name + "\": {\"dtype\": \"" + dtype + "\", \"shape\": " + shape +
         ", \"data_offsets\": [" + std::to_string(begin) + ", " + std::to_string(end) + "]}";
}

inline std::string f32_bytes(const std::vector<float>& values) {
  std::string out(values.size() * 4, '\0');
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

inline std::span<const uint8_t> as_span(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// A fresh directory under /tmp, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    char name[] = "/tmp/tandem_st_XXXXXX";
    REQUIRE(mkdtemp(name) != nullptr);
    path_ = name;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string write(const std::string& name, const std::string& content) const {
    const std::string p = path_ + "/" + name;
    std::filesystem::create_directories(std::filesystem::path(p).parent_path());
    std::ofstream f(p, std::ios::binary);
    f.write(content.data(), static_cast<std::streamsize>(content.size()));
    REQUIRE(f.good());
    return p;
  }

 private:
  std::string path_;
};

// Reads a whole file (fixtures).
inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE(f.good());
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

}  // namespace tandem::model::testing
