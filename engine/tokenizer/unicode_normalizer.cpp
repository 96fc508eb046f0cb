// Unicode normalization of UTF-8 text through ICU's Normalizer2, limited to HF's Unicode 11.0.
#include "engine/tokenizer/unicode_normalizer.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>
#include <unicode/uniset.h>
#include <unicode/unistr.h>
#include <unicode/utypes.h>

#include <cstdint>
#include <memory>

namespace tandem::tokenizer {

namespace {

// HF tokenizers' normalizers use Unicode 11.0 tables (checked against tokenizers 0.23.3 for every
// code point); ICU's are newer. Characters assigned after 11.0 (e.g. U+32FF SQUARE ERA NAME
// REIWA, U+1F16C RAISED MR SIGN) are therefore left as they are, as HF leaves them.
constexpr const char* kHfUnicodeSet = "[:age=11.0:]";

const icu::Normalizer2* base_instance(UnicodeForm form, UErrorCode& error) {
  switch (form) {
    case UnicodeForm::kNfc:
      return icu::Normalizer2::getNFCInstance(error);
    case UnicodeForm::kNfd:
      return icu::Normalizer2::getNFDInstance(error);
    case UnicodeForm::kNfkc:
      return icu::Normalizer2::getNFKCInstance(error);
    case UnicodeForm::kNfkd:
      return icu::Normalizer2::getNFKDInstance(error);
    case UnicodeForm::kNone:
      break;
  }
  return nullptr;
}

// The four filtered normalizers, built once (thread-safe static initialization) and shared.
struct HfNormalizers {
  UErrorCode error = U_ZERO_ERROR;
  icu::UnicodeSet assigned;
  std::unique_ptr<icu::FilteredNormalizer2> forms[4];

  HfNormalizers() : assigned(icu::UnicodeString(kHfUnicodeSet, -1, US_INV), error) {
    if (U_FAILURE(error)) return;
    assigned.freeze();
    const UnicodeForm all[4] = {UnicodeForm::kNfc, UnicodeForm::kNfd, UnicodeForm::kNfkc,
                                UnicodeForm::kNfkd};
    for (int i = 0; i < 4; ++i) {
      const icu::Normalizer2* base = base_instance(all[i], error);
      if (U_FAILURE(error) || base == nullptr) return;
      forms[i] = std::make_unique<icu::FilteredNormalizer2>(*base, assigned);
    }
  }
};

const icu::Normalizer2* instance_of(UnicodeForm form, UErrorCode& error) {
  static const HfNormalizers normalizers;
  if (U_FAILURE(normalizers.error)) {
    error = normalizers.error;
    return nullptr;
  }
  const int index = static_cast<int>(form) - static_cast<int>(UnicodeForm::kNfc);
  if (index < 0 || index >= 4) return nullptr;
  return normalizers.forms[index].get();
}

}  // namespace

UnicodeForm unicode_form_from_name(std::string_view name) {
  if (name == "NFC") return UnicodeForm::kNfc;
  if (name == "NFD") return UnicodeForm::kNfd;
  if (name == "NFKC") return UnicodeForm::kNfkc;
  if (name == "NFKD") return UnicodeForm::kNfkd;
  return UnicodeForm::kNone;
}

const char* unicode_form_name(UnicodeForm form) {
  switch (form) {
    case UnicodeForm::kNfc:
      return "NFC";
    case UnicodeForm::kNfd:
      return "NFD";
    case UnicodeForm::kNfkc:
      return "NFKC";
    case UnicodeForm::kNfkd:
      return "NFKD";
    case UnicodeForm::kNone:
      break;
  }
  return "none";
}

Result<std::string> normalize_unicode(UnicodeForm form, std::string_view text) {
  if (form == UnicodeForm::kNone || text.empty()) return std::string(text);
  if (text.size() > static_cast<size_t>(INT32_MAX)) {
    return invalid_argument_error("text too long for Unicode normalization");
  }
  UErrorCode error = U_ZERO_ERROR;
  const icu::Normalizer2* normalizer = instance_of(form, error);
  if (U_FAILURE(error) || normalizer == nullptr) {
    return internal_error(std::string("ICU ") + unicode_form_name(form) +
                          " normalizer unavailable: " + u_errorName(error));
  }
  const icu::StringPiece piece(text.data(), static_cast<int32_t>(text.size()));
  if (normalizer->isNormalizedUTF8(piece, error) && U_SUCCESS(error)) return std::string(text);
  error = U_ZERO_ERROR;
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  icu::StringByteSink<std::string> sink(&out);
  normalizer->normalizeUTF8(0, piece, sink, nullptr, error);
  if (U_FAILURE(error)) {
    return internal_error(std::string("ICU ") + unicode_form_name(form) +
                          " normalization failed: " + u_errorName(error));
  }
  return out;
}

}  // namespace tandem::tokenizer
