// tokenizer.json / tokenizer_config.json parsing into Vocab + PreTokenizer, and Tokenizer::load_hf.
#include "engine/tokenizer/hf_tokenizer_json.h"

#include <spdlog/spdlog.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode_normalizer.h"

namespace tandem::tokenizer {

namespace {

using Json = nlohmann::json;

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581

// GPT-2's split regex, which ByteLevel(use_regex=true) applies.
constexpr std::string_view kByteLevelRegex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::string type_of(const Json& j) {
  if (!j.is_object()) return "";
  auto it = j.find("type");
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

bool bool_or(const Json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

// A token given as "text" or {"content": "text", ...}; empty when null/absent.
std::string token_text_of(const Json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object()) {
    auto it = j.find("content");
    if (it != j.end() && it->is_string()) return it->get<std::string>();
  }
  return "";
}

Result<SplitRule> split_rule(const Json& j) {
  SplitRule rule;
  const Json& pattern = j.at("pattern");
  if (pattern.contains("Regex")) {
    rule.pattern = pattern.at("Regex").get<std::string>();
  } else if (pattern.contains("String")) {
    rule.pattern = pattern.at("String").get<std::string>();
    rule.literal = true;
  } else {
    return invalid_argument_error("Split pre-tokenizer without a Regex or String pattern");
  }
  const std::string behavior = j.value("behavior", "Isolated");
  static const std::map<std::string, SplitBehavior, std::less<>> kBehaviors = {
      {"Isolated", SplitBehavior::kIsolated},
      {"Removed", SplitBehavior::kRemoved},
      {"MergedWithPrevious", SplitBehavior::kMergedWithPrevious},
      {"MergedWithNext", SplitBehavior::kMergedWithNext},
      {"Contiguous", SplitBehavior::kContiguous},
  };
  auto it = kBehaviors.find(behavior);
  if (it == kBehaviors.end()) {
    return unimplemented_error("Split behavior '" + behavior + "' is not supported");
  }
  rule.behavior = it->second;
  rule.invert = bool_or(j, "invert", false);
  return rule;
}

// The normalizer section, flattened.
struct NormalizerSpec {
  bool prepend = false;          // Prepend("▁")
  bool replaces_spaces = false;  // Replace(" " -> "▁")
  UnicodeForm unicode_form = UnicodeForm::kNone;
};

// The pre_tokenizer section, flattened.
struct PreTokenizerSpec {
  std::vector<SplitRule> rules;
  bool byte_level = false;
  bool byte_level_prefix_space = false;
  bool metaspace = false;
  std::string prepend_scheme;  // Metaspace: "always", "first", "never"
};

Status read_pre_tokenizer(const Json& j, PreTokenizerSpec& spec) {
  if (j.is_null()) return Status();
  const std::string type = type_of(j);
  if (type == "Sequence") {
    for (const Json& step : j.at("pretokenizers")) {
      TANDEM_RETURN_IF_ERROR(read_pre_tokenizer(step, spec));
    }
    return Status();
  }
  if (spec.byte_level || spec.metaspace) {
    return unimplemented_error("pre-tokenizer step '" + type + "' after ByteLevel/Metaspace");
  }
  if (type == "Split") {
    TANDEM_ASSIGN_OR_RETURN(SplitRule rule, split_rule(j));
    spec.rules.push_back(std::move(rule));
    return Status();
  }
  if (type == "ByteLevel") {
    spec.byte_level = true;
    if (bool_or(j, "add_prefix_space", false)) {
      if (!spec.rules.empty()) {
        return unimplemented_error("ByteLevel add_prefix_space after a Split pre-tokenizer");
      }
      spec.byte_level_prefix_space = true;
    }
    if (bool_or(j, "use_regex", true))
      spec.rules.push_back(SplitRule{std::string(kByteLevelRegex)});
    return Status();
  }
  if (type == "Metaspace") {
    if (!spec.rules.empty()) return unimplemented_error("Metaspace after a Split pre-tokenizer");
    if (j.value("replacement", std::string(kSpmSpace)) != kSpmSpace) {
      return unimplemented_error("Metaspace with a replacement other than U+2581");
    }
    spec.metaspace = true;
    if (j.contains("prepend_scheme")) {
      spec.prepend_scheme = j.at("prepend_scheme").get<std::string>();
    } else {
      spec.prepend_scheme = bool_or(j, "add_prefix_space", true) ? "always" : "never";
    }
    if (spec.prepend_scheme != "always" && spec.prepend_scheme != "first" &&
        spec.prepend_scheme != "never") {
      return unimplemented_error("Metaspace prepend_scheme '" + spec.prepend_scheme + "'");
    }
    return Status();
  }
  return unimplemented_error("pre-tokenizer '" + type +
                             "' is not supported (supported: ByteLevel, Split, Metaspace, "
                             "Sequence)");
}

// The normalizer section: Llama-style SentencePiece Prepend("▁") and Replace(" " -> "▁"), and
// at most one Unicode normalization form (NFC/NFD/NFKC/NFKD). Tandem applies the Unicode form
// first, then the space handling; a compatibility form (NFKC/NFKD) after Replace would turn
// e.g. U+00A0 into a space that HF leaves unreplaced, so that order is refused. Lowercase is
// refused: HF lowercases each character on its own (Rust char::to_lowercase), which differs from
// ICU's context-sensitive rules (final sigma, U+0130), so it cannot be matched exactly here.
Status read_normalizer(const Json& j, NormalizerSpec& spec) {
  if (j.is_null()) return Status();
  const std::string type = type_of(j);
  std::vector<Json> steps;
  if (type == "Sequence") {
    for (const Json& step : j.at("normalizers")) steps.push_back(step);
  } else {
    steps.push_back(j);
  }
  for (const Json& step : steps) {
    const std::string step_type = type_of(step);
    const UnicodeForm form = unicode_form_from_name(step_type);
    if (form != UnicodeForm::kNone) {
      if (spec.unicode_form != UnicodeForm::kNone) {
        return unimplemented_error("several Unicode normalizers (" +
                                   std::string(unicode_form_name(spec.unicode_form)) + ", " +
                                   step_type + ") in one normalizer Sequence");
      }
      if (spec.replaces_spaces && (form == UnicodeForm::kNfkc || form == UnicodeForm::kNfkd)) {
        return unimplemented_error("normalizer " + step_type + " after Replace(\" \" -> U+2581)");
      }
      spec.unicode_form = form;
    } else if (step_type == "Prepend" && step.value("prepend", "") == kSpmSpace) {
      spec.prepend = true;
    } else if (step_type == "Replace" && step.at("pattern").value("String", "") == " " &&
               step.value("content", "") == kSpmSpace) {
      spec.replaces_spaces = true;
    } else {
      return unimplemented_error(
          "normalizer '" + step_type +
          "' is not supported (supported: none, NFC, NFD, NFKC, NFKD, and Prepend/Replace of "
          "U+2581 as Llama uses, alone or in a Sequence; Lowercase is not, since HF's "
          "per-character lowercasing differs from ICU's)");
    }
  }
  return Status();
}

Status read_decoder(const Json& j, bool byte_level) {
  if (j.is_null()) return Status();
  const std::string type = type_of(j);
  std::vector<Json> steps;
  if (type == "Sequence") {
    for (const Json& step : j.at("decoders")) steps.push_back(step);
  } else {
    steps.push_back(j);
  }
  for (const Json& step : steps) {
    const std::string step_type = type_of(step);
    const bool ok =
        byte_level ? step_type == "ByteLevel"
                   : (step_type == "Metaspace" || step_type == "Replace" ||
                      step_type == "ByteFallback" || step_type == "Fuse" || step_type == "Strip");
    if (!ok) {
      return unimplemented_error("decoder '" + step_type + "' is not supported for a " +
                                 (byte_level ? "ByteLevel" : "Metaspace") + " tokenizer");
    }
  }
  return Status();
}

// TemplateProcessing "single": [SpecialToken?] Sequence A [SpecialToken?].
Status read_post_processor(const Json& j, const Vocab& vocab, std::optional<int32_t>& bos,
                           std::optional<int32_t>& eos, bool& decided) {
  const std::string type = type_of(j);
  if (j.is_null() || type == "ByteLevel") return Status();
  if (type != "TemplateProcessing") {
    return unimplemented_error("post_processor '" + type + "' is not supported");
  }
  decided = true;
  const Json& single = j.at("single");
  bool seen_sequence = false;
  for (const Json& piece : single) {
    if (piece.contains("Sequence")) {
      if (seen_sequence) return unimplemented_error("TemplateProcessing with two sequences");
      seen_sequence = true;
      continue;
    }
    const std::string name = piece.at("SpecialToken").at("id").get<std::string>();
    const Json& special = j.at("special_tokens").at(name);
    const Json& ids = special.at("ids");
    if (ids.size() != 1) return unimplemented_error("TemplateProcessing token of several ids");
    const int64_t id = ids[0].get<int64_t>();
    if (id < 0 || id >= vocab.size()) {
      return invalid_argument_error("TemplateProcessing id " + std::to_string(id) +
                                    " outside the vocabulary");
    }
    std::optional<int32_t>& slot = seen_sequence ? eos : bos;
    if (slot) return unimplemented_error("TemplateProcessing with several tokens on one side");
    slot = static_cast<int32_t>(id);
  }
  return Status();
}

Result<HfTokenizerParts> parse_parts(const Json& root, const Json& config) {
  const Json& model = root.at("model");
  if (type_of(model) != "BPE" && !(model.contains("merges") && !model.contains("type"))) {
    return unimplemented_error("tokenizer model '" + type_of(model) +
                               "' is not supported (supported: BPE)");
  }
  if (!model.value("continuing_subword_prefix", Json()).is_null() ||
      !model.value("end_of_word_suffix", Json()).is_null()) {
    return unimplemented_error("BPE continuing_subword_prefix/end_of_word_suffix");
  }
  const Json dropout = model.value("dropout", Json());
  if (!dropout.is_null() && dropout.get<double>() > 0.0) {
    return unimplemented_error("BPE dropout (non-deterministic encoding)");
  }

  auto vocab = std::make_unique<Vocab>();
  // Ids: model.vocab plus added_tokens; holes become unused empty tokens.
  std::map<int64_t, std::string> by_id;
  for (const auto& [text, id_json] : model.at("vocab").items()) {
    const int64_t id = id_json.get<int64_t>();
    if (id < 0 || id >= INT32_MAX) {
      return invalid_argument_error("vocab id " + std::to_string(id) + " is out of range");
    }
    by_id[id] = text;
  }
  const Json added = root.value("added_tokens", Json::array());
  for (const Json& token : added) {
    const int64_t id = token.at("id").get<int64_t>();
    if (id < 0 || id >= INT32_MAX) {
      return invalid_argument_error("added token id " + std::to_string(id) + " is out of range");
    }
    by_id[id] = token.at("content").get<std::string>();
  }
  if (by_id.empty()) return invalid_argument_error("empty vocabulary");
  const int64_t n = by_id.rbegin()->first + 1;
  vocab->tokens.assign(static_cast<size_t>(n), std::string());
  vocab->types.assign(static_cast<size_t>(n), TokenType::kUnused);
  for (auto& [id, text] : by_id) {
    vocab->tokens[id] = std::move(text);
    vocab->types[id] = TokenType::kNormal;
  }
  for (const Json& token : added) {
    const int64_t id = token.at("id").get<int64_t>();
    const bool special = bool_or(token, "special", false);
    vocab->types[id] = special ? TokenType::kControl : TokenType::kUserDefined;
    if (bool_or(token, "lstrip", false) || bool_or(token, "rstrip", false) ||
        bool_or(token, "single_word", false)) {
      spdlog::warn(
          "tokenizer.json: added token '{}' has lstrip/rstrip/single_word, which are "
          "not applied",
          vocab->tokens[id]);
    }
  }

  for (const Json& merge : model.at("merges")) {
    if (merge.is_string()) {
      vocab->merges_storage.push_back(merge.get<std::string>());
    } else {
      const std::string left = merge.at(0).get<std::string>();
      if (left.empty() || left.find(' ') != std::string::npos) {
        return unimplemented_error("merge with a space inside its left part: '" + left + "'");
      }
      vocab->merges_storage.push_back(left + " " + merge.at(1).get<std::string>());
    }
  }
  vocab->merges.assign(vocab->merges_storage.begin(), vocab->merges_storage.end());

  PreTokenizerSpec spec;
  TANDEM_RETURN_IF_ERROR(read_pre_tokenizer(root.value("pre_tokenizer", Json()), spec));
  NormalizerSpec normalizer;
  TANDEM_RETURN_IF_ERROR(read_normalizer(root.value("normalizer", Json()), normalizer));
  const bool replaces_spaces = normalizer.replaces_spaces;
  const bool prepend = normalizer.prepend;
  vocab->unicode_form = normalizer.unicode_form;
  const bool byte_fallback = bool_or(model, "byte_fallback", false);
  const bool spm_style = spec.metaspace || replaces_spaces;
  if (spec.byte_level == spm_style) {
    return unimplemented_error(
        "tokenizer.json must be byte-level (ByteLevel pre-tokenizer) or SentencePiece-style "
        "(Metaspace pre-tokenizer or U+2581 normalizer), not " +
        std::string(spm_style ? "both" : "neither"));
  }
  TANDEM_RETURN_IF_ERROR(read_decoder(root.value("decoder", Json()), spec.byte_level));

  for (int32_t i = 0; i < vocab->size(); ++i) {
    if (vocab->types[i] != TokenType::kUnused) vocab->token_to_id.emplace(vocab->tokens[i], i);
  }
  if (!spec.byte_level) {
    vocab->kind = TokenizerKind::kSentencePiece;
    vocab->model_name = "llama";
    vocab->pre_name = "default";
    vocab->add_space_prefix = spec.metaspace ? spec.prepend_scheme != "never" : prepend;
    vocab->space_prefix_first_only = spec.metaspace && spec.prepend_scheme == "first";
    // SentencePiece merges by score: a token's score is minus the rank of its first merge.
    vocab->scores.assign(vocab->tokens.size(), -1e30f);
    std::string joined;
    for (size_t rank = vocab->merges.size(); rank-- > 0;) {
      const std::string_view merge = vocab->merges[rank];
      const size_t space = merge.find(' ', 1);
      if (space == std::string_view::npos) continue;
      joined.assign(merge.substr(0, space));
      joined.append(merge.substr(space + 1));
      if (auto id = vocab->find(joined)) vocab->scores[*id] = -static_cast<float>(rank);
    }
    if (byte_fallback) {
      for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof(name), "<0x%02X>", b);
        if (auto id = vocab->find(name)) vocab->types[*id] = TokenType::kByte;
      }
    }
  } else {
    vocab->kind = TokenizerKind::kByteLevelBpe;
    vocab->model_name = "gpt2";
    // A Split sequence that is exactly a named pre-tokenizer's (gpt-oss: "gpt-4o") takes its
    // name; the regexes run the same either way.
    const auto named = PreTokenizer::name_of_rules(spec.rules);
    vocab->pre_name = named ? std::string(*named) : "tokenizer.json";
    vocab->byte_level_prefix_space = spec.byte_level_prefix_space;
  }

