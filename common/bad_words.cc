#include "common/bad_words.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/byte_level.h"
#include "common/unicode_word.h"

namespace folio {

absl::StatusOr<std::vector<std::vector<TokenId>>> BadWordsTokenIds(
    const Tokenizer& tokenizer, std::span<const std::string> words, std::string_view field) {
  std::vector<std::vector<TokenId>> out;
  for (size_t i = 0; i < words.size(); ++i) {
    std::string_view word = words[i];
    if (!IsValidUtf8(word)) {
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(field), "[", i, "] is not valid UTF-8"));
    }
    // Python's str.lstrip(): Unicode White_Space and the ASCII separators
    // U+001C..U+001F, which str.isspace() counts too.
    while (true) {
      const size_t space = LeadingWhiteSpaceEnd(word);
      if (space > 0) {
        word.remove_prefix(space);
      } else if (!word.empty() && word[0] >= 0x1c && word[0] <= 0x1f) {
        word.remove_prefix(1);
      } else {
        break;
      }
    }
    std::vector<TokenId> plain = tokenizer.EncodePrompt(word, /*add_special_tokens=*/false);
    if (word.empty() || plain.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(field), "[", i, "] must contain a word, got '", words[i], "'"));
    }
    std::vector<TokenId> spaced =
        tokenizer.EncodePrompt(" " + std::string(word), /*add_special_tokens=*/false);
    const bool new_word_token = !spaced.empty() && spaced.front() != plain.front() &&
                                spaced.size() == plain.size();
    out.push_back(std::move(plain));
    if (new_word_token) out.push_back(std::move(spaced));
  }
  return out;
}

void BannedByBadWords(std::span<const std::vector<TokenId>> bad_words,
                      std::span<const TokenId> output, std::vector<TokenId>* banned) {
  for (const std::vector<TokenId>& word : bad_words) {
    if (word.empty() || word.size() - 1 > output.size()) continue;
    const size_t prefix = word.size() - 1;
    if (std::equal(word.begin(), word.begin() + static_cast<ptrdiff_t>(prefix),
                   output.end() - static_cast<ptrdiff_t>(prefix))) {
      banned->push_back(word.back());
    }
  }
}

}  // namespace folio
