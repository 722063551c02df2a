// SentencePiece-style tokenizer.json files (the Llama 2 "legacy" layout, the
// Metaspace layout of newer Llama / Mistral files, and Metaspace with split)
// against Hugging Face's tokenizers library: tests/tokenizer/testdata/*/
// expected.json holds its encodings and decodings of ~56 texts and ~150 id
// lists (made by tools/make_spm_tokenizer_fixture.py from a small
// SentencePiece BPE model with byte fallback, trained on the KJV).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "common/incremental_detokenizer.h"
#include "common/tokenizer.h"
#include "nlohmann/json.hpp"

namespace folio {
namespace {

using nlohmann::json;

const std::string kTestData = std::string(FOLIO_SOURCE_DIR) + "/tests/tokenizer/testdata/";

class SpmTokenizerTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string dir = kTestData + GetParam();
    absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::LoadFromDirectory(dir);
    ASSERT_TRUE(t.ok()) << t.status();
    tokenizer_ = *std::move(t);
    std::ifstream in(dir + "/expected.json");
    expected_ = json::parse(in);
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  json expected_;
};

TEST_P(SpmTokenizerTest, EncodesAsTokenizersDoes) {
  int checked = 0;
  for (const json& c : expected_.at("encode")) {
    const std::string text = c.at("text").get<std::string>();
    EXPECT_EQ(tokenizer_->Encode(text), c.at("ids").get<std::vector<TokenId>>())
        << "text: \"" << text << "\"";
    ++checked;
  }
  EXPECT_GE(checked, 50);
}

TEST_P(SpmTokenizerTest, DecodesAsTokenizersDoes) {
  int checked = 0;
  for (const json& c : expected_.at("decode")) {
    const std::vector<TokenId> ids = c.at("ids").get<std::vector<TokenId>>();
    const bool skip = c.at("skip_special_tokens").get<bool>();
    EXPECT_EQ(tokenizer_->Decode(ids, skip), c.at("text").get<std::string>())
        << c.value("name", std::string()) << " ids " << json(ids).dump() << " skip " << skip;
    ++checked;
  }
  EXPECT_GE(checked, 100);
}

// The ids a model sees round-trip to the text, and BOS is <s>.
TEST_P(SpmTokenizerTest, RoundTripsAndFindsTheSpecialTokens) {
  EXPECT_EQ(tokenizer_->bos_token_id(), 1);
  EXPECT_EQ(tokenizer_->FindToken("</s>"), 2);
  EXPECT_EQ(tokenizer_->FindToken("\xE2\x96\x81the"), 261);
  EXPECT_EQ(tokenizer_->FindToken("<0x0A>"), 13);
  const std::string text = "And God said, Let there be light: and there was light.\n\tSelah 42";
  EXPECT_EQ(tokenizer_->Decode(tokenizer_->Encode(text)), text);
  const std::vector<TokenId> with_bos = tokenizer_->Encode(text, /*add_bos=*/true);
  ASSERT_FALSE(with_bos.empty());
  EXPECT_EQ(with_bos[0], 1);
}

// Streaming a generation: each token's text in context, so the first word
// keeps the space the full decode strips; multi-byte characters spelled as
// byte tokens come out whole.
TEST_P(SpmTokenizerTest, StreamsTheTextInContext) {
  const std::string text = "And God said 42, Selah\nQ\xC3\x9F\xE6\x97\xA5 done";  // Qß日: bytes
  const std::vector<TokenId> ids = tokenizer_->Encode(text);
  IncrementalDetokenizer stream(*tokenizer_);
  std::string streamed;
  for (TokenId id : ids) {
    const std::string piece = stream.Append(id);
    EXPECT_TRUE(IsValidUtf8(piece));
    streamed += piece;
  }
  streamed += stream.Flush();
  EXPECT_EQ(streamed, " " + text);
  EXPECT_EQ(IncrementalDetokenizer::Text(*tokenizer_, ids), streamed);
  EXPECT_EQ(tokenizer_->Decode(ids), text);
}

// Every expected decoding, streamed: the same text, but for the leading space
// a standalone decode strips. Invalid byte-fallback runs (one U+FFFD per
// token) included.
TEST_P(SpmTokenizerTest, StreamingEqualsDecodeButForTheLeadingSpace) {
  for (const json& c : expected_.at("decode")) {
    const std::vector<TokenId> ids = c.at("ids").get<std::vector<TokenId>>();
    const bool skip = c.at("skip_special_tokens").get<bool>();
    const std::string streamed = IncrementalDetokenizer::Text(*tokenizer_, ids, skip);
    const std::string want = c.at("text").get<std::string>();
    // What Decode dropped can only be leading spaces of the stream.
    const size_t extra = streamed.size() >= want.size() ? streamed.size() - want.size() : 0;
    EXPECT_TRUE(streamed.size() >= want.size() && streamed.substr(extra) == want &&
                streamed.find_first_not_of(' ') >= extra)
        << c.value("name", std::string()) << " ids " << json(ids).dump() << ": \"" << streamed
        << "\" vs \"" << want << "\"";
  }
}

// A byte-level tokenizer stays byte-level with a Replace normalizer (some
// have one): its ByteLevel pre-tokenizer decides how the vocab is spelled.
TEST(SpmDetectionTest, AByteLevelTokenizerWithAReplaceNormalizerStaysByteLevel) {
  const std::string demo = std::string(FOLIO_SOURCE_DIR) + "/models/folio-demo/tokenizer.json";
  absl::StatusOr<std::unique_ptr<Tokenizer>> plain = Tokenizer::LoadFromFile(demo);
  ASSERT_TRUE(plain.ok()) << plain.status();
  std::ifstream in(demo);
  json j = json::parse(in);
  j["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", "\r\n"}}}, {"content", "\n"}};
  const std::string path = ::testing::TempDir() + "/replace_normalizer_tokenizer.json";
  std::ofstream(path) << j.dump();
  absl::StatusOr<std::unique_ptr<Tokenizer>> replaced = Tokenizer::LoadFromFile(path);
  ASSERT_TRUE(replaced.ok()) << replaced.status();
  const std::string text = "And God said, Let there be light:\nand there was light.";
  EXPECT_EQ((*replaced)->Encode(text), (*plain)->Encode(text));
  EXPECT_EQ((*replaced)->Encode("a\r\nb"), (*plain)->Encode("a\nb"));
}