  const auto find_named = [&](const Json& j) -> std::optional<int32_t> {
    const std::string text = token_text_of(j);
    return text.empty() ? std::nullopt : vocab->find(text);
  };
  const Json unk = model.value("unk_token", Json());
  if (!unk.is_null()) vocab->unk_id = vocab->find(unk.get<std::string>());
  if (const auto id = find_named(config.value("unk_token", Json()))) vocab->unk_id = id;
  if (vocab->unk_id) vocab->types[*vocab->unk_id] = TokenType::kUnknown;
  vocab->bos_id = find_named(config.value("bos_token", Json()));
  vocab->eos_id = find_named(config.value("eos_token", Json()));
  vocab->pad_id = find_named(config.value("pad_token", Json()));

  std::optional<int32_t> template_bos;
  std::optional<int32_t> template_eos;
  bool decided = false;
  TANDEM_RETURN_IF_ERROR(read_post_processor(root.value("post_processor", Json()), *vocab,
                                             template_bos, template_eos, decided));
  if (decided) {
    vocab->add_bos = template_bos.has_value();
    vocab->add_eos = template_eos.has_value();
    if (template_bos) vocab->bos_id = template_bos;
    if (template_eos && !vocab->eos_id) vocab->eos_id = template_eos;
  } else {
    vocab->add_bos = bool_or(config, "add_bos_token", false) && vocab->bos_id;
    vocab->add_eos = bool_or(config, "add_eos_token", false) && vocab->eos_id;
  }

