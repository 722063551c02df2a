// Tokenizer: encoding (added tokens, normalizers, pre-tokenizers, BPE) and
// decoding. Loading tokenizer.json is in tokenizer_loader.cc.
#include "common/tokenizer.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/byte_level.h"
#include "common/check.h"
#include "common/unicode_word.h"

namespace folio {
namespace {

// Debian's abseil has its own string_view; heterogeneous lookups need one.
absl::string_view AbslView(std::string_view s) { return absl::string_view(s.data(), s.size()); }


}  // namespace

Tokenizer::Tokenizer() {
  byte_id_.fill(-1);
  fallback_id_.fill(-1);
}
Tokenizer::~Tokenizer() = default;

std::optional<TokenId> Tokenizer::FindToken(std::string_view token) const {
  if (auto it = added_by_content_.find(AbslView(token)); it != added_by_content_.end())
    return it->second;
  std::string bytes;
  if (utf8_vocab_) {
    if (auto it = bytes_to_id_.find(AbslView(token)); it != bytes_to_id_.end()) return it->second;
  } else if (ByteLevelDecode(token, &bytes)) {
    if (auto it = bytes_to_id_.find(bytes); it != bytes_to_id_.end()) return it->second;
  } else if (auto it = odd_vocab_.find(std::string(token)); it != odd_vocab_.end()) {
    return it->second;
  }
  return std::nullopt;
}

int Tokenizer::MatchAddedToken(const AddedTokenSet& set, std::string_view text, size_t pos) {
  for (int32_t k : set.by_first_byte[static_cast<uint8_t>(text[pos])]) {
    const AddedToken& a = set.tokens[k];
    if (text.compare(pos, a.pattern.size(), a.pattern) != 0) continue;
    // Hugging Face's rules: no word character next to a single_word token.
    if (a.single_word && (EndsWithWordChar(text.substr(0, pos)) ||
                          StartsWithWordChar(text.substr(pos + a.pattern.size())))) {
      continue;
    }
    return k;
  }
  return -1;
}

template <class EncodeStretch>
void Tokenizer::SplitAtAddedTokens(const AddedTokenSet& set, std::string_view text,
                                   std::vector<TokenId>* ids, EncodeStretch encode_stretch) {
  size_t start = 0;  // first byte not yet encoded
  for (size_t pos = 0; pos < text.size() && !set.tokens.empty(); ++pos) {
    if (set.by_first_byte[static_cast<uint8_t>(text[pos])].empty()) continue;
    const int k = MatchAddedToken(set, text, pos);
    if (k < 0) continue;
    const AddedToken& a = set.tokens[k];
    size_t s = pos, e = pos + a.pattern.size();
    // lstrip / rstrip take the White_Space next to the token, not before
    // what is already encoded.
    if (a.lstrip) s = start + TrailingWhiteSpaceStart(text.substr(start, s - start));
    if (a.rstrip) e += LeadingWhiteSpaceEnd(text.substr(e));
    if (s > start) encode_stretch(text.substr(start, s - start), start);
    ids->push_back(a.id);
    start = e;
    pos = e - 1;
  }
  if (start < text.size()) encode_stretch(text.substr(start), start);
}

std::vector<TokenId> Tokenizer::Encode(std::string_view text, bool add_bos) const {
  std::vector<TokenId> ids;
  if (add_bos && bos_id_) ids.push_back(*bos_id_);
  std::string clean;
  if (!IsValidUtf8(text)) {
    AppendUtf8Lossy(text, /*final=*/true, &clean);
    text = clean;
  }
  ids.reserve(ids.size() + text.size() / 3 + 1);
  SplitAtAddedTokens(raw_added_, text, &ids, [&](std::string_view stretch, size_t offset) {
    EncodeOrdinary(stretch, offset == 0, &ids);
  });
  return ids;
}

std::vector<TokenId> Tokenizer::EncodePrompt(std::string_view text, bool add_special_tokens) const {
  std::vector<TokenId> ids = Encode(text, /*add_bos=*/false);
  if (add_special_tokens) {
    ids.insert(ids.begin(), prompt_prefix_.begin(), prompt_prefix_.end());
    ids.insert(ids.end(), prompt_suffix_.begin(), prompt_suffix_.end());
  }
  return ids;
}

std::vector<std::string> Tokenizer::PreTokenize(std::string_view text) const {
  std::string clean;
  if (!IsValidUtf8(text)) {
    AppendUtf8Lossy(text, /*final=*/true, &clean);
    text = clean;
  }
  std::string normalized;
  if (!normalizers_.empty()) {
    normalized = Normalize(text, normalizers_);
    text = normalized;
  }
  std::vector<std::string> pieces;
  PreTokenizeInto(text, /*first=*/true, &pieces);
  return pieces;
}

void Tokenizer::PreTokenizeInto(std::string_view text, bool first,
                                std::vector<std::string>* pieces) const {
  pieces->clear();
  if (text.empty()) return;
  if (metaspace_.has_value()) {
    ApplyMetaspace(text, *metaspace_, first, pieces);
  } else {
    pieces->emplace_back(text);
  }
  std::vector<std::string> next;
  for (const PreTokenizerStep& step : pre_tokenizers_) {
    next.clear();
    for (const std::string& piece : *pieces) step.Apply(piece, &next);
    pieces->swap(next);
  }
}

void Tokenizer::EncodeOrdinary(std::string_view text, bool first,
                               std::vector<TokenId>* out) const {
  if (text.empty()) return;
  std::string normalized;
  if (!normalizers_.empty()) {
    normalized = Normalize(text, normalizers_);
    text = normalized;
  }
  if (normalized_added_.tokens.empty()) {
    EncodeNormalized(text, first, out);
    return;
  }
  // As tokenizers' AddedVocabulary: offsets are now in the normalized text;
  // only a piece at its start can start the input.
  SplitAtAddedTokens(normalized_added_, text, out, [&](std::string_view piece, size_t offset) {
    EncodeNormalized(piece, first && offset == 0, out);
  });
}

void Tokenizer::EncodeNormalized(std::string_view text, bool first,
                                 std::vector<TokenId>* out) const {
  if (text.empty()) return;
  std::vector<std::string> pieces;
  PreTokenizeInto(text, first, &pieces);
  for (const std::string& piece : pieces) EncodePiece(piece, out);
}

void Tokenizer::EncodePiece(std::string_view piece, std::vector<TokenId>* out) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    if (auto it = bytes_to_id_.find(AbslView(piece)); it != bytes_to_id_.end()) {
      out->push_back(it->second);
      return;
    }
  }
  // Symbols in a doubly linked list; a merged-away symbol gets len 0.
  struct Symbol {
    TokenId id;
    int32_t prev, next;
    int32_t len;
  };
  // The first symbols: a token per byte (byte-level) or per character; -1
  // for one the vocab lacks.
  std::vector<TokenId> initial;
  initial.reserve(piece.size());
  if (utf8_vocab_) {
    AppendCharSymbols(piece, &initial);
  } else {
    for (char c : piece) initial.push_back(byte_id_[static_cast<uint8_t>(c)]);
  }
  std::vector<Symbol> syms;
  syms.reserve(initial.size());
  bool last_unk = false;
  for (TokenId id : initial) {
    const bool unk = id < 0;
    if (unk) {
      if (!unk_id_) continue;  // as tokenizers does without an unk token: drop the byte
      if (fuse_unk_ && last_unk) {
        ++syms.back().len;
        continue;
      }
      id = *unk_id_;
    }
    last_unk = unk;
    const auto idx = static_cast<int32_t>(syms.size());
    syms.push_back({id, idx - 1, -1, 1});
    if (idx > 0) syms[idx - 1].next = idx;
  }
  if (syms.empty()) return;

  // Candidate merges, lowest rank first, then leftmost (as tokenizers' Word::merge_all).
  struct Candidate {
    int32_t rank, pos;
    TokenId id;
  };
  auto later = [](const Candidate& a, const Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  std::vector<Candidate> heap;
  auto add_pair = [&](int32_t pos, bool keep_heap) {
    const Symbol& l = syms[pos];
    if (l.next < 0) return;
    auto it = merges_.find(PairKey(l.id, syms[l.next].id));
    if (it == merges_.end()) return;
    heap.push_back({it->second.rank, pos, it->second.id});
    if (keep_heap) std::push_heap(heap.begin(), heap.end(), later);
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(syms.size()); ++i) add_pair(i, false);
  std::make_heap(heap.begin(), heap.end(), later);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& l = syms[c.pos];
    if (l.len == 0 || l.next < 0) continue;  // stale: merged away or now last
    Symbol& r = syms[l.next];
    auto it = merges_.find(PairKey(l.id, r.id));
    if (it == merges_.end() || it->second.id != c.id || it->second.rank != c.rank) continue;
    l.id = c.id;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (l.next >= 0) syms[l.next].prev = c.pos;
    if (l.prev >= 0) add_pair(l.prev, true);
    add_pair(c.pos, true);
  }
  for (int32_t i = 0; i >= 0; i = syms[i].next) out->push_back(syms[i].id);
}

