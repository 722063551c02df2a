#include "common/incremental_detokenizer.h"

#include "common/byte_level.h"
#include "common/metaspace.h"

namespace folio {

std::string IncrementalDetokenizer::Append(TokenId id) {
  if (skip_special_tokens_ && tokenizer_->IsSpecial(id)) return {};
  // Outside the vocabulary: skipped as Decode skips it (a byte-fallback run
  // goes on across it).
  if (tokenizer_->TokenBytesView(id).empty()) return {};
  if (tokenizer_->IsByteFallback(id)) {
    run_.append(tokenizer_->TokenBytesView(id));
    ++run_tokens_;
    return {};
  }
  std::string text = EndRun();
  pending_.append(tokenizer_->TokenBytesView(id));
  const size_t used = AppendUtf8Lossy(pending_, /*final=*/false, &text);
  pending_.erase(0, used);
  return text;
}

std::string IncrementalDetokenizer::Flush() {
  std::string text = EndRun();
  AppendUtf8Lossy(pending_, /*final=*/true, &text);
  pending_.clear();
  return text;
}

std::string IncrementalDetokenizer::EndRun() {
  std::string text;
  AppendByteFallbackRun(run_, run_tokens_, &text);
  run_.clear();
  run_tokens_ = 0;
  return text;
}

std::string IncrementalDetokenizer::Text(const Tokenizer& tokenizer, std::span<const TokenId> ids,
                                         bool skip_special_tokens) {
  IncrementalDetokenizer stream(tokenizer, skip_special_tokens);
  std::string text;
  for (TokenId id : ids) text += stream.Append(id);
  return text + stream.Flush();
}

}  // namespace folio
