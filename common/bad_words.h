#ifndef FOLIO_COMMON_BAD_WORDS_H_
#define FOLIO_COMMON_BAD_WORDS_H_

// vLLM's bad_words: words a request must never generate, as token-id
// sequences. Each word is tokenized as it would start the text and, when
// that tokenizes differently to the same length, after a space too (so it
// is banned at the start of the output and in the middle of it); the
// sampler bans a sequence's last token whenever the output ends with the
// rest of it.

#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tokenizer.h"
#include "common/types.h"

namespace folio {

// vLLM's SamplingParams.update_from_tokenizer: for each word w (leading
// whitespace stripped), Encode(w) and, if its first token differs and its
// length is the same, Encode(" " + w); without special tokens.
// INVALID_ARGUMENT naming `field`[i] for a word that is empty after the
// strip or tokenizes to nothing.
absl::StatusOr<std::vector<std::vector<TokenId>>> BadWordsTokenIds(
    const Tokenizer& tokenizer, std::span<const std::string> words, std::string_view field);

// Appends to *banned the last token of every bad word whose other tokens the
// output ends with (single-token words always).
void BannedByBadWords(std::span<const std::vector<TokenId>> bad_words,
                      std::span<const TokenId> output, std::vector<TokenId>* banned);

}  // namespace folio

#endif  // FOLIO_COMMON_BAD_WORDS_H_
