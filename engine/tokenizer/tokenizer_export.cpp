// GGUF tokenizer -> Hugging Face tokenizer directory (tokenizer.json and the config files).
#include "engine/tokenizer/tokenizer_export.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/file_replace.h"
#include "engine/tokenizer/pre_tokenizer.h"
#include "engine/tokenizer/utf8.h"
#include "engine/tokenizer/vocab.h"

namespace tandem::tokenizer {

namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581

// Rewrites a PCRE2 pattern of pre_tokenizer.cpp into one that Oniguruma (the regex engine of
// the `tokenizers` library) reads the same way: \p{L&} is unknown there, and '$' means "end of
// line" in its Ruby syntax while PCRE2_DOLLAR_ENDONLY makes it "end of subject" (\z in both).
std::string to_oniguruma(std::string_view pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern.substr(i, 6) == "\\p{L&}") {
      out.append("[\\p{Lu}\\p{Ll}\\p{Lt}]");
      i += 5;
    } else if (pattern[i] == '\\' && i + 1 < pattern.size()) {
      out.append(pattern.substr(i, 2));
      ++i;
    } else if (pattern[i] == '$') {
      out.append("\\z");
    } else {
      out.push_back(pattern[i]);
    }
  }
  return out;
}

Json token_or_null(const Vocab& vocab, std::optional<int32_t> id) {
  return id ? Json(vocab.tokens[*id]) : Json(nullptr);
}

Json id_or_null(std::optional<int32_t> id) {
  return id ? Json(*id) : Json(nullptr);
}

bool is_special(TokenType type) {
  return type == TokenType::kControl || type == TokenType::kUnknown;
}