// The special tokens around a prompt come from the post-processor, as in
// Hugging Face: Llama's TemplateProcessing adds BOS (alone or in a Sequence
// after ByteLevel, as Llama 3 writes it), ByteLevel alone (Qwen2, GPT-2) and
// null add none, a template may add tokens after the text too.
TEST(PostProcessorTest, PromptSpecialTokensFollowTheTemplate) {
  const std::string demo = std::string(FOLIO_SOURCE_DIR) + "/models/folio-demo/tokenizer.json";
  std::ifstream in(demo);
  const json original = json::parse(in);
  auto load = [&](const json& post) {
    json j = original;
    j["post_processor"] = post;
    const std::string path = ::testing::TempDir() + "/post_processor_tokenizer.json";
    std::ofstream(path) << j.dump();
    return Tokenizer::LoadFromFile(path);
  };
  const json bos = {{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}};
  const json eos = {{"SpecialToken", {{"id", "<|end_of_text|>"}, {"type_id", 0}}}};
  const json text = {{"Sequence", {{"id", "A"}, {"type_id", 0}}}};
  const json template_bos = {{"type", "TemplateProcessing"}, {"single", {bos, text}}};
  const json byte_level = {{"type", "ByteLevel"}, {"trim_offsets", false}};
  const std::string prompt = "And God said";

  absl::StatusOr<std::unique_ptr<Tokenizer>> t = load(template_bos);
  ASSERT_TRUE(t.ok()) << t.status();
  const std::vector<TokenId> plain = (*t)->Encode(prompt);
  std::vector<TokenId> with_bos = {2046};
  with_bos.insert(with_bos.end(), plain.begin(), plain.end());
  EXPECT_EQ((*t)->EncodePrompt(prompt), with_bos);
  EXPECT_EQ((*t)->EncodePrompt(prompt, /*add_special_tokens=*/false), plain);

  t = load({{"type", "Sequence"}, {"processors", {byte_level, template_bos}}});  // Llama 3
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->EncodePrompt(prompt), with_bos);

  for (const json& none : {byte_level, json(nullptr)}) {  // Qwen2 / GPT-2, or no processor
    t = load(none);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ((*t)->EncodePrompt(prompt), plain) << none.dump();
  }

  t = load({{"type", "TemplateProcessing"}, {"single", {bos, text, eos}}});
  ASSERT_TRUE(t.ok()) << t.status();
  std::vector<TokenId> around = with_bos;
  around.push_back(2047);
  EXPECT_EQ((*t)->EncodePrompt(prompt), around);

  t = load({{"type", "TemplateProcessing"},
            {"single", {{{"SpecialToken", {{"id", "<nope>"}, {"type_id", 0}}}}, text}}});
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()), ::testing::HasSubstr("post_processor.single[0]"));
}

