// The NFC normalizer in a byte-level tokenizer (Qwen2 / Qwen3 style), added
// tokens matched before ("normalized": false) and after ("normalized": true)
// normalization, and added tokens decoded through the decoder. The ids are
// worked out by hand below; tokenizers 0.23.2 gives the same ids and texts for
// this file (once the decoder has the trim_offsets field it insists on).

#include <string>
#include <utility>
#include <vector>

#include "common/incremental_detokenizer.h"
#include "common/tokenizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace folio {
namespace {

using ::testing::ElementsAre;
using testing_util::AddedToken;
using testing_util::BpeSpec;
using testing_util::json;

constexpr char kCafeDecomposed[] = "cafe\xCC\x81";  // e + U+0301 COMBINING ACUTE
constexpr char kCafe[] = "caf\xC3\xA9";             // U+00E9

// Bytes 0..255, then 256 "é" (C3 A9), 257 "ca", 258 "fé"; added tokens 259..264.
json QwenStyleJson(const json& normalizer) {
  BpeSpec spec;
  spec.merges = {{"\xC3", "\xA9"}, {"c", "a"}, {"f", "\xC3\xA9"}};
  spec.pre_tokenizer = testing_util::SplitThenByteLevel(testing_util::kQwen2Pattern);
  json normalized = AddedToken(261, "[e\xCC\x81]", /*special=*/false);
  normalized["normalized"] = true;
  spec.added_tokens = {AddedToken(259, "<|im_start|>"),
                       AddedToken(260, "<e\xCC\x81>", /*special=*/false),
                       normalized,
                       AddedToken(262, "\xC3\xA9<W>", /*special=*/false),
                       AddedToken(263, " <SP>", /*special=*/false),
                       AddedToken(264, "\xC4\xA0hi", /*special=*/false)};  // "Ġhi"
  json j = testing_util::BpeJson(spec);
  j["normalizer"] = normalizer;
  return j;
}

TEST(NfcNormalizerTest, DecomposedTextEncodesLikeComposed) {
  auto t = testing_util::LoadJson(QwenStyleJson({{"type", "NFC"}}));
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(t->Encode(kCafe), ElementsAre(257, 258));
  EXPECT_THAT(t->Encode(kCafeDecomposed), ElementsAre(257, 258));
  EXPECT_THAT(t->Encode("\xE2\x84\xAA"), ElementsAre('K'));  // KELVIN SIGN
  EXPECT_THAT(t->PreTokenize(kCafeDecomposed), ElementsAre(kCafe));
  // Each stretch between added tokens is normalized.
  EXPECT_THAT(t->Encode(std::string("x<|im_start|>") + kCafeDecomposed),
              ElementsAre('x', 259, 257, 258));
  EXPECT_EQ(t->Decode(t->Encode(kCafeDecomposed)), kCafe);

  // Inside a Sequence too; without a normalizer the marks stay apart.
  auto in_sequence = testing_util::LoadJson(
      QwenStyleJson({{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}}}}));
  ASSERT_NE(in_sequence, nullptr);
  EXPECT_THAT(in_sequence->Encode(kCafeDecomposed), ElementsAre(257, 258));
  auto none = testing_util::LoadJson(QwenStyleJson(nullptr));
  ASSERT_NE(none, nullptr);
  EXPECT_THAT(none->Encode(kCafeDecomposed), ElementsAre(257, 'f', 'e', 0xCC, 0x81));
}

