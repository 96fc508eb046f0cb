// `tandem logits`: writes the logits of every prompt position as little-endian float32.
#include <bit>
#include <cstdio>
#include <fstream>
#include <string>

#include "cli/commands.h"
#include "cli/model_session.h"

namespace tandem::cli {
namespace {

void print_logits_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: tandem logits --model M --prompt-ids \"1 2 3\" --output FILE [--threads T]\n"
               "Runs the prompt as one batch and writes the logits of every position to FILE:\n"
               "little-endian float32, row-major [n_tokens, n_vocab].\n");
}

}  // namespace

int run_logits(std::span<char*> args) {
  static_assert(std::endian::native == std::endian::little, "logits files are little-endian");
  std::string model_path;
  std::string ids_text;
  std::string output;
  int threads = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    const bool has_value = i + 1 < args.size();
    if (arg == "--help" || arg == "-h") {
      print_logits_usage(stdout);
      return 0;
    } else if (arg == "--model" && has_value) {
      model_path = args[++i];
    } else if (arg == "--prompt-ids" && has_value) {
      ids_text = args[++i];
    } else if (arg == "--output" && has_value) {
      output = args[++i];
    } else if (arg == "--threads" && has_value) {
      auto t = parse_count("--threads", args[++i]);
      if (!t.ok()) {
        std::fprintf(stderr, "tandem logits: %s\n", t.status().message().c_str());
        return 2;
      }
      threads = *t;
    } else {
      std::fprintf(stderr, "tandem logits: unexpected argument '%s'\n", args[i]);
      print_logits_usage(stderr);
      return 2;
    }
  }
  if (model_path.empty() || ids_text.empty() || output.empty()) {
    print_logits_usage(stderr);
    return 2;
  }
  auto ids = parse_token_ids(ids_text);
  if (!ids.ok()) {
    std::fprintf(stderr, "tandem logits: %s\n", ids.status().message().c_str());
    return 2;
  }
  auto session = open_session(model_path, threads);
  if (!session.ok()) {
    std::fprintf(stderr, "tandem logits: %s\n", session.status().to_string().c_str());
    return 2;
  }
  runtime::ModelRunner& runner = (*session)->runner();
  auto cache = runner.new_kv_cache();
  runtime::SequenceInput seq{cache.get(), *ids, 0, runtime::LogitsWanted::kAll};
  runtime::ForwardOutput out;
  const Status s = runner.forward({&seq, 1}, out);
  if (!s.ok()) {
    std::fprintf(stderr, "tandem logits: %s\n", s.to_string().c_str());
    return s.code() == StatusCode::kInternal ? 1 : 2;
  }
  std::ofstream file(output, std::ios::binary | std::ios::trunc);
  file.write(reinterpret_cast<const char*>(out.logits.data()),
             static_cast<std::streamsize>(out.logits.size() * sizeof(float)));
  if (!file.good()) {
    std::fprintf(stderr, "tandem logits: cannot write %s\n", output.c_str());
    return 1;
  }
  std::fprintf(stderr, "wrote %zu x %zu logits to %s\n", ids->size(), out.n_vocab, output.c_str());
  return 0;
}

}  // namespace tandem::cli
