#include "scheduler/server/sequence_text.h"

#include <algorithm>

namespace folio {
namespace {

bool IsUtf8Continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

size_t LongestBytes(std::span<const std::string> strings) {
  size_t n = 0;
  for (const std::string& s : strings) n = std::max(n, s.size());
  return n;
}

// In characters; bytes before a stop string's first character start (not
// valid UTF-8, but matchable) count as characters each.
size_t LongestCharacters(std::span<const std::string> strings) {
  size_t n = 0;
  for (const std::string& s : strings) {
    size_t chars = 0, i = 0;
    for (; i < s.size() && IsUtf8Continuation(s[i]); ++i) ++chars;
    for (; i < s.size(); ++i) chars += !IsUtf8Continuation(s[i]);
    n = std::max(n, chars);
  }
  return n;
}

}  // namespace

SequenceText::SequenceText(const Tokenizer& tokenizer, std::span<const std::string> stop_strings,
                           const TextOptions& options)
    : detokenizer_(tokenizer, options.skip_special_tokens),
      stops_(stop_strings.begin(), stop_strings.end()),
      max_stop_bytes_(LongestBytes(stop_strings)),
      max_stop_chars_(LongestCharacters(stop_strings)),
      options_(options) {}

std::string SequenceText::Append(TokenId id) {
  if (stopped()) return {};
  ++num_tokens_;
  const size_t old_size = held_.size();
  held_ += detokenizer_.Append(id);
  if (held_.size() == old_size) return {};
  if (num_tokens_ > options_.min_tokens) {
    // Only a match ending in the new text counts (earlier ones were found
    // before, or came too early for min_tokens): search each stop string from
    // where such a match could begin.
    size_t best = std::string::npos;
    for (const std::string& stop : stops_) {
      const size_t from = old_size >= stop.size() ? old_size - stop.size() + 1 : 0;
      const size_t at = held_.find(stop, from);
      if (at < best) {
        best = at;
        matched_ = &stop;
      }
    }
    if (best != std::string::npos) {
      // Held back text starts at or before any match (it keeps the last
      // max_stop_chars - 1 characters); an included stop ends past what was
      // released.
      const size_t end = options_.include_stop ? best + matched_->size() : best;
      std::string out = end > released_ ? held_.substr(released_, end - released_) : "";
      held_.clear();
      released_ = 0;
      return out;
    }
  }
  return Release();
}

std::string SequenceText::Finish() {
  if (stopped()) return {};
  std::string out = held_.substr(released_);
  held_.clear();
  released_ = 0;
  out += detokenizer_.Flush();
  // The flushed tail (a broken trailing character) cannot complete a stop.
  return out;
}

std::string SequenceText::Release() {
  size_t cut = held_.size();
  if (!options_.include_stop) {
    // A stop string could start in the last max_stop_chars - 1 characters
    // (held_ holds whole characters: the detokenizer keeps partial ones).
    for (size_t chars = 1; chars < max_stop_chars_ && cut > released_; ++chars) {
      do {
        --cut;
      } while (cut > released_ && IsUtf8Continuation(held_[cut]));
    }
  }
  std::string out = held_.substr(released_, cut - released_);
  released_ = cut;
  // Matching looks back at most max_stop_bytes - 1 bytes into older text.
  const size_t keep = max_stop_bytes_ > 0 ? max_stop_bytes_ - 1 : 0;
  const size_t drop = std::min(released_, held_.size() > keep ? held_.size() - keep : 0);
  held_.erase(0, drop);
  released_ -= drop;
  return out;
}

}  // namespace folio