// "normalized": false tokens are found in the raw text, "normalized": true
// ones in the normalized text, spelled as NFC spells them ("[é]").
TEST(NfcNormalizerTest, AddedTokensMatchRawOrNormalizedText) {
  auto t = testing_util::LoadJson(QwenStyleJson({{"type", "NFC"}}));
  ASSERT_NE(t, nullptr);
  EXPECT_THAT(t->Encode("<e\xCC\x81>"), ElementsAre(260));
  EXPECT_THAT(t->Encode("<\xC3\xA9>"), ElementsAre('<', 256, '>'));  // raw text differs
  EXPECT_THAT(t->Encode("[e\xCC\x81]"), ElementsAre(261));
  EXPECT_THAT(t->Encode("[\xC3\xA9]"), ElementsAre(261));
  EXPECT_THAT(t->Encode("a[\xC3\xA9]<e\xCC\x81>b"), ElementsAre('a', 261, 260, 'b'));
  EXPECT_EQ(t->FindToken("[e\xCC\x81]"), 261);  // looked up by its content as written
}

// Added tokens decode through the ByteLevel decoder, as tokenizers does: one
// spelled only with byte-map characters is byte-decoded ("Ġhi" reads " hi";
// "é<W>" is the lone byte E9 and "<W>", so U+FFFD<W>), others stay as they are
// ("<e" U+0301 ">": U+0301 is not in the map). A "normalized" one decodes from
// its normalized content: NFC's "[é]" is byte-decoded too, "[e" U+0301 "]" not.
TEST(NfcNormalizerTest, AddedTokensDecodeThroughTheDecoder) {
  auto t = testing_util::LoadJson(QwenStyleJson({{"type", "NFC"}}));
  ASSERT_NE(t, nullptr);
  const std::vector<TokenId> ids = {259, 264, 263, 262, 261, 260};
  EXPECT_EQ(t->Decode(ids, /*skip_special_tokens=*/false),
            "<|im_start|> hi <SP>\xEF\xBF\xBD<W>[\xEF\xBF\xBD]<e\xCC\x81>");
  EXPECT_EQ(t->Decode(ids), " hi <SP>\xEF\xBF\xBD<W>[\xEF\xBF\xBD]<e\xCC\x81>");
  EXPECT_EQ(IncrementalDetokenizer::Text(*t, ids), t->Decode(ids));
  EXPECT_EQ(t->TokenBytes(264), " hi");
  auto none = testing_util::LoadJson(QwenStyleJson(nullptr));
  ASSERT_NE(none, nullptr);
  EXPECT_EQ(none->Decode(ids), " hi <SP>\xEF\xBF\xBD<W>[e\xCC\x81]<e\xCC\x81>");
}

// skip_special_tokens leaves out a special token by the spelling it decodes
// from: a "normalized" one whose content NFC changes ("{e" U+0301 "}" is
// "{é}") is no special token's content then, so it stays; one NFC leaves
// alone ("<N>") goes, as does any special token without a normalizer.
TEST(NfcNormalizerTest, SpecialTokensTheNormalizerChangesAreNotSkipped) {
  json j = QwenStyleJson({{"type", "NFC"}});
  for (auto [id, content] : {std::pair{265, "{e\xCC\x81}"}, std::pair{266, "<N>"}}) {
    json token = AddedToken(id, content);
    token["normalized"] = true;
    j["added_tokens"].push_back(token);
  }
  auto t = testing_util::LoadJson(j);
  ASSERT_NE(t, nullptr);
  EXPECT_FALSE(t->IsSpecial(265));
  EXPECT_TRUE(t->IsSpecial(266));
  const std::vector<TokenId> ids = {'a', 265, 'b', 266, 'c', 259};
  EXPECT_EQ(t->Decode(ids), "a{\xEF\xBF\xBD}bc");
  EXPECT_EQ(t->Decode(ids, /*skip_special_tokens=*/false), "a{\xEF\xBF\xBD}b<N>c<|im_start|>");
  EXPECT_EQ(IncrementalDetokenizer::Text(*t, ids), t->Decode(ids));
  j["normalizer"] = nullptr;
  auto none = testing_util::LoadJson(j);
  ASSERT_NE(none, nullptr);
  EXPECT_TRUE(none->IsSpecial(265));
  EXPECT_EQ(none->Decode(ids), "abc");
}

}  // namespace
}  // namespace folio
