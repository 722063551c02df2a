#ifndef FOLIO_TESTS_TOKENIZER_TOKENIZER_TEST_UTIL_H_
#define FOLIO_TESTS_TOKENIZER_TOKENIZER_TEST_UTIL_H_

// Helpers for the tokenizer tests: small tokenizer.json files written to a
// temporary directory. The byte-level spelling is reimplemented here from
// GPT-2's bytes_to_unicode() so the tests do not trust the code under test.

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/tokenizer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace folio::testing_util {

using json = nlohmann::json;

// The GPT-2 spelling of raw bytes (independent implementation).
inline std::string Spell(const std::string& bytes) {
  std::string out;
  for (unsigned char b : bytes) {
    int cp = b;
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    if (!printable) {
      int n = 0;  // rank of b among the non-printable bytes
      for (int c = 0; c < b; ++c)
        if (!((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE)) ++n;
      cp = 256 + n;
    }
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  return out;
}

// A byte-level BPE tokenizer.json: ids 0..255 are the bytes (id == byte
// value), then one id per distinct merge result in order (256, 257, ...),
// then `extra_vocab` (raw bytes, no merge) and the added tokens as given.
struct BpeSpec {
  std::vector<std::pair<std::string, std::string>> merges;  // raw bytes
  std::vector<std::string> extra_vocab;                     // raw bytes
  json added_tokens = json::array();
  json pre_tokenizer = nullptr;  // default: GPT-2 ByteLevel
  bool ignore_merges = false;
  bool merges_as_pairs = false;  // ["a", "b"] instead of "a b"
};

inline json AddedToken(int id, const std::string& content, bool special = true) {
  return {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", special}};
}

inline json Gpt2PreTokenizer() {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", false},
          {"trim_offsets", true},
          {"use_regex", true}};
}

inline json SplitThenByteLevel(const std::string& regex, const std::string& behavior = "Isolated",
                               bool invert = false) {
  return {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"},
             {"pattern", {{"Regex", regex}}},
             {"behavior", behavior},
             {"invert", invert}},
            {{"type", "ByteLevel"},
             {"add_prefix_space", false},
             {"trim_offsets", true},
             {"use_regex", false}}}}};
}

inline constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

inline json BpeJson(const BpeSpec& spec) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[Spell(std::string(1, static_cast<char>(b)))] = b;
  int next = 256;
  json merges = json::array();
  for (const auto& [a, b] : spec.merges) {
    const std::string merged = Spell(a + b);
    if (!vocab.contains(merged)) vocab[merged] = next++;
    if (spec.merges_as_pairs) {
      merges.push_back(json::array({Spell(a), Spell(b)}));
    } else {
      merges.push_back(Spell(a) + " " + Spell(b));
    }
  }
  for (const std::string& t : spec.extra_vocab) vocab[Spell(t)] = next++;
  return {{"version", "1.0"},
          {"added_tokens", spec.added_tokens},
          {"normalizer", nullptr},
          {"pre_tokenizer", spec.pre_tokenizer.is_null() ? Gpt2PreTokenizer() : spec.pre_tokenizer},
          {"post_processor", nullptr},
          {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}}},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"ignore_merges", spec.ignore_merges},
            {"vocab", vocab},
            {"merges", merges}}}};
}

// A fresh directory under the test temp dir, removed with everything in it
// when this object goes away.
class ScopedTempDir {
 public:
  ScopedTempDir() {
    std::string pattern = ::testing::TempDir() + "/folio_tokenizer_XXXXXX";
    EXPECT_NE(mkdtemp(pattern.data()), nullptr);
    path_ = pattern;
  }
  ~ScopedTempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string WriteFile(const std::string& dir, const std::string& name,
                             const std::string& content) {
  const std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

// Writes `j` as dir/tokenizer.json in a fresh directory and loads it.
inline std::unique_ptr<Tokenizer> LoadJson(const json& j) {
  const ScopedTempDir dir;
  WriteFile(dir.path(), "tokenizer.json", j.dump());
  auto t = Tokenizer::LoadFromDirectory(dir.path());
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : nullptr;
}

inline std::unique_ptr<Tokenizer> LoadBpe(const BpeSpec& spec) { return LoadJson(BpeJson(spec)); }

}  // namespace folio::testing_util

#endif  // FOLIO_TESTS_TOKENIZER_TOKENIZER_TEST_UTIL_H_
