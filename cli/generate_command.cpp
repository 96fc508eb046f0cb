// `tandem generate`: greedy decoding of a prompt, streamed to stdout or printed as JSON.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_session.h"
#include "engine/tokenizer/tokenizer.h"

namespace tandem::cli {
namespace {

void print_generate_usage(std::FILE* out) {
  std::fprintf(
      out,
      "usage: tandem generate --model M (--prompt TEXT | --prompt-ids \"1 2 3\")\n"
      "                       [--max-tokens N] [--temperature 0] [--threads T] [--json]\n"
      "Greedy decoding. Streams the text to stdout (token ids when the model has no\n"
      "tokenizer); stops at EOS, N new tokens (default 64) or the context limit.\n"
      "  --json   print {\"token_ids\": [...], \"text\": \"...\", \"finish_reason\": ...}\n");
}

struct GenerateArgs {
  std::string model;
  std::optional<std::string> prompt;
  std::optional<std::string> prompt_ids;
  int max_tokens = 64;
  int threads = 0;
  bool json = false;
};

// 0 = parsed, otherwise the exit code.
int parse_args(std::span<char*> args, GenerateArgs& a) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    const bool has_value = i + 1 < args.size();
    if (arg == "--help" || arg == "-h") {
      print_generate_usage(stdout);
      return -1;
    } else if (arg == "--model" && has_value) {
      a.model = args[++i];
    } else if (arg == "--prompt" && has_value) {
      a.prompt = args[++i];
    } else if (arg == "--prompt-ids" && has_value) {
      a.prompt_ids = args[++i];
    } else if (arg == "--json") {
      a.json = true;
    } else if ((arg == "--max-tokens" || arg == "--threads") && has_value) {
      auto v = parse_count(args[i], args[i + 1]);
      ++i;
      if (!v.ok()) {
        std::fprintf(stderr, "tandem generate: %s\n", v.status().message().c_str());
        return 2;
      }
      (arg == "--threads" ? a.threads : a.max_tokens) = *v;
    } else if (arg == "--temperature" && has_value) {
      const std::string value = args[++i];
      char* end = nullptr;
      const double t = std::strtod(value.c_str(), &end);
      if (end == value.c_str() || *end != '\0' || t != 0.0) {
        std::fprintf(stderr, "tandem generate: sampling is not built yet; use --temperature 0\n");
        return 2;
      }
    } else {
      std::fprintf(stderr, "tandem generate: unexpected argument '%s'\n", args[i]);
      print_generate_usage(stderr);
      return 2;
    }
  }
  if (a.model.empty() || a.prompt.has_value() == a.prompt_ids.has_value()) {
    print_generate_usage(stderr);
    return 2;
  }
  return 0;
}

}  // namespace

int run_generate(std::span<char*> args) {
  GenerateArgs a;
  if (int rc = parse_args(args, a); rc != 0) return rc < 0 ? 0 : rc;

  auto session = open_session(a.model, a.threads);
  if (!session.ok()) {
    std::fprintf(stderr, "tandem generate: %s\n", session.status().to_string().c_str());
    return 2;
  }
  runtime::ModelRunner& runner = *(*session)->runner;
  std::optional<tokenizer::Tokenizer> tok;
  if ((*session)->checkpoint.format == model::CheckpointFormat::kGguf) {
    auto t = tokenizer::Tokenizer::load_gguf(a.model);
    if (t.ok()) tok.emplace(std::move(t).value());
  }
  std::vector<int32_t> ids;
  if (a.prompt) {
    if (!tok) {
      std::fprintf(stderr,
                   "tandem generate: %s has no tokenizer Tandem can read; use "
                   "--prompt-ids\n",
                   a.model.c_str());
      return 2;
    }
    tokenizer::EncodeOptions eo;
    eo.parse_special = true;
    eo.add_special = true;
    auto enc = tok->encode(*a.prompt, eo);
    if (!enc.ok() || enc->empty()) {
      std::fprintf(stderr, "tandem generate: cannot tokenize the prompt%s%s\n",
                   enc.ok() ? "" : ": ", enc.ok() ? "" : enc.status().message().c_str());
      return 2;
    }
    ids = std::move(enc).value();
  } else {
    auto parsed = parse_token_ids(*a.prompt_ids);
    if (!parsed.ok()) {
      std::fprintf(stderr, "tandem generate: %s\n", parsed.status().message().c_str());
      return 2;
    }
    ids = std::move(parsed).value();
  }

  std::optional<int32_t> eos;
  if (runner.spec().eos_token_id) eos = static_cast<int32_t>(*runner.spec().eos_token_id);
  if (tok && tok->eos_id()) eos = tok->eos_id();

  auto cache = runner.new_kv_cache();
  runtime::ForwardOutput out;
  std::vector<int32_t> generated;
  std::string text;
  std::optional<tokenizer::StreamingDetokenizer> detok;
  if (tok) detok.emplace(*tok, tokenizer::DecodeOptions{.skip_special = true});
  std::string finish = "length";
  std::vector<int32_t> step = ids;
  while (static_cast<int>(generated.size()) < a.max_tokens) {
    if (cache->length() + step.size() > cache->max_positions()) break;  // context limit
    runtime::SequenceInput seq{cache.get(), step, cache->length(), runtime::LogitsWanted::kLast};
    const Status s = runner.forward({&seq, 1}, out);
    if (!s.ok()) {
      std::fprintf(stderr, "tandem generate: %s\n", s.to_string().c_str());
      return 2;
    }
    const auto row = out.row(0, 0);
    const int32_t next =
        static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
    if (eos && next == *eos) {
      finish = "stop";
      break;
    }
    generated.push_back(next);
    std::string piece;
    if (detok) {
      auto p = detok->feed(next);
      if (p.ok()) piece = std::move(p).value();
    } else {
      piece = (generated.size() > 1 ? " " : "") + std::to_string(next);
    }
    text += piece;
    if (!a.json) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    }
    step.assign(1, next);
  }
  if (detok) {
    const std::string rest = detok->flush();
    text += rest;
    if (!a.json) std::fwrite(rest.data(), 1, rest.size(), stdout);
  }
  if (a.json) {
    nlohmann::json j;
    j["token_ids"] = generated;
    j["text"] = tok ? text : std::string();
    j["finish_reason"] = finish;
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::printf("\n");
  }
  return 0;
}

}  // namespace tandem::cli