void Tokenizer::AppendCharSymbols(std::string_view piece, std::vector<TokenId>* ids) const {
  for (size_t pos = 0; pos < piece.size();) {
    const size_t len = Utf8CharLength(piece.substr(pos));
    const std::string_view ch = piece.substr(pos, len);
    pos += len;
    if (auto it = bytes_to_id_.find(AbslView(ch)); it != bytes_to_id_.end()) {
      ids->push_back(it->second);
      continue;
    }
    const bool all_bytes =
        byte_fallback_ && std::all_of(ch.begin(), ch.end(), [&](char c) {
          return fallback_id_[static_cast<uint8_t>(c)] >= 0;
        });
    if (!all_bytes) {
      ids->push_back(-1);  // unk
      continue;
    }
    for (char c : ch) ids->push_back(fallback_id_[static_cast<uint8_t>(c)]);
  }
}

std::string Tokenizer::Decode(std::span<const TokenId> ids, bool skip_special_tokens) const {
  std::string bytes;
  std::string run;  // bytes of consecutive byte-fallback tokens
  size_t run_tokens = 0;
  auto flush_run = [&] {
    AppendByteFallbackRun(run, run_tokens, &bytes);
    run.clear();
    run_tokens = 0;
  };
  bool first = true;
  for (TokenId id : ids) {
    if (skip_special_tokens && IsSpecial(id)) continue;
    const std::string_view piece = TokenBytesView(id);
    // Outside the vocabulary: skipped as if absent (it neither ends a
    // byte-fallback run nor counts as the first token).
    if (piece.empty()) continue;
    if (tokens_[id].byte_fallback) {
      run.append(piece);
      ++run_tokens;
    } else {
      flush_run();
      if (first && drop_first_token_spaces_) {
        for (char c : piece) {
          if (c != ' ') bytes += c;
        }
      } else {
        bytes.append(piece);
      }
    }
    first = false;
  }
  flush_run();
  // The decoder's Strip (or Metaspace): the space the encoder put in front.
  for (int32_t i = 0; i < strip_leading_spaces_ && !bytes.empty() && bytes[0] == ' '; ++i) {
    bytes.erase(0, 1);
  }
  if (IsValidUtf8(bytes)) return bytes;
  std::string text;
  AppendUtf8Lossy(bytes, /*final=*/true, &text);
  return text;
}

}  // namespace folio
