// Test helper: a YAML (or any) file written to a fresh temporary directory, removed afterwards.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace tandem::config::testing {

class TempFile {
 public:
  explicit TempFile(const std::string& contents, const std::string& name = "tandem.yaml") {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "tandem_config_test_XXXXXX").string();
    dir_ = mkdtemp(pattern.data());
    path_ = (std::filesystem::path(dir_) / name).string();
    std::ofstream(path_, std::ios::binary) << contents;
  }
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  const std::string& path() const { return path_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  std::string path_;
};

}  // namespace tandem::config::testing
