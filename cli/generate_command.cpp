// `tandem generate`: decodes a prompt with the sampler and stop conditions, streamed or as JSON.
#include "cli/generate_command.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_session.h"
#include "engine/runtime/request.h"
#include "engine/runtime/sampler.h"
#include "engine/runtime/sampling_params.h"
#include "engine/runtime/stop_conditions.h"
#include "engine/tokenizer/tokenizer.h"

namespace tandem::cli {
namespace {

constexpr const char* kUsage =
    "usage: tandem generate --model M (--prompt TEXT | --prompt-ids \"1 2 3\")\n"
    "         [--max-tokens N] [--min-tokens N] [--temperature T] [--top-k K] [--top-p P]\n"
    "         [--min-p P] [--repetition-penalty R] [--presence-penalty P]\n"
    "         [--frequency-penalty F] [--seed S] [--stop STR]... [--stop-token-id ID]...\n"
    "         [--ignore-eos] [--json] [--threads T]\n"
    "Streams the generated text to stdout (token ids when the model has no tokenizer).\n"
    "M is a GGUF file or a Hugging Face directory (its tokenizer.json, when present, gives\n"
    "text in and out). The default is greedy decoding (--temperature 0); N defaults to 64.\n"
    "Stops at EOS (unless --ignore-eos), a stop token id, a stop string (matched on the text,\n"
    "which then ends before it), N new tokens or the context limit.\n"
    "  --json   print {\"token_ids\", \"text\", \"finish_reason\", \"stop_reason\"}: token_ids "
    "are\n"
    "           the generated ids without a matched EOS / stop token id (a stop string's\n"
    "           tokens stay); stop_reason is the matched stop string or token id, or null\n";

struct GenerateArgs {
  std::string model;
  std::optional<std::string> prompt;
  std::optional<std::string> prompt_ids;
  runtime::SamplingParams params;
  int threads = 0;
  bool json = false;
};

// Parses all of `text` as a T (integer or floating point); nullopt for anything else.
template <typename T>
std::optional<T> parse_number(const std::string& text) {
  T value{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(value)) return std::nullopt;
  }
  return value;
}

// 0 = parsed, -1 = help printed, otherwise the exit code.
int parse_args(std::span<const std::string> args, GenerateArgs& a, std::ostream& out,
               std::ostream& err) {
  runtime::SamplingParams& p = a.params;
  p.temperature = 0.0f;  // the command line's default is greedy (SamplingParams' is 1)
  p.max_tokens.reset();  // set below: 64, or the context length when that is shorter
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      out << kUsage;
      return -1;
    }
    if (arg == "--json") {
      a.json = true;
      continue;
    }
    if (arg == "--ignore-eos") {
      p.ignore_eos = true;
      continue;
    }
    if (!arg.starts_with("--")) {
      err << "tandem generate: unexpected argument '" << arg << "'\n" << kUsage;
      return 2;
    }
    if (i + 1 >= args.size()) {
      err << "tandem generate: " << arg << " needs a value\n";
      return 2;
    }
    const std::string& value = args[++i];
    bool ok = true;
    auto set_float = [&](float& field) {
      const auto v = parse_number<float>(value);
      ok = v.has_value();
      if (ok) field = *v;
    };
    auto set_int = [&]<typename T>(T& field) {
      const auto v = parse_number<T>(value);
      ok = v.has_value();
      if (ok) field = *v;
    };
    if (arg == "--model") {
      a.model = value;
    } else if (arg == "--prompt") {
      a.prompt = value;
    } else if (arg == "--prompt-ids") {
      a.prompt_ids = value;
    } else if (arg == "--stop") {
      p.stop.push_back(value);
    } else if (arg == "--temperature") {
      set_float(p.temperature);
    } else if (arg == "--top-p") {
      set_float(p.top_p);
    } else if (arg == "--min-p") {
      set_float(p.min_p);
    } else if (arg == "--repetition-penalty") {
      set_float(p.repetition_penalty);
    } else if (arg == "--presence-penalty") {
      set_float(p.presence_penalty);
    } else if (arg == "--frequency-penalty") {
      set_float(p.frequency_penalty);
    } else if (arg == "--top-k") {
      set_int(p.top_k);
    } else if (arg == "--min-tokens") {
      set_int(p.min_tokens);
    } else if (arg == "--max-tokens") {
      int64_t n = 0;
      set_int(n);
      p.max_tokens = n;
    } else if (arg == "--seed") {
      uint64_t seed = 0;
      set_int(seed);
      p.seed = seed;
    } else if (arg == "--stop-token-id") {
      int32_t id = 0;
      set_int(id);
      p.stop_token_ids.push_back(id);
    } else if (arg == "--threads") {
      set_int(a.threads);
      ok = ok && a.threads >= 0;
    } else {
      err << "tandem generate: unknown flag '" << arg << "'\n" << kUsage;
      return 2;
    }
    if (!ok) {
      err << "tandem generate: " << arg << " wants a number, not '" << value << "'\n";
      return 2;
    }
  }
  if (a.model.empty() || a.prompt.has_value() == a.prompt_ids.has_value()) {
    err << "tandem generate: give --model and exactly one of --prompt / --prompt-ids\n" << kUsage;
    return 2;
  }
  return 0;
}

void add_eos(std::vector<int32_t>& eos, std::optional<int64_t> id) {
  if (id && std::find(eos.begin(), eos.end(), *id) == eos.end()) {
    eos.push_back(static_cast<int32_t>(*id));
  }
}

}  // namespace