Json added_tokens(const Vocab& vocab) {
  Json out = Json::array();
  for (int32_t id = 0; id < vocab.size(); ++id) {
    const TokenType type = vocab.types[id];
    if (!is_special(type) && type != TokenType::kUserDefined) continue;
    if (vocab.tokens[id].empty()) continue;
    out.push_back(Json{{"id", id},
                       {"content", vocab.tokens[id]},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", is_special(type)}});
  }
  return out;
}

// [BOS] $A [EOS] as the vocabulary asks; null when nothing is added.
Json post_processor(const Vocab& vocab) {
  const bool bos = vocab.add_bos && vocab.bos_id;
  const bool eos = vocab.add_eos && vocab.eos_id;
  if (!bos && !eos) return nullptr;
  Json special = Json::object();
  const auto piece = [&](int32_t id) {
    const std::string& text = vocab.tokens[id];
    special[text] = Json{{"id", text}, {"ids", {id}}, {"tokens", {text}}};
    return Json{{"SpecialToken", {{"id", text}, {"type_id", 0}}}};
  };
  Json single = Json::array();
  if (bos) single.push_back(piece(*vocab.bos_id));
  single.push_back(Json{{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  if (eos) single.push_back(piece(*vocab.eos_id));
  Json pair = single;
  if (bos) pair.push_back(piece(*vocab.bos_id));
  pair.push_back(Json{{"Sequence", {{"id", "B"}, {"type_id", 1}}}});
  if (eos) pair.push_back(piece(*vocab.eos_id));
  return Json{{"type", "TemplateProcessing"},
              {"single", single},
              {"pair", pair},
              {"special_tokens", special}};
}

Json vocab_object(const Vocab& vocab) {
  Json out = Json::object();
  // ordered_json's operator[] searches linearly; the keys are unique, so append directly.
  auto& entries = static_cast<Json::object_t::Container&>(out.get_ref<Json::object_t&>());
  entries.reserve(static_cast<size_t>(vocab.size()));
  for (int32_t id = 0; id < vocab.size(); ++id) {
    // Duplicate texts: the lowest id keeps the text (as Vocab::find does).
    if (vocab.find(vocab.tokens[id]) == id) entries.emplace_back(vocab.tokens[id], Json(id));
  }
  return out;
}

Json byte_level_merges(const Vocab& vocab) {
  Json out = Json::array();
  for (std::string_view merge : vocab.merges) {
    const size_t space = merge.find(' ', 1);
    if (space == std::string_view::npos) continue;
    out.push_back(Json::array({merge.substr(0, space), merge.substr(space + 1)}));
  }
  return out;
}

// SentencePiece BPE merges by score: every split of a mergeable token into two tokens, the
// highest-scoring result first (ties: lower result id, then shorter left part).
Json spm_merges(const Vocab& vocab) {
  struct Candidate {
    float score;
    int32_t result;
    int32_t left;
    int32_t right;
  };
  std::vector<Candidate> candidates;
  for (int32_t id = 0; id < vocab.size(); ++id) {
    const TokenType type = vocab.types[id];
    if (type != TokenType::kNormal && type != TokenType::kUserDefined) continue;
    const std::string_view text = vocab.tokens[id];
    for (size_t cut = utf8_length(static_cast<uint8_t>(text[0])); cut < text.size();
         cut += utf8_length(static_cast<uint8_t>(text[cut]))) {
      const auto left = vocab.find(text.substr(0, cut));
      const auto right = vocab.find(text.substr(cut));
      if (left && right) candidates.push_back({vocab.scores[id], id, *left, *right});
    }
  }
  std::stable_sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) {
    if (a.score != b.score) return a.score > b.score;
    return a.result < b.result;
  });
  Json out = Json::array();
  for (const Candidate& c : candidates) {
    out.push_back(Json::array({vocab.tokens[c.left], vocab.tokens[c.right]}));
  }
  return out;
}

Result<Json> tokenizer_json(const Vocab& vocab) {
  const bool spm = vocab.kind == TokenizerKind::kSentencePiece;
  Json model{{"type", "BPE"},
             {"dropout", nullptr},
             {"unk_token", spm ? token_or_null(vocab, vocab.unk_id) : Json(nullptr)},
             {"continuing_subword_prefix", nullptr},
             {"end_of_word_suffix", nullptr},
             {"fuse_unk", spm},
             {"byte_fallback", spm},
             {"ignore_merges", vocab.pre_name == "llama-bpe" || vocab.pre_name == "llama3"},
             {"vocab", vocab_object(vocab)},
             {"merges", spm ? spm_merges(vocab) : byte_level_merges(vocab)}};
  Json normalizer;
  Json pre;
  Json decoder;
  if (spm) {
    // Llama's normalizer rather than Metaspace: Metaspace does not prepend U+2581 to text that
    // already starts with a space, while the GGUF (llama.cpp) tokenizer always does.
    Json steps = Json::array();
    if (vocab.add_space_prefix) steps.push_back(Json{{"type", "Prepend"}, {"prepend", kSpmSpace}});
    steps.push_back(
        Json{{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpmSpace}});
    normalizer = Json{{"type", "Sequence"}, {"normalizers", steps}};
    pre = nullptr;
    steps = Json::array();
    steps.push_back(
        Json{{"type", "Replace"}, {"pattern", {{"String", kSpmSpace}}}, {"content", " "}});
    steps.push_back(Json{{"type", "ByteFallback"}});
    steps.push_back(Json{{"type", "Fuse"}});
    if (vocab.add_space_prefix) {
      steps.push_back(Json{{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    }
    decoder = Json{{"type", "Sequence"}, {"decoders", steps}};
  } else {
    TANDEM_ASSIGN_OR_RETURN(auto patterns, PreTokenizer::named_patterns(vocab.pre_name));
    Json steps = Json::array();
    for (std::string_view pattern : patterns) {
      steps.push_back(Json{{"type", "Split"},
                           {"pattern", {{"Regex", to_oniguruma(pattern)}}},
                           {"behavior", "Isolated"},
                           {"invert", false}});
    }
    steps.push_back(Json{{"type", "ByteLevel"},
                         {"add_prefix_space", false},
                         {"trim_offsets", false},
                         {"use_regex", false}});
    pre = Json{{"type", "Sequence"}, {"pretokenizers", steps}};
    decoder = Json{{"type", "ByteLevel"},
                   {"add_prefix_space", false},
                   {"trim_offsets", false},
                   {"use_regex", false}};
  }
  return Json{{"version", "1.0"},
              {"truncation", nullptr},
              {"padding", nullptr},
              {"added_tokens", added_tokens(vocab)},
              {"normalizer", normalizer},
              {"pre_tokenizer", pre},
              {"post_processor", post_processor(vocab)},
              {"decoder", decoder},
              {"model", model}};
}

// End-of-generation ids: eos, plus eot/eom when the GGUF names them.
Result<Json> eos_ids(const model::GgufFile& file, const Vocab& vocab) {
  std::vector<int64_t> ids;
  if (vocab.eos_id) ids.push_back(*vocab.eos_id);
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    if (!file.contains(key)) continue;
    TANDEM_ASSIGN_OR_RETURN(int64_t id, file.get_i64(key));
    if (id >= 0 && id < vocab.size() && std::find(ids.begin(), ids.end(), id) == ids.end()) {
      ids.push_back(id);
    }
  }
  if (ids.empty()) return Json(nullptr);
  if (ids.size() == 1) return Json(ids[0]);
  return Json(ids);
}

std::string dump(const Json& j) {
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace

Result<HfTokenizerFiles> export_hf_tokenizer(const model::GgufFile& file) {
  TANDEM_ASSIGN_OR_RETURN(Vocab vocab, Vocab::from_gguf(file));
  auto tokenizer = tokenizer_json(vocab);
  if (!tokenizer.ok()) return tokenizer.status().with_prefix(file.name());
  TANDEM_ASSIGN_OR_RETURN(Json eos, eos_ids(file, vocab));
  TANDEM_ASSIGN_OR_RETURN(std::string_view arch, file.get_string_or("general.architecture", ""));

  Json config{{"tokenizer_class", "PreTrainedTokenizerFast"},
              {"add_bos_token", vocab.add_bos},
              {"add_eos_token", vocab.add_eos},
              {"bos_token", token_or_null(vocab, vocab.bos_id)},
              {"eos_token", token_or_null(vocab, vocab.eos_id)},
              {"pad_token", token_or_null(vocab, vocab.pad_id)},
              {"unk_token", token_or_null(vocab, vocab.unk_id)},
              {"clean_up_tokenization_spaces", false}};
  if (vocab.context_length > 0) config["model_max_length"] = vocab.context_length;
  if (!vocab.chat_template.empty()) config["chat_template"] = vocab.chat_template;

  Json model_config{{"bos_token_id", id_or_null(vocab.bos_id)},
                    {"eos_token_id", eos},
                    {"pad_token_id", id_or_null(vocab.pad_id)},
                    {"vocab_size", vocab.size()}};
  if (!arch.empty()) model_config["model_type"] = std::string(arch);
  if (vocab.context_length > 0) model_config["max_position_embeddings"] = vocab.context_length;
  Json generation{{"bos_token_id", id_or_null(vocab.bos_id)},
                  {"eos_token_id", eos},
                  {"pad_token_id", id_or_null(vocab.pad_id)}};

  HfTokenizerFiles files;
  files.tokenizer_json = dump(tokenizer.value());
  files.tokenizer_config_json = dump(config);
  files.config_json = dump(model_config);
  files.generation_config_json = dump(generation);
  return files;
}

Status write_hf_tokenizer_dir(const HfTokenizerFiles& files, const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return internal_error("cannot create " + dir + ": " + error.message());
  const std::pair<const char*, const std::string*> outputs[] = {
      {"tokenizer.json", &files.tokenizer_json},
      {"tokenizer_config.json", &files.tokenizer_config_json},
      {"config.json", &files.config_json},
      {"generation_config.json", &files.generation_config_json},
  };
  for (const auto& [name, text] : outputs) {
    TANDEM_RETURN_IF_ERROR(replace_file(dir + "/" + name, *text));
  }
  return Status();
}

}  // namespace tandem::tokenizer
