#include "scheduler/server/sequence_text.h"

#include <algorithm>

namespace folio {
namespace {

size_t LongestLength(std::span<const std::string> strings) {
  size_t n = 0;
  for (const std::string& s : strings) n = std::max(n, s.size());
  return n;
}

bool IsUtf8Continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

}  // namespace

SequenceText::SequenceText(const Tokenizer& tokenizer, std::span<const std::string> stop_strings,
                           const TextOptions& options)
    : detokenizer_(tokenizer, options.skip_special_tokens),
      stops_(stop_strings.begin(), stop_strings.end()),
      max_stop_len_(LongestLength(stop_strings)),
      options_(options) {}

std::string SequenceText::Append(TokenId id) {
  if (stopped()) return {};
  ++num_tokens_;
  const size_t old_size = held_.size();
  held_ += detokenizer_.Append(id);
  if (held_.size() == old_size) return {};
  if (num_tokens_ >= options_.min_tokens) {
    // Every occurrence ending before this token was found earlier (or did
    // not count yet), so a match must end in the new text: search from where
    // such a match could begin.
    const size_t from = old_size >= max_stop_len_ ? old_size - max_stop_len_ + 1 : 0;
    size_t best = std::string::npos;
    for (const std::string& stop : stops_) {
      const size_t at = held_.find(stop, from);
      if (at < best) {
        best = at;
        matched_ = &stop;
      }
    }
    if (best != std::string::npos) {
      // Held back text starts at or before any match (it keeps the last
      // max_stop_len - 1 bytes); an included stop ends past what was released.
      const size_t end = options_.include_stop ? best + matched_->size() : best;
      std::string out = held_.substr(released_, end - released_);
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
  // A stop string could start in the last max_stop_len - 1 bytes.
  const size_t keep = max_stop_len_ > 0 ? max_stop_len_ - 1 : 0;
  size_t cut = held_.size();
  if (!options_.include_stop) {
    cut = held_.size() > keep ? held_.size() - keep : 0;
    while (cut > released_ && IsUtf8Continuation(held_[cut])) --cut;  // whole characters only
    cut = std::max(cut, released_);
  }
  std::string out = held_.substr(released_, cut - released_);
  released_ = cut;
  const size_t drop = std::min(released_, held_.size() > keep ? held_.size() - keep : 0);
  held_.erase(0, drop);
  released_ -= drop;
  return out;
}

}  // namespace folio
