#include "common/incremental_detokenizer.h"

#include "common/byte_level.h"

namespace folio {

std::string IncrementalDetokenizer::Append(TokenId id) {
  if (skip_special_tokens_ && tokenizer_->IsSpecial(id)) return {};
  pending_.append(tokenizer_->TokenBytesView(id));
  std::string text;
  const size_t used = AppendUtf8Lossy(pending_, /*final=*/false, &text);
  pending_.erase(0, used);
  return text;
}

std::string IncrementalDetokenizer::Flush() {
  std::string text;
  AppendUtf8Lossy(pending_, /*final=*/true, &text);
  pending_.clear();
  return text;
}

}  // namespace folio
