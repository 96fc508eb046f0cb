// `tandem tokenize` and `tandem detokenize`: text <-> token ids with a GGUF's or an HF directory's
// tokenizer.
#include "cli/tokenize_command.h"

#include <charconv>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/model_session.h"
#include "engine/tokenizer/tokenizer.h"

namespace tandem::cli {

namespace {

constexpr const char* kTokenizeUsage =
    "usage: tandem tokenize --model M [--parse-special] [--add-special] [--stats]\n"
    "                       (TEXT | --file F)\n"
    "Prints the token ids of TEXT (or of file F's bytes), separated by spaces.\n"
    "  --model M          a GGUF file (vocab-only files work) or a Hugging Face directory\n"
    "                     with tokenizer.json\n"
    "  --parse-special    match control tokens such as <|im_start|> in the text\n"
    "  --add-special      add BOS/EOS where the vocabulary asks for it\n"
    "  --stats            print only the token count and encode throughput\n";

constexpr const char* kDetokenizeUsage =
    "usage: tandem detokenize --model M [--skip-special] IDS...\n"
    "Prints the text of the token ids (decimal, one per argument or space separated).\n"
    "  --model M          a GGUF file (vocab-only files work) or a Hugging Face directory\n"
    "                     with tokenizer.json\n"
    "  --skip-special     leave out control tokens (BOS, EOS, ...)\n";

Result<tokenizer::Tokenizer> load(const std::string& model, std::ostream& err) {
  auto tok = load_tokenizer(model);
  if (!tok.ok()) err << "tandem: " << tok.status().to_string() << "\n";
  return tok;
}

std::vector<std::string> to_strings(std::span<char*> args) {
  return std::vector<std::string>(args.begin(), args.end());
}

}  // namespace

int tokenize_main(std::span<const std::string> args, std::ostream& out, std::ostream& err) {
  std::string model;
  std::string file;
  std::string text;
  bool have_text = false;
  bool have_file = false;
  bool stats = false;
  tokenizer::EncodeOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      out << kTokenizeUsage;
      return 0;
    } else if (arg == "--model" && i + 1 < args.size()) {
      model = args[++i];
    } else if (arg == "--file" && i + 1 < args.size()) {
      file = args[++i];
      have_file = true;
    } else if (arg == "--parse-special") {
      options.parse_special = true;
    } else if (arg == "--add-special") {
      options.add_special = true;
    } else if (arg == "--stats") {
      stats = true;
    } else if (!arg.starts_with("--") && !have_text) {
      text = arg;
      have_text = true;
    } else {
      err << "tandem tokenize: unexpected argument '" << arg << "'\n" << kTokenizeUsage;
      return 2;
    }
  }
  if (model.empty() || have_text == have_file) {
    err << kTokenizeUsage;
    return 2;
  }
  if (have_file) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
      err << "tandem tokenize: cannot read " << file << "\n";
      return 2;
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  auto tok = load(model, err);
  if (!tok.ok()) return 2;
  const auto start = std::chrono::steady_clock::now();
  const std::clock_t cpu_start = std::clock();
  auto ids = tok->encode(text, options);
  const double cpu_seconds = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!ids.ok()) {
    err << "tandem tokenize: " << ids.status().to_string() << "\n";
    return 1;
  }
  if (stats) {
    const double mb = static_cast<double>(text.size()) / 1e6;
    char line[256];
    std::snprintf(line, sizeof(line),
                  "bytes %zu tokens %zu wall %.3f s (%.2f MB/s) cpu %.3f s (%.2f MB/s)\n",
                  text.size(), ids->size(), seconds, seconds > 0 ? mb / seconds : 0.0, cpu_seconds,
                  cpu_seconds > 0 ? mb / cpu_seconds : 0.0);
    out << line;
    return 0;
  }
  std::string line;
  for (int32_t id : *ids) {
    if (!line.empty()) line.push_back(' ');
    line += std::to_string(id);
  }
  out << line << "\n";
  return 0;
}

int detokenize_main(std::span<const std::string> args, std::ostream& out, std::ostream& err) {
  std::string model;
  tokenizer::DecodeOptions options;
  std::vector<int32_t> ids;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      out << kDetokenizeUsage;
      return 0;
    } else if (arg == "--model" && i + 1 < args.size()) {
      model = args[++i];
    } else if (arg == "--skip-special") {
      options.skip_special = true;
    } else if (!arg.starts_with("--")) {
      // One or more ids separated by spaces (so that `tandem tokenize` output can be pasted).
      std::istringstream words{arg};
      std::string word;
      while (words >> word) {
        int32_t id = 0;
        const auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), id);
        if (ec != std::errc() || end != word.data() + word.size()) {
          err << "tandem detokenize: '" << word << "' is not a token id\n";
          return 2;
        }
        ids.push_back(id);
      }
    } else {
      err << "tandem detokenize: unexpected argument '" << arg << "'\n" << kDetokenizeUsage;
      return 2;
    }
  }
  if (model.empty()) {
    err << kDetokenizeUsage;
    return 2;
  }
  auto tok = load(model, err);
  if (!tok.ok()) return 2;
  auto text = tok->decode(ids, options);
  if (!text.ok()) {
    err << "tandem detokenize: " << text.status().to_string() << "\n";
    return 2;
  }
  out << *text << "\n";
  return 0;
}

int run_tokenize(std::span<char*> args) {
  return tokenize_main(to_strings(args), std::cout, std::cerr);
}

int run_detokenize(std::span<char*> args) {
  return detokenize_main(to_strings(args), std::cout, std::cerr);
}

}  // namespace tandem::cli
