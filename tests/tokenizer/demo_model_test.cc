// The tokenizer against the Python BPE of tools/bpe_tokenizer.py, which trains
// the demo model's tokenizer: on models/folio-demo (its reference.json and a
// paragraph) and on a tokenizer the Python code trains here in a temp dir.

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/incremental_detokenizer.h"
#include "common/tokenizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace folio {
namespace {

using testing_util::json;

const std::string kSourceDir = FOLIO_SOURCE_DIR;
const std::string kDemoDir = kSourceDir + "/models/folio-demo";
constexpr const char* kPython = "/usr/bin/python3";

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs tools/bpe_tokenizer.py through a small driver: "train CORPUS VOCAB OUT"
// or "check TOKENIZER IN OUT" (IN: {"texts", "id_lists"}; OUT: {"encoded",
// "decoded"}: Python's encode of each text and decode of each id list).
constexpr const char* kDriver = R"PY(
import json, sys
sys.path.insert(0, sys.argv[1])
import bpe_tokenizer as b
mode = sys.argv[2]
if mode == "train":
    with open(sys.argv[3], encoding="utf-8") as f:
        text = f.read()
    b.train_bpe(text, int(sys.argv[4])).save(sys.argv[5])
else:
    tok = b.ByteLevelBPE.load(sys.argv[3])
    with open(sys.argv[4], encoding="utf-8") as f:
        inp = json.load(f)
    out = {"encoded": [tok.encode(t) for t in inp["texts"]],
           "decoded": [tok.decode(ids) for ids in inp["id_lists"]]}
    with open(sys.argv[5], "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)
)PY";

// The reason the Python oracle cannot run, or "" if it can.
std::string PythonUnavailable() {
  if (!Exists(kPython)) return std::string(kPython) + " is not installed";
  if (!Exists(kSourceDir + "/tools/bpe_tokenizer.py")) return "tools/bpe_tokenizer.py is missing";
  return "";
}

bool RunDriver(const std::string& dir, const std::vector<std::string>& args) {
  const std::string driver = testing_util::WriteFile(dir, "driver.py", kDriver);
  std::string cmd = std::string(kPython) + " '" + driver + "' '" + kSourceDir + "/tools'";
  for (const std::string& a : args) cmd += " '" + a + "'";
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd;
  return rc == 0;
}

// Compares our Encode and Decode with Python's on `texts` and on random id lists.
void CrossCheck(const std::string& tokenizer_path, const std::vector<std::string>& texts) {
  auto loaded = Tokenizer::LoadFromFile(tokenizer_path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Tokenizer& t = **loaded;
  std::mt19937 rng(42);
  std::vector<std::vector<TokenId>> id_lists;
  for (int i = 0; i < 300; ++i) {
    std::vector<TokenId> ids(1 + rng() % 12);
    for (TokenId& id : ids) id = static_cast<TokenId>(rng() % t.vocab_size());
    id_lists.push_back(ids);
  }
  const testing_util::ScopedTempDir temp;
  const std::string& dir = temp.path();
  const std::string in = testing_util::WriteFile(
      dir, "in.json", json{{"texts", texts}, {"id_lists", id_lists}}.dump());
  ASSERT_TRUE(RunDriver(dir, {"check", tokenizer_path, in, dir + "/out.json"}));
  const json out = json::parse(ReadFile(dir + "/out.json"));
  size_t total_ids = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::vector<TokenId> ids = t.Encode(texts[i]);
    EXPECT_EQ(ids, out["encoded"][i].get<std::vector<TokenId>>())
        << "text " << i << ": " << texts[i];
    EXPECT_EQ(t.Decode(ids, /*skip_special_tokens=*/false), texts[i]);
    total_ids += ids.size();
  }
  EXPECT_GT(total_ids, 0u);
  for (size_t i = 0; i < id_lists.size(); ++i) {
    EXPECT_EQ(t.Decode(id_lists[i], /*skip_special_tokens=*/false),
              out["decoded"][i].get<std::string>())
        << "id list " << i;
  }
}

const std::vector<std::string>& Paragraphs() {
  static const std::vector<std::string> texts = {
      "In the beginning God created the heaven and the earth. And the earth was without form, "
      "and void; and darkness was upon the face of the deep. And the Spirit of God moved upon "
      "the face of the waters.\nAnd God said, Let there be light: and there was light.",
      "It's 3:45pm on 2024-09-17 and we've got 1,000,000 tokens to serve -- don't panic!!\n\n"
      "    Indented code:\tx = y * 2;  // comment\r\n\r\nThe end.   ",
      "<|begin_of_text|>Blessed are the meek: for they shall inherit the earth.<|end_of_text|>",
      "Ça été très naïve, señor; Ærøskøbing — 我很感谢你的热情 🙂👍🏽 "
      "Привет!",
      "Jesus wept.",
      " ",
      "\n\n\n",
      "a",
      "'s 'll 'd 'S",
  };
  return texts;
}

TEST(DemoModelTokenizerTest, ReferencePromptsAndOutputs) {
  if (!Exists(kDemoDir + "/tokenizer.json"))
    GTEST_SKIP() << kDemoDir << "/tokenizer.json does not exist yet (tools/train_demo_model.py)";
  auto loaded = Tokenizer::LoadFromDirectory(kDemoDir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Tokenizer& t = **loaded;
  EXPECT_EQ(t.vocab_size(), 2048);
  EXPECT_EQ(t.bos_token_id(), t.FindToken("<|begin_of_text|>"));
  EXPECT_TRUE(t.IsSpecial(*t.FindToken("<|end_of_text|>")));
  if (!Exists(kDemoDir + "/reference.json")) return;
  const json ref = json::parse(ReadFile(kDemoDir + "/reference.json"));
  ASSERT_FALSE(ref["cases"].empty());
  for (const json& c : ref["cases"]) {
    const std::string prompt = c["prompt"].get<std::string>();
    EXPECT_EQ(t.Encode(prompt, ref.value("add_bos", true)),
              c["prompt_token_ids"].get<std::vector<TokenId>>())
        << prompt;
    const auto out_ids = c["output_token_ids"].get<std::vector<TokenId>>();
    const std::string out_text = c["output_text"].get<std::string>();
    EXPECT_EQ(t.Decode(out_ids), out_text);
    IncrementalDetokenizer detok(t);
    std::string streamed;
    for (TokenId id : out_ids) streamed += detok.Append(id);
    streamed += detok.Flush();
    EXPECT_EQ(streamed, out_text);
  }
}

TEST(DemoModelTokenizerTest, RoundTripsAndIsFast) {
  if (!Exists(kDemoDir + "/tokenizer.json"))
    GTEST_SKIP() << kDemoDir << "/tokenizer.json does not exist yet (tools/train_demo_model.py)";
  auto loaded = Tokenizer::LoadFromDirectory(kDemoDir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Tokenizer& t = **loaded;
  for (const std::string& text : Paragraphs()) {
    const std::vector<TokenId> ids = t.Encode(text);
    EXPECT_EQ(t.Decode(ids, /*skip_special_tokens=*/false), text);
  }
  // English compresses: fewer tokens than bytes.
  EXPECT_LT(t.Encode(Paragraphs()[0]).size(), Paragraphs()[0].size() / 2);
  // A long prompt: ~100k tokens.
  std::string prose;
  while (prose.size() < 400000) prose += Paragraphs()[0] + " " + Paragraphs()[1];
  const auto start = std::chrono::steady_clock::now();
  const std::vector<TokenId> ids = t.Encode(prose);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(t.Decode(ids), prose);
  std::printf("demo tokenizer: %zu bytes -> %zu tokens in %.3f s (%.0f tokens/s)\n", prose.size(),
              ids.size(), seconds, ids.size() / seconds);
  EXPECT_LT(seconds, 10.0);
}

TEST(DemoModelTokenizerTest, MatchesPythonEncoder) {
  if (!Exists(kDemoDir + "/tokenizer.json"))
    GTEST_SKIP() << kDemoDir << "/tokenizer.json does not exist yet (tools/train_demo_model.py)";
  if (const std::string why = PythonUnavailable(); !why.empty()) GTEST_SKIP() << why;
  CrossCheck(kDemoDir + "/tokenizer.json", Paragraphs());
}

// Independent of the committed model: Python trains a fresh tokenizer here.
TEST(PythonTrainedTokenizerTest, MatchesPythonEncoder) {
  if (const std::string why = PythonUnavailable(); !why.empty()) GTEST_SKIP() << why;
  std::string corpus;
  for (int i = 0; i < 20; ++i)
    for (const std::string& p : Paragraphs()) corpus += p + "\n";
  const testing_util::ScopedTempDir temp;
  const std::string& dir = temp.path();
  const std::string corpus_path = testing_util::WriteFile(dir, "corpus.txt", corpus);
  ASSERT_TRUE(RunDriver(dir, {"train", corpus_path, "600", dir + "/tokenizer.json"}));
  std::vector<std::string> texts = Paragraphs();
  texts.push_back("Unseen words: antidisestablishmentarianism, 12345678, ¿qué? 情热的你");
  CrossCheck(dir + "/tokenizer.json", texts);
}

}  // namespace
}  // namespace folio
