// Fuzzes tokenizer.json loading (Tokenizer::LoadFromFile, common/tokenizer.h):
// the input is the file. When it loads, a few fixed texts (ASCII, accents,
// CJK, emoji, whitespace runs, invalid UTF-8, special-token spellings) go
// through Encode / EncodePrompt / PreTokenize and back through Decode and the
// streaming IncrementalDetokenizer, and ids in and out of range are decoded.
// Checks: no crash, hang or exception; load errors are INVALID_ARGUMENT naming
// the file; every id produced is in [0, vocab_size); every decoded string is
// valid UTF-8; decoding is deterministic; out-of-range ids decode to nothing.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/incremental_detokenizer.h"
#include "common/tokenizer.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using folio::TokenId;
using folio::fuzz::IsValidUtf8;

folio::fuzz::ScratchFile& File() {
  static auto* file = new folio::fuzz::ScratchFile();
  return *file;
}

constexpr std::array<std::string_view, 9> kTexts = {
    "Hello, world! It's 2024.",
    "  leading and trailing spaces  \n\ttabs\r\n",
    "caf\xc3\xa9 na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x98\x80",
    "e\xcc\x81 \xe2\x96\x81under\xe2\x96\x81score",  // combining accent, U+2581
    "<s>[INST] hi [/INST]</s><|begin_of_text|><|endoftext|><unk>",
    "\xff\xfe invalid \xc3 utf8 \xed\xa0\x80",
    "12345678901234567890 3.14159",
    "",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
};

void CheckIds(const folio::Tokenizer& t, const std::vector<TokenId>& ids, std::string_view what) {
  for (TokenId id : ids) {
    FUZZ_CHECK(id >= 0 && id < t.vocab_size(), "%.*s gave id %d outside [0, %d)",
               static_cast<int>(what.size()), what.data(), id, t.vocab_size());
  }
}

void CheckDecode(const folio::Tokenizer& t, const std::vector<TokenId>& ids) {
  for (bool skip : {true, false}) {
    const std::string text = t.Decode(ids, skip);
    FUZZ_CHECK(IsValidUtf8(text), "Decode gave invalid UTF-8");
    FUZZ_CHECK(text == t.Decode(ids, skip), "Decode is not deterministic");
    folio::IncrementalDetokenizer stream(t, skip);
    for (TokenId id : ids) {
      const std::string piece = stream.Append(id);
      FUZZ_CHECK(IsValidUtf8(piece), "IncrementalDetokenizer::Append gave invalid UTF-8");
      FUZZ_CHECK(stream.pending_bytes() <= 3 + 4 * ids.size(), "pending bytes grew without bound");
    }
    FUZZ_CHECK(IsValidUtf8(stream.Flush()), "IncrementalDetokenizer::Flush gave invalid UTF-8");
    FUZZ_CHECK(stream.pending_bytes() == 0, "bytes pending after Flush");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = File().Write(data, size);
  absl::StatusOr<std::unique_ptr<folio::Tokenizer>> loaded = folio::Tokenizer::LoadFromFile(path);
  if (!loaded.ok()) {
    FUZZ_CHECK(loaded.status().code() == absl::StatusCode::kInvalidArgument, "unexpected code: %s",
               loaded.status().ToString().c_str());
    FUZZ_CHECK(loaded.status().message().find(path) != absl::string_view::npos,
               "error does not name the file: %s", loaded.status().ToString().c_str());
    return 0;
  }
  const folio::Tokenizer& t = **loaded;
  FUZZ_CHECK(t.vocab_size() >= 0, "vocab_size %d", t.vocab_size());
  if (t.bos_token_id().has_value()) {
    FUZZ_CHECK(*t.bos_token_id() >= 0 && *t.bos_token_id() < t.vocab_size(), "bos id %d",
               *t.bos_token_id());
  }
  for (std::string_view text : kTexts) {
    const std::vector<TokenId> ids = t.Encode(text);
    CheckIds(t, ids, "Encode");
    CheckIds(t, t.Encode(text, /*add_bos=*/true), "Encode(add_bos)");
    CheckIds(t, t.EncodePrompt(text), "EncodePrompt");
    FUZZ_CHECK(ids == t.Encode(text), "Encode is not deterministic");
    CheckDecode(t, ids);
    t.PreTokenize(text);
  }
  // Every id of a small vocabulary (the first ones of a large one), then ids
  // outside it.
  std::vector<TokenId> all;
  for (TokenId id = 0; id < t.vocab_size() && id < 512; ++id) all.push_back(id);
  CheckDecode(t, all);
  for (TokenId id : {-1, t.vocab_size(), INT32_MAX, INT32_MIN}) {
    FUZZ_CHECK(t.Decode(std::vector<TokenId>{id}, false).empty(), "id %d outside the vocab decodes", id);
    FUZZ_CHECK(t.TokenBytes(id).empty(), "id %d outside the vocab has bytes", id);
    FUZZ_CHECK(!t.IsSpecial(id) && !t.IsByteFallback(id), "id %d outside the vocab has flags", id);
  }
  return 0;
}
