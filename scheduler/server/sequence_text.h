#ifndef FOLIO_SCHEDULER_SERVER_SEQUENCE_TEXT_H_
#define FOLIO_SCHEDULER_SERVER_SEQUENCE_TEXT_H_

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "common/incremental_detokenizer.h"
#include "common/tokenizer.h"
#include "common/types.h"

namespace folio {

// A request's choices about its text (vLLM's names).
struct TextOptions {
  bool skip_special_tokens = true;  // leave special tokens out of the text
  bool include_stop = false;        // include_stop_str_in_output
  int32_t min_tokens = 0;           // stop strings count only past this many tokens
};

// The text of one output sequence as it streams: detokenizes token by token
// and matches stop strings on the text. A stop string counts when it ends in
// the text of a token past the first min_tokens (vLLM's rule). Unless
// include_stop, text that could still be the start of a stop string (the
// last max-stop-length - 1 characters) is held back, so a stop string never
// reaches the client.
//
// Guarantee: the concatenation of every Append() and Finish() return equals
// the full decode of the tokens, cut right before the first stop string that
// counts (right after it with include_stop).
//
// Thread-compatible; the tokenizer must outlive it.
class SequenceText {
 public:
  SequenceText(const Tokenizer& tokenizer, std::span<const std::string> stop_strings,
               const TextOptions& options = {});

  // Feeds one token; returns the text that became final. Once a stop string
  // completes, stopped() is true and further tokens are ignored.
  std::string Append(TokenId id);

  // The sequence ended for another reason: everything held back.
  std::string Finish();

  bool stopped() const { return matched_ != nullptr; }
  // The stop string that ended the text. REQUIRES: stopped().
  const std::string& matched_stop() const { return *matched_; }

 private:
  // Returns the unreleased text that can no longer be cut by a stop string
  // (all of it with include_stop), and drops what matching no longer needs.
  std::string Release();

  IncrementalDetokenizer detokenizer_;
  const std::vector<std::string> stops_;
  const size_t max_stop_bytes_;
  const size_t max_stop_chars_;
  const TextOptions options_;
  // The decoded tail: held_[0, released_) was returned already and is kept
  // only while a stop string could still start in it (max_stop_bytes_ - 1).
  std::string held_;
  size_t released_ = 0;
  int32_t num_tokens_ = 0;
  const std::string* matched_ = nullptr;
};

}  // namespace folio

#endif  // FOLIO_SCHEDULER_SERVER_SEQUENCE_TEXT_H_
