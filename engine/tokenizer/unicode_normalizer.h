// Unicode normalization forms (NFC/NFD/NFKC/NFKD) of UTF-8 text, as HF tokenizer.json normalizers.
#pragma once

#include <string>
#include <string_view>

#include "base/result.h"

namespace tandem::tokenizer {

// kNone leaves text unchanged.
enum class UnicodeForm { kNone, kNfc, kNfd, kNfkc, kNfkd };

// "NFC"/"NFD"/"NFKC"/"NFKD" (tokenizer.json normalizer type names); kNone for anything else.
UnicodeForm unicode_form_from_name(std::string_view name);
const char* unicode_form_name(UnicodeForm form);

// Normalizes `text` to `form` with ICU's Normalizer2 tables restricted to the characters of
// Unicode 11.0, the version of HF tokenizers' tables (newer characters pass through unchanged,
// exactly as HF leaves them). `text` must be valid UTF-8 (encode()
// sanitizes it first); the result is valid UTF-8. Text that is already normalized is returned
// as is. INTERNAL if ICU fails (its data missing or out of memory). Thread-safe: ICU's
// normalizer instances are shared, immutable singletons.
Result<std::string> normalize_unicode(UnicodeForm form, std::string_view text);

}  // namespace tandem::tokenizer
