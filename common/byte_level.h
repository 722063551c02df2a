#ifndef FOLIO_COMMON_BYTE_LEVEL_H_
#define FOLIO_COMMON_BYTE_LEVEL_H_

// Building blocks of byte-level BPE (GPT-2 / Llama-3 / Qwen2 tokenizers):
// GPT-2's reversible byte <-> printable code point map, the UTF-8 helpers that
// decoding and streaming detokenization share, and the pre-tokenizer steps
// (ByteLevel, Split, Digits) that cut text into pieces before BPE. All
// functions are pure and thread-safe.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace folio {

// The code point GPT-2's bytes_to_unicode() assigns to byte `b`: printable
// Latin-1 bytes map to themselves, the other 68 bytes to U+0100..U+0143
// (space 0x20 -> U+0120 'Ġ', '\n' -> U+010A 'Ċ').
char32_t ByteToCodePoint(uint8_t b);

// The inverse: the byte whose image is `cp`, or -1 if `cp` is not an image.
int CodePointToByte(char32_t cp);

// Raw bytes -> byte-level string (UTF-8), as tokenizer.json spells tokens.
std::string ByteLevelEncode(std::string_view bytes);

// Byte-level string -> raw bytes, appended to *out. Returns false (leaving *out
// in an unspecified state) if `text` is not valid UTF-8 or holds a character
// outside the map's image.
bool ByteLevelDecode(std::string_view text, std::string* out);

// True if `bytes` is well-formed UTF-8 (no overlongs, surrogates or > U+10FFFF).
bool IsValidUtf8(std::string_view bytes);

// Lossy UTF-8 decoding with the Unicode "maximal subpart" rule (the same as
// Rust's String::from_utf8_lossy and WHATWG): every maximal prefix of an
// invalid sequence becomes one U+FFFD. Appends the result to *out and returns
// the number of input bytes consumed. With final == false, a trailing sequence
// that is incomplete but could still become valid is left unconsumed (the
// caller keeps it for later); with final == true it becomes one U+FFFD.
//
// Because the decoder is in its initial state after every consumed prefix,
// decoding a byte stream in pieces this way yields exactly the text of
// decoding it at once - what incremental detokenization relies on.
size_t AppendUtf8Lossy(std::string_view bytes, bool final, std::string* out);

// Appends the UTF-8 encoding of `cp` (REQUIRES: cp <= 0x10FFFF, not a surrogate).
void AppendUtf8(char32_t cp, std::string* out);

// GPT-2's split regex: what ByteLevel{use_regex: true} splits by.
inline constexpr std::string_view kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// What a split does with the matches of its pattern (the tokenizers library's
// SplitDelimiterBehavior; `invert` swaps matches and the gaps between them).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// One pre-tokenizer of tokenizer.json: optionally prepends a space (ByteLevel's
// add_prefix_space), then optionally splits by a PCRE2 pattern compiled with
// UTF and UCP (\p{L}, \s ... are Unicode-aware), JIT-compiled when available.
// Immutable and cheap to copy (the compiled pattern is shared); Apply may run
// on any number of threads at once.
class PreTokenizerStep {
 public:
  // Split{pattern: {Regex: pattern} or {String: pattern} (literal), behavior,
  // invert}. INVALID_ARGUMENT with PCRE2's message if the pattern is invalid.
  static absl::StatusOr<PreTokenizerStep> Split(std::string_view pattern, bool literal,
                                                SplitBehavior behavior, bool invert);
  // ByteLevel{add_prefix_space, use_regex}: use_regex splits by the GPT-2
  // regex, Isolated. (The byte mapping itself is BPE's business.)
  static PreTokenizerStep ByteLevel(bool add_prefix_space, bool use_regex);
  // Digits{individual_digits}: numbers (\p{N}) apart from the rest, one per
  // piece or in runs.
  static PreTokenizerStep Digits(bool individual_digits);

  // True when Apply returns every non-empty piece unchanged.
  bool is_identity() const { return !add_prefix_space_ && regex_ == nullptr; }

  // Appends the non-empty pieces of `piece` to *out.
  // REQUIRES: `piece` is valid UTF-8.
  void Apply(std::string_view piece, std::vector<std::string>* out) const;

 private:
  class Regex;
  PreTokenizerStep() = default;

  bool add_prefix_space_ = false;
  std::shared_ptr<const Regex> regex_;  // null: no split
  SplitBehavior behavior_ = SplitBehavior::kIsolated;
  bool invert_ = false;
};

}  // namespace folio

#endif  // FOLIO_COMMON_BYTE_LEVEL_H_
