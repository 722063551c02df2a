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

// The text of one output sequence as it streams: detokenizes token by token
// and matches stop strings on the text. Text that could still be the start
// of a stop string is held back, so a stop string never reaches the client
// (vLLM's rule: the stop string is not part of the output).
//
// Guarantee: the concatenation of every Append() and Finish() return equals
// the full decode of the tokens, cut right before the first stop string.
//
// Thread-compatible; the tokenizer must outlive it.
class SequenceText {
 public:
  SequenceText(const Tokenizer& tokenizer, std::span<const std::string> stop_strings);

  // Feeds one token; returns the text that became final. Once a stop string
  // completes, stopped() is true and further tokens are ignored.
  std::string Append(TokenId id);

  // The sequence ended for another reason: everything held back.
  std::string Finish();

  bool stopped() const { return matched_ != nullptr; }
  // The stop string that ended the text. REQUIRES: stopped().
  const std::string& matched_stop() const { return *matched_; }

 private:
  // Releases held text that can no longer start a stop string.
  std::string ReleaseSafePrefix();

  IncrementalDetokenizer detokenizer_;
  const std::vector<std::string> stops_;
  const size_t max_stop_len_;
  std::string held_;  // decoded, not yet returned
  const std::string* matched_ = nullptr;
};

}  // namespace folio

#endif  // FOLIO_SCHEDULER_SERVER_SEQUENCE_TEXT_H_