// Added tokens by their "normalized" flag, as tokenizers' AddedVocabulary
// splits: "normalized": false ones in the raw text first, then the others in
// each normalized stretch, spelled as the normalizer spells them (the legacy
// Prepend + Replace makes "<N>" "▁<N>": it matches only after a space or at
// the start). All of them decode through the decoder: "▁" reads as a space.
// Ids and texts from tokenizers 0.23.2 on each fixture plus these tokens.
class SpmAddedTokenTest : public ::testing::TestWithParam<int> {
 protected:
  static constexpr const char* kLayouts[] = {"spm_legacy", "spm_metaspace",
                                             "spm_metaspace_split"};
  void SetUp() override {
    std::ifstream in(kTestData + kLayouts[GetParam()] + "/tokenizer.json");
    json j = json::parse(in);
    auto add = [&](int id, const char* content, bool normalized, bool special) {
      j["added_tokens"].push_back({{"id", id}, {"content", content}, {"single_word", false},
                                   {"lstrip", false}, {"rstrip", false},
                                   {"normalized", normalized}, {"special", special}});
    };
    add(800, "<N>", /*normalized=*/true, /*special=*/false);
    add(801, "<R>", /*normalized=*/false, /*special=*/false);
    add(802, "\xE2\x96\x81<SP>", /*normalized=*/false, /*special=*/false);  // "▁<SP>"
    add(803, "<S>", /*normalized=*/true, /*special=*/true);
    add(804, "\xE2\x96\x81<A>", /*normalized=*/false, /*special=*/true);  // "▁<A>"
    add(805, "<A>", /*normalized=*/true, /*special=*/true);
    const std::string path =
        ::testing::TempDir() + "/" + kLayouts[GetParam()] + "_added_tokenizer.json";
    std::ofstream(path) << j.dump();
    absl::StatusOr<std::unique_ptr<Tokenizer>> t = Tokenizer::LoadFromFile(path);
    ASSERT_TRUE(t.ok()) << t.status();
    tokenizer_ = *std::move(t);
  }
  // The expectation of this layout.
  template <class T>
  T Of(T legacy, T metaspace, T split) const {
    T* all[] = {&legacy, &metaspace, &split};
    return std::move(*all[GetParam()]);
  }

  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_P(SpmAddedTokenTest, NormalizedTokensMatchTheNormalizedText) {
  using Ids = std::vector<TokenId>;
  const Tokenizer& t = *tokenizer_;
  EXPECT_EQ(t.Encode("a <N> b"), Of<Ids>({262, 800, 273}, {262, 720, 800, 273},
                                          {262, 720, 800, 273}));
  EXPECT_EQ(t.Encode("a<N>b"), Of<Ids>({262, 63, 769, 65, 740}, {262, 800, 740},
                                        {262, 800, 273}));
  EXPECT_EQ(t.Encode("<N>"), Ids({800}));
  EXPECT_EQ(t.Encode("a  <N>"), Of<Ids>({262, 720, 800}, {262, 438, 800}, {262, 720, 720, 800}));
  EXPECT_EQ(t.Encode("<N><N>"), Of<Ids>({800, 63, 769, 65}, {800, 800}, {800, 800}));
  EXPECT_EQ(t.Encode("<R><N>"), Ids({801, 800}));
  EXPECT_EQ(t.Encode("And <N> God <R> said"),
            Of<Ids>({300, 800, 391, 720, 801, 720, 394}, {300, 720, 800, 391, 720, 801, 394},
                    {300, 720, 800, 391, 720, 801, 394}));
  EXPECT_EQ(t.Encode("a <S> b"), Of<Ids>({262, 803, 273}, {262, 720, 803, 273},
                                          {262, 720, 803, 273}));
  EXPECT_EQ(t.Encode("said\xE2\x96\x81<SP>God"),
            Of<Ids>({394, 802, 391}, {394, 802, 755, 334}, {394, 802, 391}));
  EXPECT_EQ(t.FindToken("<N>"), 800);
}

TEST_P(SpmAddedTokenTest, AddedTokensDecodeThroughTheDecoder) {
  using Text = std::string;
  const Tokenizer& t = *tokenizer_;
  const std::vector<TokenId> normalized = {262, 800, 273}, spaced = {262, 802, 273};
  EXPECT_EQ(t.Decode(normalized), Of<Text>("a <N> b", "a<N> b", "a<N> b"));
  EXPECT_EQ(t.Decode(spaced), "a <SP> b");
  EXPECT_EQ(t.Decode({{802}}), "<SP>");  // Strip, or the Metaspace decoder's first token
  EXPECT_EQ(t.Decode({{1, 802, 262}}, /*skip_special_tokens=*/false), "<s> <SP> a");
  EXPECT_EQ(t.Decode({{1, 802, 262}}), "<SP> a");
  EXPECT_EQ(t.Decode({{801, 262}}), "<R> a");
  // Streamed: the same text in context.
  EXPECT_EQ(IncrementalDetokenizer::Text(t, normalized),
            Of<Text>(" a <N> b", " a<N> b", " a<N> b"));
  EXPECT_EQ(IncrementalDetokenizer::Text(t, spaced), " a <SP> b");
}

// skip_special_tokens leaves out a token whose decoded spelling is a special
// token's content (tokenizers looks it up by that spelling). The legacy
// normalizer spells the special, "normalized" token "<S>" as "▁<S>", which is
// no special token's content: it stays, and keeps the byte-fallback tokens
// around it apart. "<A>" becomes "▁<A>", a special token's content: it goes.
TEST_P(SpmAddedTokenTest, SpecialTokensAreSkippedByTheSpellingTheyDecodeFrom) {
  using Text = std::string;
  const Tokenizer& t = *tokenizer_;
  EXPECT_EQ(t.IsSpecial(803), GetParam() != 0);
  EXPECT_TRUE(t.IsSpecial(804));
  EXPECT_TRUE(t.IsSpecial(805));
  const std::vector<TokenId> special = {262, 803, 273};
  EXPECT_EQ(t.Decode(special), Of<Text>("a <S> b", "a b", "a b"));
  EXPECT_EQ(t.Decode(special, /*skip_special_tokens=*/false),
            Of<Text>("a <S> b", "a<S> b", "a<S> b"));
  // "<0x45>" ("E") and "<0xC6>" (a lone lead byte): one run when "<S>" goes.
  const std::vector<TokenId> between_bytes = {72, 803, 201};
  EXPECT_EQ(t.Decode(between_bytes),
            Of<Text>("E <S>\xEF\xBF\xBD", "\xEF\xBF\xBD\xEF\xBF\xBD",
                     "\xEF\xBF\xBD\xEF\xBF\xBD"));
  EXPECT_EQ(t.Decode({{1, 803, 2}}), Of<Text>("<S>", "", ""));
  EXPECT_EQ(t.Decode({{262, 805, 273, 804}}), "a b");
  EXPECT_EQ(t.Decode({{262, 805, 273, 804}}, /*skip_special_tokens=*/false),
            Of<Text>("a <A> b <A>", "a<A> b <A>", "a<A> b <A>"));
  // Streamed: the same tokens left out.
  EXPECT_EQ(IncrementalDetokenizer::Text(t, special), Of<Text>(" a <S> b", " a b", " a b"));
  EXPECT_EQ(IncrementalDetokenizer::Text(t, between_bytes), t.Decode(between_bytes));
}

INSTANTIATE_TEST_SUITE_P(Layouts, SpmAddedTokenTest, ::testing::Values(0, 1, 2));

INSTANTIATE_TEST_SUITE_P(Layouts, SpmTokenizerTest,
                         ::testing::Values("spm_legacy", "spm_metaspace", "spm_metaspace_split"));

}  // namespace
}  // namespace folio