int generate_main(std::span<const std::string> args, std::ostream& out, std::ostream& err) {
  GenerateArgs a;
  if (int rc = parse_args(args, a, out, err); rc != 0) return rc < 0 ? 0 : rc;

  auto session = open_session(a.model, a.threads);
  if (!session.ok()) {
    err << "tandem generate: " << session.status().to_string() << "\n";
    return 2;
  }
  runtime::ModelRunner& runner = (*session)->runner();
  std::optional<tokenizer::Tokenizer> tok;
  std::string no_tokenizer_why;
  {
    auto t = load_tokenizer(a.model);
    if (t.ok()) {
      tok.emplace(std::move(t).value());
    } else {
      no_tokenizer_why = t.status().to_string();
    }
  }
  if (!tok && (a.prompt || !a.params.stop.empty())) {
    err << "tandem generate: " << (a.prompt ? "--prompt" : "--stop") << " needs a tokenizer, and "
        << a.model << " has none Tandem can read (" << no_tokenizer_why
        << "); use --prompt-ids and --stop-token-id\n";
    return 2;
  }

  const int64_t n_vocab = static_cast<int64_t>(runner.spec().vocab_size);
  auto cache = runner.new_kv_cache();
  const int64_t context = static_cast<int64_t>(cache->max_positions());
  runtime::SamplingLimits limits;
  limits.n_vocab = n_vocab;
  limits.max_tokens_cap = context;
  if (!a.params.max_tokens) a.params.max_tokens = std::min<int64_t>(64, context);
  if (const Status s = a.params.validate(limits); !s.ok()) {
    err << "tandem generate: " << s.message() << "\n";
    return 2;
  }

  std::vector<int32_t> ids;
  if (a.prompt) {
    tokenizer::EncodeOptions eo;
    eo.parse_special = true;
    eo.add_special = true;
    auto enc = tok->encode(*a.prompt, eo);
    if (!enc.ok() || enc->empty()) {
      err << "tandem generate: cannot tokenize the prompt"
          << (enc.ok() ? std::string() : ": " + enc.status().message()) << "\n";
      return 2;
    }
    ids = std::move(enc).value();
  } else {
    auto parsed = parse_token_ids(*a.prompt_ids);
    if (!parsed.ok()) {
      err << "tandem generate: " << parsed.status().message() << "\n";
      return 2;
    }
    ids = std::move(parsed).value();
  }
  for (int32_t id : ids) {
    if (id >= n_vocab) {
      err << "tandem generate: prompt token id " << id << " is outside the vocabulary (" << n_vocab
          << " tokens)\n";
      return 2;
    }
  }
  if (static_cast<int64_t>(ids.size()) >= context) {
    err << "tandem generate: the prompt has " << ids.size() << " tokens; the context holds "
        << context << "\n";
    return 2;
  }

  std::vector<int32_t> eos;
  add_eos(eos, runner.spec().eos_token_id ? std::optional<int64_t>(*runner.spec().eos_token_id)
                                          : std::nullopt);
  if (tok && tok->eos_id()) add_eos(eos, *tok->eos_id());

  runtime::Sampler sampler(a.params, static_cast<int32_t>(n_vocab), ids, eos);
  runtime::StopConditions stop(a.params, eos, static_cast<int64_t>(ids.size()), context);
  std::optional<tokenizer::StreamingDetokenizer> detok;
  if (tok) detok.emplace(*tok, tokenizer::DecodeOptions{.skip_special = true});

  std::vector<int32_t> generated;
  std::string text;
  runtime::StopDecision last;
  runtime::ForwardOutput fwd;
  std::vector<int32_t> step = ids;
  while (!last.finished) {
    runtime::SequenceInput seq{cache.get(), step, cache->length(), runtime::LogitsWanted::kLast};
    if (const Status s = runner.forward({&seq, 1}, fwd); !s.ok()) {
      err << "tandem generate: " << s.to_string() << "\n";
      return 1;
    }
    auto next = sampler.sample(fwd.row(0, 0));
    if (!next.ok()) {
      err << "tandem generate: " << next.status().to_string() << "\n";
      return 1;
    }
    std::string piece;
    if (detok) {
      auto p = detok->feed(*next);
      if (p.ok()) piece = std::move(p).value();
    } else {
      piece = (generated.empty() ? "" : " ") + std::to_string(*next);
    }
    generated.push_back(*next);
    last = stop.feed(*next, piece);
    if (last.finished && last.reason == runtime::FinishReason::kLength && detok) {
      last.text += detok->flush();  // an unfinished UTF-8 character becomes U+FFFD
    }
    text += last.text;
    if (!a.json && !last.text.empty()) {
      out << last.text;
      out.flush();
    }
    step.assign(1, *next);
  }
  if (last.matched_token_id) generated.pop_back();  // the matched EOS / stop token itself

  if (a.json) {
    nlohmann::json j;
    j["token_ids"] = generated;
    j["text"] = tok ? text : std::string();
    j["finish_reason"] = std::string(runtime::finish_reason_name(last.reason));
    if (last.matched_stop_string) {
      j["stop_reason"] = *last.matched_stop_string;
    } else if (last.matched_token_id) {
      j["stop_reason"] = *last.matched_token_id;
    } else {
      j["stop_reason"] = nullptr;
    }
    out << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    out << "\n";
  }
  out.flush();
  return 0;
}

int run_generate(std::span<char*> args) {
  const std::vector<std::string> strings(args.begin(), args.end());
  return generate_main(strings, std::cout, std::cerr);
}

}  // namespace tandem::cli
