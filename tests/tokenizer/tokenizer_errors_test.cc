// Loading errors: each is a Status (never an exception or a crash) that names
// the file and, where there is one, the field.

#include <string>

#include "absl/status/status.h"
#include "common/tokenizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace folio {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing_util::BpeSpec;
using testing_util::json;

struct Loaded {
  absl::Status status;
  std::string path;
};

Loaded LoadText(const std::string& text) {
  const testing_util::ScopedTempDir dir;
  const std::string path = testing_util::WriteFile(dir.path(), "tokenizer.json", text);
  return {Tokenizer::LoadFromFile(path).status(), path};
}

Loaded LoadModified(void (*modify)(json&)) {
  json j = testing_util::BpeJson(BpeSpec{});
  modify(j);
  return LoadText(j.dump());
}

std::string Message(const absl::Status& s) { return std::string(s.message()); }

TEST(TokenizerErrorsTest, MissingFileAndDirectory) {
  const testing_util::ScopedTempDir temp;
  const std::string& dir = temp.path();
  auto r = Tokenizer::LoadFromDirectory(dir);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(r.status()), HasSubstr(dir + "/tokenizer.json"));
  r = Tokenizer::LoadFromFile(dir + "/nope.json");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(r.status()), HasSubstr("nope.json"));
  r = Tokenizer::LoadFromFile(dir);  // a directory
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(r.status()), HasSubstr(dir));
}

