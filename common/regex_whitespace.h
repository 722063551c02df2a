#ifndef FOLIO_COMMON_REGEX_WHITESPACE_H_
#define FOLIO_COMMON_REGEX_WHITESPACE_H_

// Tokenizers' pre-tokenizer patterns (`\s+(?!\S)`, `[^\s\p{L}\p{N}]`) mean
// Unicode White_Space by \s, as Hugging Face's regex engine (Oniguruma) does.
// PCRE2's \s (with UCP) also matches U+180E MONGOLIAN VOWEL SEPARATOR, no
// longer a space since Unicode 6.3, which splits text around it differently.
// This spells \s and \S out as the White_Space set before PCRE2 sees them.

#include <string>
#include <string_view>

namespace folio {

// `pattern` with every \s written as the White_Space characters (a class
// outside a class, its members inside one) and every \S outside a class as
// the negated class. Everything else, escapes (\\s, \Q...\E) and \S inside a
// class included, is kept as written.
std::string SpellOutWhitespace(std::string_view pattern);

}  // namespace folio

#endif  // FOLIO_COMMON_REGEX_WHITESPACE_H_
