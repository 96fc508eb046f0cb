// `tandem tokenize` and `tandem detokenize`: text <-> token ids with a GGUF's tokenizer.
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "engine/tokenizer/tokenizer.h"

namespace tandem::cli {

namespace {

void print_tokenize_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: tandem tokenize --model M [--parse-special] [--add-special] [--stats]\n"
               "                       (TEXT | --file F)\n"
               "Prints the token ids of TEXT (or of file F's bytes), separated by spaces.\n"
               "  --model M          a GGUF file (vocab-only files work)\n"
               "  --parse-special    match control tokens such as <|im_start|> in the text\n"
               "  --add-special      add BOS/EOS where the vocabulary asks for it\n"
               "  --stats            print only the token count and encode throughput\n");
}

void print_detokenize_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: tandem detokenize --model M [--skip-special] IDS...\n"
               "Prints the text of the token ids (decimal, one per argument or space separated).\n"
               "  --model M          a GGUF file (vocab-only files work)\n"
               "  --skip-special     leave out control tokens (BOS, EOS, ...)\n");
}

Result<tokenizer::Tokenizer> load(const std::string& model) {
  auto tok = tokenizer::Tokenizer::load_gguf(model);
  if (!tok.ok()) std::fprintf(stderr, "tandem: %s\n", tok.status().to_string().c_str());
  return tok;
}

}  // namespace

int run_tokenize(std::span<char*> args) {
  std::string model;
  std::string file;
  std::string text;
  bool have_text = false;
  bool stats = false;
  tokenizer::EncodeOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (arg == "--help" || arg == "-h") {
      print_tokenize_usage(stdout);
      return 0;
    } else if (arg == "--model" && i + 1 < args.size()) {
      model = args[++i];
    } else if (arg == "--file" && i + 1 < args.size()) {
      file = args[++i];
    } else if (arg == "--parse-special") {
      options.parse_special = true;
    } else if (arg == "--add-special") {
      options.add_special = true;
    } else if (arg == "--stats") {
      stats = true;
    } else if (!arg.starts_with("--") && !have_text) {
      text = std::string(arg);
      have_text = true;
    } else {
      std::fprintf(stderr, "tandem tokenize: unexpected argument '%s'\n", args[i]);
      print_tokenize_usage(stderr);
      return 2;
    }
  }
  if (model.empty() || have_text == !file.empty()) {
    print_tokenize_usage(stderr);
    return 2;
  }
  if (!file.empty()) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "tandem tokenize: cannot read %s\n", file.c_str());
      return 2;
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  auto tok = load(model);
  if (!tok.ok()) return 2;
  const auto start = std::chrono::steady_clock::now();
  const std::clock_t cpu_start = std::clock();
  auto ids = tok->encode(text, options);
  const double cpu_seconds = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!ids.ok()) {
    std::fprintf(stderr, "tandem tokenize: %s\n", ids.status().to_string().c_str());
    return 1;
  }
  if (stats) {
    const double mb = static_cast<double>(text.size()) / 1e6;
    std::printf("bytes %zu tokens %zu wall %.3f s (%.2f MB/s) cpu %.3f s (%.2f MB/s)\n",
                text.size(), ids->size(), seconds, seconds > 0 ? mb / seconds : 0.0, cpu_seconds,
                cpu_seconds > 0 ? mb / cpu_seconds : 0.0);
    return 0;
  }
  std::string line;
  for (int32_t id : *ids) {
    if (!line.empty()) line.push_back(' ');
    line += std::to_string(id);
  }
  std::printf("%s\n", line.c_str());
  return 0;
}

int run_detokenize(std::span<char*> args) {
  std::string model;
  tokenizer::DecodeOptions options;
  std::vector<int32_t> ids;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (arg == "--help" || arg == "-h") {
      print_detokenize_usage(stdout);
      return 0;
    } else if (arg == "--model" && i + 1 < args.size()) {
      model = args[++i];
    } else if (arg == "--skip-special") {
      options.skip_special = true;
    } else if (!arg.starts_with("--")) {
      // One or more ids separated by spaces (so that `tandem tokenize` output can be pasted).
      std::istringstream words{std::string(arg)};
      std::string word;
      while (words >> word) {
        int32_t id = 0;
        const auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), id);
        if (ec != std::errc() || end != word.data() + word.size()) {
          std::fprintf(stderr, "tandem detokenize: '%s' is not a token id\n", word.c_str());
          return 2;
        }
        ids.push_back(id);
      }
    } else {
      std::fprintf(stderr, "tandem detokenize: unexpected argument '%s'\n", args[i]);
      print_detokenize_usage(stderr);
      return 2;
    }
  }
  if (model.empty()) {
    print_detokenize_usage(stderr);
    return 2;
  }
  auto tok = load(model);
  if (!tok.ok()) return 2;
  auto text = tok->decode(ids, options);
  if (!text.ok()) {
    std::fprintf(stderr, "tandem detokenize: %s\n", text.status().to_string().c_str());
    return 2;
  }
  std::fwrite(text->data(), 1, text->size(), stdout);
  std::fputc('\n', stdout);
  return 0;
}

}  // namespace tandem::cli
