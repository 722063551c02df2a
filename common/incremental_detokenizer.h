#ifndef FOLIO_COMMON_INCREMENTAL_DETOKENIZER_H_
#define FOLIO_COMMON_INCREMENTAL_DETOKENIZER_H_

// Streaming detokenization: feed a sequence's tokens one at a time and get the
// text that has become final.
//
// Guarantees, for any token sequence (including ones that cut multi-byte
// characters across tokens, and invalid byte sequences):
//   - every returned string is valid UTF-8, and never holds a U+FFFD that the
//     full decode would not hold (bytes that may still complete a character
//     are held back, at most 3);
//   - Append(id_1) + ... + Append(id_n) + Flush() == tokenizer.Decode(ids,
//     skip_special_tokens), except that for SentencePiece-style tokenizers the
//     stream is the text in context, as after a prompt: the leading space
//     Decode strips (Strip / Metaspace decoders) stays. A run of byte-fallback
//     tokens is held until it ends, since it decodes as a whole (one U+FFFD
//     per token when it is not valid UTF-8, as Decode does).
// This holds because a byte-level tokenizer's text is a pure function of the
// concatenated token bytes, and the lossy UTF-8 decoder is cut only where it
// is back in its initial state (see AppendUtf8Lossy in byte_level.h).
//
// Thread-safety: one detokenizer per sequence; not safe for concurrent use.
// The tokenizer must outlive it.

#include <span>
#include <string>

#include "common/tokenizer.h"
#include "common/types.h"

namespace folio {

class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens = true)
      : tokenizer_(&tokenizer), skip_special_tokens_(skip_special_tokens) {}

  // Returns the new text that is complete UTF-8 (may be empty).
  std::string Append(TokenId id);

  // At the end of the sequence: whatever bytes remain (an incomplete trailing
  // sequence as U+FFFD). The detokenizer is then empty and may be reused.
  std::string Flush();

  // Bytes held back because they may still complete a character.
  size_t pending_bytes() const { return pending_.size() + run_.size(); }

  // The whole text of ids as the stream gives it (what `folio run` prints).
  static std::string Text(const Tokenizer& tokenizer, std::span<const TokenId> ids,
                          bool skip_special_tokens = true);

 private:
  // The text of the byte-fallback run that just ended (empty if none).
  std::string EndRun();

  const Tokenizer* tokenizer_;
  bool skip_special_tokens_;
  std::string pending_;  // raw bytes not yet returned
  std::string run_;      // bytes of the current run of byte-fallback tokens
  size_t run_tokens_ = 0;
};

}  // namespace folio

#endif  // FOLIO_COMMON_INCREMENTAL_DETOKENIZER_H_