  const Json chat_template = config.value("chat_template", Json());
  if (chat_template.is_string()) {
    vocab->chat_template = chat_template.get<std::string>();
  } else if (chat_template.is_array()) {
    for (const Json& entry : chat_template) {
      if (entry.value("name", "") == "default") vocab->chat_template = entry.value("template", "");
    }
  }
  const Json max_length = config.value("model_max_length", Json());
  if (max_length.is_number_integer()) vocab->context_length = max_length.get<int64_t>();

  HfTokenizerParts parts;
  if (spec.byte_level) {
    TANDEM_ASSIGN_OR_RETURN(PreTokenizer pre,
                            PreTokenizer::from_rules(vocab->pre_name, std::move(spec.rules)));
    parts.pre = std::make_unique<PreTokenizer>(std::move(pre));
  }
  parts.ignore_merges = bool_or(model, "ignore_merges", false);
  parts.vocab = std::move(vocab);
  return parts;
}

Result<std::string> read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found_error("cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (!in.good() && !in.eof()) return data_loss_error("cannot read " + path);
  return ss.str();
}

}  // namespace

Result<HfTokenizerParts> parse_hf_tokenizer(std::string_view tokenizer_json,
                                            std::string_view config_json) {
  try {
    const Json root = Json::parse(tokenizer_json);
    const Json config = config_json.empty() ? Json::object() : Json::parse(config_json);
    if (!root.is_object() || !config.is_object()) {
      return invalid_argument_error("tokenizer.json / tokenizer_config.json is not an object");
    }
    return parse_parts(root, config);
  } catch (const Json::exception& e) {
    return invalid_argument_error(std::string("malformed tokenizer JSON: ") + e.what());
  }
}

Result<Tokenizer> Tokenizer::from_hf_json(std::string_view tokenizer_json,
                                          std::string_view config_json, const std::string& name) {
  auto parts = parse_hf_tokenizer(tokenizer_json, config_json);
  if (!parts.ok()) return parts.status().with_prefix(name);
  HfTokenizerParts p = std::move(parts).value();
  return from_parts(std::move(p.vocab), std::move(p.pre), p.ignore_merges);
}

Result<Tokenizer> Tokenizer::load_hf(const std::string& dir) {
  TANDEM_ASSIGN_OR_RETURN(std::string tokenizer_json, read_whole_file(dir + "/tokenizer.json"));
  std::string config_json;
  auto config = read_whole_file(dir + "/tokenizer_config.json");
  if (config.ok()) {
    config_json = std::move(config).value();
  } else if (config.status().code() != StatusCode::kNotFound) {
    return config.status();
  }
  return from_hf_json(tokenizer_json, config_json, dir);
}

}  // namespace tandem::tokenizer
