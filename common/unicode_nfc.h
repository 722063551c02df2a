#ifndef FOLIO_COMMON_UNICODE_NFC_H_
#define FOLIO_COMMON_UNICODE_NFC_H_

// Unicode Normalization Form C (UAX #15): canonical decomposition, canonical
// ordering, canonical composition. What the NFC normalizer of a tokenizer.json
// (Qwen2, Qwen3) does to the text before it is split and merged.
//
// The tables (common/unicode_nfc_tables.inc) come from Python's unicodedata
// by tools/make_unicode_nfc_tables.py, for the characters of Unicode 9.0:
// Hugging Face `tokenizers` normalizes with Unicode 9.0 tables, so a mark or
// composite added since is left alone, as there (NfcUnicodeVersion()).
// Hangul syllables are composed and decomposed algorithmically.
// Pure functions, thread-safe; the lookup structures are built on first use.

#include <string>
#include <string_view>

namespace folio {

// The NFC of `utf8`. Bytes that are not well-formed UTF-8 are copied through
// unchanged and separate the text around them (nothing composes across one).
// Text that is already NFC (all ASCII, for instance) is returned as is after a
// quick check, without decomposing anything.
std::string NfcNormalize(std::string_view utf8);

// The Unicode version whose characters the tables cover: "9.0".
std::string_view NfcUnicodeVersion();

}  // namespace folio

#endif  // FOLIO_COMMON_UNICODE_NFC_H_