TEST(TokenizerErrorsTest, BadJson) {
  for (const std::string text : {"", "{", "{\"model\": ", "not json at all", "[1, 2,]"}) {
    const Loaded l = LoadText(text);
    EXPECT_EQ(l.status.code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(Message(l.status), AllOf(HasSubstr(l.path), HasSubstr("JSON"))) << text;
  }
  const Loaded l = LoadText("[1, 2]");
  EXPECT_EQ(l.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(l.status), HasSubstr(l.path));
}

TEST(TokenizerErrorsTest, UnsupportedModelType) {
  const Loaded l = LoadModified([](json& j) { j["model"]["type"] = "WordPiece"; });
  EXPECT_EQ(l.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(l.status),
              AllOf(HasSubstr(l.path), HasSubstr("model.type"), HasSubstr("WordPiece")));
}

TEST(TokenizerErrorsTest, UnsupportedPartsNameTheirField) {
  struct Case {
    void (*modify)(json&);
    const char* field;
  };
  const Case cases[] = {
      {[](json& j) { j.erase("model"); }, "model"},
      {[](json& j) { j["model"]["continuing_subword_prefix"] = "##"; },
       "model.continuing_subword_prefix"},
      {[](json& j) { j["model"]["vocab"] = json::array(); }, "model.vocab"},
      {[](json& j) { j["model"]["vocab"]["x"] = -3; }, "model.vocab"},
      {[](json& j) { j["model"]["merges"] = {"a"}; }, "model.merges[0]"},
      {[](json& j) { j["model"]["merges"] = {"a b c"}; }, "model.merges[0]"},
      {[](json& j) {
         j["model"]["vocab"]["ab"] = 256;
         j["model"]["merges"] = {"a b", "\xC4\xA0 zz"};
       },
       "model.merges[1]"},
      {[](json& j) { j["model"]["merges"] = {"a b"}; }, "model.merges[0]"},  // "ab" missing
      {[](json& j) {
         j["normalizer"] = {{"type", "Lowercase"}};
       },
       "normalizer.type"},
      {[](json& j) {
         j["decoder"] = {{"type", "WordPiece"}};
       },
       "decoder.type"},
      {[](json& j) {
         j["pre_tokenizer"] = {{"type", "Whitespace"}};
       },
       "pre_tokenizer.type"},
      {[](json& j) {
         j["pre_tokenizer"] = {
             {"type", "Sequence"},
             {"pretokenizers", {{{"type", "ByteLevel"}}, {{"type", "Metaspace"}}}}};
       },
       "pre_tokenizer.pretokenizers[1]"},  // Metaspace only first
      {[](json& j) {
         j["pre_tokenizer"] = {{"type", "Metaspace"}, {"prepend_scheme", "sometimes"}};
       },
       "pre_tokenizer.prepend_scheme"},
      {[](json& j) {
         j["normalizer"] = {{"type", "Sequence"},
                            {"normalizers",
                             {{{"type", "Prepend"}, {"prepend", "x"}},
                              {{"type", "Replace"}, {"pattern", {{"Regex", " +"}}}, {"content", "_"}}}}};
       },
       "normalizer.normalizers[1].pattern"},
      {[](json& j) {
         j["decoder"] = {{"type", "Sequence"},
                         {"decoders", {{{"type", "Fuse"}},
                                       {{"type", "Strip"}, {"content", " "}, {"start", 0},
                                        {"stop", 1}}}}};
       },
       "decoder.decoders[1]"},
      {[](json& j) {
         j["pre_tokenizer"] = {
             {"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
       },
       "pre_tokenizer.pattern"},
      {[](json& j) {
         j["pre_tokenizer"] = {
             {"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Sideways"}};
       },
       "pre_tokenizer.behavior"},
      {[](json& j) {
         j["added_tokens"] = {{{"id", 5}}};
       },
       "added_tokens[0]"},
      {[](json& j) {
         j["added_tokens"] = {{{"id", -1}, {"content", "<x>"}}};
       },
       "added_tokens[0].id"},
      {[](json& j) {
         j["added_tokens"] = {{{"id", 300}, {"content", ""}}};
       },
       "added_tokens[0].content"},
  };
  for (const Case& c : cases) {
    const Loaded l = LoadModified(c.modify);
    EXPECT_EQ(l.status.code(), absl::StatusCode::kInvalidArgument) << c.field << ": " << l.status;
    EXPECT_THAT(Message(l.status), AllOf(HasSubstr(l.path), HasSubstr(c.field)));
  }
}

// Only NFC of the Unicode normalization forms is implemented: the others are
// refused by name (silently skipping one would give wrong ids), alone or in a
// Sequence.
TEST(TokenizerErrorsTest, OtherUnicodeNormalizationFormsAreRefused) {
  for (const char* form : {"NFD", "NFKC", "NFKD"}) {
    json j = testing_util::BpeJson(BpeSpec{});
    j["normalizer"] = {{"type", form}};
    Loaded l = LoadText(j.dump());
    EXPECT_EQ(l.status.code(), absl::StatusCode::kInvalidArgument) << form;
    EXPECT_THAT(Message(l.status),
                AllOf(HasSubstr(l.path), HasSubstr("normalizer.type"), HasSubstr(form)));
    j["normalizer"] = {{"type", "Sequence"},
                       {"normalizers", {{{"type", "NFC"}}, {{"type", form}}}}};
    l = LoadText(j.dump());
    EXPECT_EQ(l.status.code(), absl::StatusCode::kInvalidArgument) << form;
    EXPECT_THAT(Message(l.status),
                AllOf(HasSubstr("normalizer.normalizers[1].type"), HasSubstr(form)));
  }
}

TEST(TokenizerErrorsTest, WronglyTypedFieldsAreStatusesNotExceptions) {
  for (auto modify :
       {+[](json& j) { j["model"]["ignore_merges"] = "yes"; },
        +[](json& j) { j["model"]["merges"] = 7; },
        +[](json& j) {
          j["added_tokens"] = {{{"id", 300}, {"content", "<x>"}, {"special", "very"}}};
        },
        +[](json& j) { j["pre_tokenizer"]["use_regex"] = 1.5; }}) {
    const Loaded l = LoadModified(modify);
    EXPECT_EQ(l.status.code(), absl::StatusCode::kInvalidArgument) << l.status;
    EXPECT_THAT(Message(l.status), HasSubstr(l.path));
  }
}

TEST(TokenizerErrorsTest, AcceptedShapes) {
  // NFC normalizer (Qwen2), null decoder, merges as pairs, missing model.type.
  for (auto modify :
       {+[](json& j) {
          j["normalizer"] = {{"type", "NFC"}};
        },
        +[](json& j) { j["decoder"] = nullptr; }, +[](json& j) { j["model"].erase("type"); },
        +[](json& j) { j["model"]["continuing_subword_prefix"] = ""; },
        +[](json& j) { j["model"]["merges"] = json::array(); }}) {
    const Loaded l = LoadModified(modify);
    EXPECT_TRUE(l.status.ok()) << l.status;
  }
}

}  // namespace
}  // namespace folio
