#ifndef FOLIO_COMMON_UNICODE_WORD_H_
#define FOLIO_COMMON_UNICODE_WORD_H_

// The character classes Hugging Face's added-token rules read the text around
// a match with (Rust's regex, Unicode): single_word tokens need no word
// character (\w: Alphabetic, marks, decimal digits, connector punctuation,
// joiners) right before or after them; lstrip / rstrip take the White_Space
// (\s) next to them. REQUIRES: valid UTF-8 (Tokenizer::Encode cleans its input).

#include <cstddef>
#include <string_view>

namespace folio {

// \w$ and ^\w.
bool EndsWithWordChar(std::string_view text);
bool StartsWithWordChar(std::string_view text);

// Where the run of White_Space characters at the end of `text` starts
// (text.size() when there is none), and where the one at its start ends.
size_t TrailingWhiteSpaceStart(std::string_view text);
size_t LeadingWhiteSpaceEnd(std::string_view text);

}  // namespace folio

#endif  // FOLIO_COMMON_UNICODE_WORD_H_
