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

SequenceText::SequenceText(const Tokenizer& tokenizer, std::span<const std::string> stop_strings)
    : detokenizer_(tokenizer),
      stops_(stop_strings.begin(), stop_strings.end()),
      max_stop_len_(LongestLength(stop_strings)) {}

std::string SequenceText::Append(TokenId id) {
  if (stopped()) return {};
  const size_t old_size = held_.size();
  held_ += detokenizer_.Append(id);
  if (held_.size() == old_size) return {};
  // Every occurrence ending before this token was found earlier, so a match
  // must end in the new text: search from where such a match could begin.
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
    std::string out = held_.substr(0, best);
    held_.clear();
    return out;
  }
  return ReleaseSafePrefix();
}

std::string SequenceText::Finish() {
  if (stopped()) return {};
  std::string out = std::move(held_);
  held_.clear();
  out += detokenizer_.Flush();
  // The flushed tail (a broken trailing character) cannot complete a stop.
  return out;
}

std::string SequenceText::ReleaseSafePrefix() {
  // Keep the last max_stop_len - 1 bytes: a stop string could start there.
  const size_t keep = max_stop_len_ > 0 ? max_stop_len_ - 1 : 0;
  if (held_.size() <= keep) return {};
  size_t cut = held_.size() - keep;
  while (cut > 0 && IsUtf8Continuation(held_[cut])) --cut;  // whole characters only
  std::string out = held_.substr(0, cut);
  held_.erase(0, cut);
  return out;
}

}  // namespace folio
