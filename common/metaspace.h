#ifndef FOLIO_COMMON_METASPACE_H_
#define FOLIO_COMMON_METASPACE_H_

// The SentencePiece conventions of Hugging Face tokenizer.json files (Llama 2,
// TinyLlama, Mistral): spaces spelled "▁" (U+2581) through a normalizer
// (Prepend + Replace, the "legacy" Llama layout) or the Metaspace
// pre-tokenizer, and byte-fallback tokens "<0x0A>" for characters the vocab
// lacks. Used by Tokenizer (common/tokenizer.h); plain functions, no state.

#include <string>
#include <string_view>
#include <vector>

namespace folio {

// U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's space.
inline constexpr std::string_view kMetaspace = "\xE2\x96\x81";

// One step of a normalizer: Prepend{prepend} (only to non-empty text),
// Replace{pattern: {String: from}, content: to} (every occurrence) or NFC
// (common/unicode_nfc.h).
struct NormalizerStep {
  enum class Kind { kPrepend, kReplace, kNfc };
  Kind kind = Kind::kPrepend;
  std::string from;  // kReplace: the literal replaced
  std::string to;    // kPrepend: the prefix; kReplace: the replacement
};

std::string Normalize(std::string_view text, const std::vector<NormalizerStep>& steps);

// The Metaspace pre-tokenizer: spaces become `replacement`; a replacement
// is prepended (unless the text already starts with one) always, never, or
// only to the stretch that starts the input (kFirst: text after an added
// token gets none); with `split`, the text is cut before every replacement.
struct MetaspaceSpec {
  enum class Prepend { kAlways, kFirst, kNever };
  std::string replacement = std::string(kMetaspace);
  Prepend prepend = Prepend::kAlways;
  bool split = true;
};

// Appends the pre-tokens of one stretch of text (first: it starts the input).
void ApplyMetaspace(std::string_view text, const MetaspaceSpec& spec, bool first,
                    std::vector<std::string>* pieces);

// Appends the text of a run of `tokens` consecutive byte-fallback tokens
// whose bytes are `run`: the bytes when they are valid UTF-8, else one U+FFFD
// per token (Hugging Face's ByteFallback decoder).
void AppendByteFallbackRun(std::string_view run, size_t tokens, std::string* out);

// The byte of a byte-fallback token "<0xAB>" (two hex digits), or -1.
int ByteFallbackValue(std::string_view spelled);

// Bytes of the first UTF-8 character of text (1 for a stray byte).
size_t Utf8CharLength(std::string_view text);

}  // namespace folio

#endif  // FOLIO_COMMON_METASPACE_H_
