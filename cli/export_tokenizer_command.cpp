// `tandem export-tokenizer MODEL DIR`: writes a GGUF's tokenizer as a Hugging Face tokenizer dir.
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.h"
#include "engine/model/gguf_file.h"
#include "engine/tokenizer/tokenizer_export.h"

namespace tandem::cli {

namespace {

void print_export_tokenizer_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: tandem export-tokenizer MODEL DIR\n"
               "Writes MODEL's tokenizer (a GGUF file; vocab-only files work) into DIR as\n"
               "tokenizer.json, tokenizer_config.json, config.json and generation_config.json,\n"
               "for tools that load Hugging Face tokenizers.\n");
}

}  // namespace

int run_export_tokenizer(std::span<char*> args) {
  std::vector<std::string> positional;
  for (char* arg : args) {
    const std::string_view a = arg;
    if (a == "--help" || a == "-h") {
      print_export_tokenizer_usage(stdout);
      return 0;
    }
    if (a.starts_with("--")) {
      std::fprintf(stderr, "tandem export-tokenizer: unknown option '%s'\n", arg);
      print_export_tokenizer_usage(stderr);
      return 2;
    }
    positional.emplace_back(a);
  }
  if (positional.size() != 2) {
    print_export_tokenizer_usage(stderr);
    return 2;
  }
  auto file = model::GgufFile::open(positional[0]);
  if (!file.ok()) {
    std::fprintf(stderr, "tandem: %s\n", file.status().to_string().c_str());
    return 1;
  }
  auto files = tokenizer::export_hf_tokenizer(file.value());
  if (!files.ok()) {
    std::fprintf(stderr, "tandem: %s\n", files.status().to_string().c_str());
    return 1;
  }
  const Status written = tokenizer::write_hf_tokenizer_dir(files.value(), positional[1]);
  if (!written.ok()) {
    std::fprintf(stderr, "tandem: %s\n", written.to_string().c_str());
    return 1;
  }
  std::printf(
      "wrote %s/{tokenizer.json,tokenizer_config.json,config.json,generation_config.json}\n",
      positional[1].c_str());
  return 0;
}

}  // namespace tandem::cli
