// Fuzzes encoding and decoding with real tokenizers (common/tokenizer.h,
// common/incremental_detokenizer.h): the demo model's byte-level BPE and the
// three SentencePiece-style test tokenizers (tests/tokenizer/testdata), loaded
// once. Input: byte 0 picks the tokenizer, the rest is the text; the same
// bytes read as 16-bit numbers are also decoded as token ids (in and just out
// of the vocabulary), as /detokenize and the streaming path see them.
// Checks: ids in [0, vocab_size); Decode and the stream give valid UTF-8;
// the stream (Append... + Flush) equals Decode (byte-level exactly;
// SentencePiece-style up to the spaces Decode drops at the start: the Strip
// decoder's one, or every "▁" of the first token for a Metaspace decoder, as
// `tokenizers` does); ids outside the vocabulary change nothing; and the round
// trip Decode(Encode(text)) == text, byte-level for any text (invalid UTF-8
// as U+FFFD), SentencePiece-style for valid UTF-8 without U+2581 or '<'
// (which would spell "▁" or an added token) and, with a Metaspace
// pre-tokenizer, not starting with a space (as in `tokenizers`, which then
// prepends no "▁" and the decoder's Strip eats one of the spaces).

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/byte_level.h"
#include "common/incremental_detokenizer.h"
#include "common/tokenizer.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using folio::TokenId;
using folio::fuzz::IsValidUtf8;

struct Loaded {
  std::unique_ptr<folio::Tokenizer> tokenizer;
  bool byte_level;
  bool metaspace;  // SentencePiece-style through a Metaspace pre-tokenizer
};

const std::vector<Loaded>& Tokenizers() {
  static auto* all = [] {
    auto* v = new std::vector<Loaded>();
    const struct {
      const char* rel;
      bool byte_level, metaspace;
    } files[] = {
        {"models/folio-demo/tokenizer.json", true, false},
        {"tests/tokenizer/testdata/spm_legacy/tokenizer.json", false, false},
        {"tests/tokenizer/testdata/spm_metaspace/tokenizer.json", false, true},
        {"tests/tokenizer/testdata/spm_metaspace_split/tokenizer.json", false, true},
    };
    for (const auto& [rel, byte_level, metaspace] : files) {
      absl::StatusOr<std::unique_ptr<folio::Tokenizer>> t =
          folio::Tokenizer::LoadFromFile(folio::fuzz::SourcePath(rel));
      FUZZ_CHECK(t.ok(), "cannot load %s: %s", rel, t.status().ToString().c_str());
      v->push_back({*std::move(t), byte_level, metaspace});
    }
    return v;
  }();
  return *all;
}

std::string Lossy(std::string_view bytes) {
  std::string out;
  folio::AppendUtf8Lossy(bytes, /*final=*/true, &out);
  return out;
}

void CheckStream(const Loaded& l, const std::vector<TokenId>& ids, bool skip) {
  const folio::Tokenizer& t = *l.tokenizer;
  const std::string decoded = t.Decode(ids, skip);
  FUZZ_CHECK(IsValidUtf8(decoded), "Decode gave invalid UTF-8");
  folio::IncrementalDetokenizer stream(t, skip);
  std::string streamed;
  for (TokenId id : ids) {
    std::string piece = stream.Append(id);
    FUZZ_CHECK(IsValidUtf8(piece), "Append gave invalid UTF-8");
    streamed += piece;
  }
  streamed += stream.Flush();
  if (l.byte_level) {
    FUZZ_CHECK(streamed == decoded, "stream '%s' != Decode '%s'", streamed.c_str(), decoded.c_str());
  } else {
    auto without_spaces = [](std::string s) {
      s.erase(std::remove(s.begin(), s.end(), ' '), s.end());
      return s;
    };
    FUZZ_CHECK(decoded.size() <= streamed.size() && without_spaces(streamed) == without_spaces(decoded),
               "stream '%s' != Decode '%s'", streamed.c_str(), decoded.c_str());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::vector<Loaded>& all = Tokenizers();
  const Loaded& l = all[data[0] % all.size()];
  const folio::Tokenizer& t = *l.tokenizer;
  const std::string_view text = folio::fuzz::AsText(data + 1, size - 1);

  const std::vector<TokenId> ids = t.Encode(text);
  for (TokenId id : ids) {
    FUZZ_CHECK(id >= 0 && id < t.vocab_size(), "id %d outside [0, %d)", id, t.vocab_size());
  }
  for (TokenId id : t.EncodePrompt(text)) {
    FUZZ_CHECK(id >= 0 && id < t.vocab_size(), "prompt id %d outside [0, %d)", id, t.vocab_size());
  }
  CheckStream(l, ids, /*skip=*/false);
  CheckStream(l, ids, /*skip=*/true);
  const std::string back = t.Decode(ids, /*skip_special_tokens=*/false);
  if (l.byte_level) {
    FUZZ_CHECK(back == Lossy(text), "byte-level round trip: '%s' -> '%s'", Lossy(text).c_str(),
               back.c_str());
  } else if (IsValidUtf8(text) && text.find("\xe2\x96\x81") == std::string_view::npos &&
             text.find('<') == std::string_view::npos && !(l.metaspace && text.starts_with(' '))) {
    FUZZ_CHECK(back == text, "SentencePiece round trip: '%.*s' -> '%s'",
               static_cast<int>(text.size()), text.data(), back.c_str());
  }

  // The bytes as token ids, some just outside the vocabulary.
  std::vector<TokenId> raw;
  for (size_t i = 1; i + 1 < size; i += 2) {
    const int v = data[i] | (data[i + 1] << 8);
    raw.push_back(static_cast<TokenId>(v % (t.vocab_size() + 8)) - 4);
  }
  std::vector<TokenId> in_vocab;
  for (TokenId id : raw) {
    if (id >= 0 && id < t.vocab_size()) in_vocab.push_back(id);
  }
  for (bool skip : {false, true}) {
    // Ids outside the vocabulary are skipped, as if absent.
    const std::string with = t.Decode(raw, skip), without = t.Decode(in_vocab, skip);
    FUZZ_CHECK(with == without, "out-of-vocab ids changed Decode: '%s' vs '%s'", with.c_str(),
               without.c_str());
    CheckStream(l, in_vocab, skip);
  }
  return 0;
}
