// The real `folio run` binary (path in FOLIO_BINARY) on the demo model: one
// prompt with --json, a prompts file, and bad flags.

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using nlohmann::json;

const std::string kSourceDir = FOLIO_SOURCE_DIR;
const std::string kDemoDir = kSourceDir + "/models/folio-demo";
const std::string kFolio = FOLIO_BINARY;

struct RunResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Runs `folio ARGS...` through the shell, stdout through popen, stderr to a temp file.
RunResult Folio(const std::vector<std::string>& args) {
  char err_path[] = "/tmp/folio_run_test_err.XXXXXX";
  const int fd = mkstemp(err_path);
  EXPECT_GE(fd, 0);
  close(fd);
  std::string cmd = Quote(kFolio);
  for (const std::string& a : args) cmd += " " + Quote(a);
  cmd += " 2>" + Quote(err_path);
  RunResult r;
  FILE* p = popen(cmd.c_str(), "r");
  EXPECT_NE(p, nullptr) << cmd;
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = ReadAll(err_path);
  unlink(err_path);
  return r;
}

std::vector<json> JsonLines(const std::string& out) {
  std::vector<json> lines;
  size_t start = 0;
  while (start < out.size()) {
    size_t end = out.find('\n', start);
    if (end == std::string::npos) end = out.size();
    const std::string line = out.substr(start, end - start);
    if (!line.empty()) {
      json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
      EXPECT_FALSE(j.is_discarded()) << "not JSON: " << line;
      lines.push_back(std::move(j));
    }
    start = end + 1;
  }
  return lines;
}

json Reference() {
  std::ifstream in(kDemoDir + "/reference.json");
  return json::parse(in);
}

TEST(FolioRunTest, OnePromptJsonHasSixteenGreedyTokens) {
  const json ref = Reference();
  const json& c = ref.at("cases").at(0);
  const std::string prompt = c.at("prompt").get<std::string>();
  const RunResult r = Folio({"run", "--model", kDemoDir, "--prompt", prompt, "--max-tokens", "16",
                             "--temperature", "0", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<json> lines = JsonLines(r.out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  const json& j = lines[0];
  EXPECT_EQ(j.at("prompt_token_ids"), c.at("prompt_token_ids"));
  ASSERT_EQ(j.at("outputs").size(), 1u);
  const json& o = j.at("outputs").at(0);
  const std::vector<int> ids = o.at("token_ids").get<std::vector<int>>();
  const std::string reason = o.at("finish_reason").get<std::string>();
  // 16 tokens, unless the model ends the text first.
  if (reason == "length") {
    EXPECT_EQ(ids.size(), 16u);
  } else {
    EXPECT_EQ(reason, "eos");
    EXPECT_LT(ids.size(), 16u);
  }
  // Greedy: the reference's continuation (computed with ignore_eos).
  const std::vector<int> want = c.at("output_token_ids").get<std::vector<int>>();
  ASSERT_GE(want.size(), ids.size());
  EXPECT_EQ(ids, std::vector<int>(want.begin(), want.begin() + ids.size()));
  const std::vector<double> logprobs = o.at("logprobs").get<std::vector<double>>();
  const std::vector<double> want_lp = c.at("logprobs").get<std::vector<double>>();
  ASSERT_EQ(logprobs.size(), ids.size());
  for (size_t i = 0; i < logprobs.size(); ++i) {
    EXPECT_NEAR(logprobs[i], want_lp[i], ref.value("logprob_tolerance", 1e-3)) << i;
  }
  EXPECT_FALSE(o.at("text").get<std::string>().empty());

  // --ignore-eos always gives exactly --max-tokens tokens; plain text mode
  // prints the continuation.
  const RunResult ignore = Folio({"run", "--model", kDemoDir, "--prompt", prompt, "--max-tokens", "16",
                                  "--temperature", "0", "--ignore-eos", "--json"});
  ASSERT_EQ(ignore.exit_code, 0) << ignore.err;
  const std::vector<json> ignore_lines = JsonLines(ignore.out);
  ASSERT_EQ(ignore_lines.size(), 1u);
  EXPECT_EQ(ignore_lines[0]["outputs"][0]["token_ids"].size(), 16u);
  const RunResult text = Folio({"run", "--model", kDemoDir, "--prompt", prompt, "--max-tokens", "16",
                                "--temperature", "0", "--ignore-eos"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr(ignore_lines[0]["outputs"][0]["text"].get<std::string>()));
}

TEST(FolioRunTest, PromptsFileGivesOneJsonLinePerPrompt) {
  const json ref = Reference();
  char dir_tmpl[] = "/tmp/folio_run_test.XXXXXX";
  ASSERT_NE(mkdtemp(dir_tmpl), nullptr);
  const std::string dir = dir_tmpl;
  const std::string file = dir + "/prompts.jsonl";
  {
    std::ofstream out(file);
    out << json{{"prompt", ref["cases"][0]["prompt"]}}.dump() << "\n";
    out << json{{"prompt_token_ids", ref["cases"][1]["prompt_token_ids"]}, {"max_tokens", 5}}.dump() << "\n";
    out << json{{"prompt", "The"}, {"temperature", 0.8}, {"top_p", 0.9}, {"seed", 7}, {"n", 2}}.dump()
        << "\n";
  }
  const RunResult r = Folio({"run", "--model", kDemoDir, "--prompts-file", file, "--max-tokens", "8",
                             "--temperature", "0", "--ignore-eos", "--json"});
  std::filesystem::remove_all(dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<json> lines = JsonLines(r.out);
  ASSERT_EQ(lines.size(), 3u) << r.out;
  // In file order, with per-line overrides.
  const std::vector<int> first = lines[0]["outputs"][0]["token_ids"].get<std::vector<int>>();
  const std::vector<int> want0 = ref["cases"][0]["output_token_ids"].get<std::vector<int>>();
  EXPECT_EQ(first, std::vector<int>(want0.begin(), want0.begin() + 8));
  EXPECT_EQ(lines[1]["prompt_token_ids"], ref["cases"][1]["prompt_token_ids"]);
  const std::vector<int> second = lines[1]["outputs"][0]["token_ids"].get<std::vector<int>>();
  const std::vector<int> want1 = ref["cases"][1]["output_token_ids"].get<std::vector<int>>();
  EXPECT_EQ(second, std::vector<int>(want1.begin(), want1.begin() + 5));
  ASSERT_EQ(lines[2]["outputs"].size(), 2u);
  for (const json& o : lines[2]["outputs"]) {
    EXPECT_EQ(o["token_ids"].size(), 8u);
    EXPECT_EQ(o["finish_reason"], "length");
  }
}

TEST(FolioRunTest, LogprobsFlagGivesTopTokensPerPosition) {
  const json ref = Reference();
  const json& c = ref.at("cases").at(0);
  const RunResult r = Folio({"run", "--model", kDemoDir, "--prompt", c.at("prompt").get<std::string>(),
                             "--max-tokens", "6", "--temperature", "0", "--ignore-eos",
                             "--logprobs", "5", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<json> lines = JsonLines(r.out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  const json& o = lines[0].at("outputs").at(0);
  const std::vector<int> ids = o.at("token_ids").get<std::vector<int>>();
  const std::vector<double> logprobs = o.at("logprobs").get<std::vector<double>>();
  ASSERT_EQ(ids.size(), 6u);
  const json& top = o.at("top_logprobs");
  ASSERT_EQ(top.size(), ids.size());
  const std::vector<double> want_lp = c.at("logprobs").get<std::vector<double>>();
  for (size_t i = 0; i < ids.size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_EQ(top[i].size(), 5u);
    // Greedy: the chosen token leads, with its own log-prob; then descending.
    EXPECT_EQ(top[i][0].at("token_id").get<int>(), ids[i]);
    EXPECT_NEAR(top[i][0].at("logprob").get<double>(), logprobs[i], 1e-6);
    EXPECT_NEAR(top[i][0].at("logprob").get<double>(), want_lp[i], 1e-3);
    double mass = 0.0;
    for (size_t k = 0; k < 5; ++k) {
      EXPECT_TRUE(top[i][k].at("text").is_string());
      const double lp = top[i][k].at("logprob").get<double>();
      EXPECT_LE(lp, 0.0);
      mass += std::exp(lp);
      if (k > 0) {
        EXPECT_GE(top[i][k - 1].at("logprob").get<double>(), lp);
      }
    }
    EXPECT_LE(mass, 1.0 + 1e-4);
  }
  // Without --logprobs there is no top_logprobs key; out of range is refused.
  const RunResult plain = Folio({"run", "--model", kDemoDir, "--prompt", "The", "--max-tokens", "2",
                                 "--temperature", "0", "--json"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_FALSE(JsonLines(plain.out).at(0).at("outputs").at(0).contains("top_logprobs"));
  const RunResult bad = Folio({"run", "--model", kDemoDir, "--prompt", "The", "--logprobs", "99"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.err, HasSubstr("logprobs"));
}

// --prompt-logprobs: vLLM's shape, null for the first prompt token, then each
// one's log-prob given those before it. The reference prompt followed by its
// greedy output scores that output as the reference generated it.
TEST(FolioRunTest, PromptLogprobsScoreThePrompt) {
  const json ref = Reference();
  const json& c = ref.at("cases").at(0);
  std::vector<int> ids = c.at("prompt_token_ids").get<std::vector<int>>();
  const size_t prompt_len = ids.size();
  const std::vector<int> out = c.at("output_token_ids").get<std::vector<int>>();
  ids.insert(ids.end(), out.begin(), out.begin() + 4);
  const std::string file = ::testing::TempDir() + "/prompt_logprobs.jsonl";
  {
    std::ofstream f(file);
    f << json({{"prompt_token_ids", ids}, {"prompt_logprobs", 2}, {"max_tokens", 1}}).dump() << "\n";
    f << json({{"prompt_token_ids", ids}, {"max_tokens", 1}}).dump() << "\n";
  }
  const RunResult r = Folio({"run", "--model", kDemoDir, "--prompts-file", file, "--temperature",
                             "0", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<json> lines = JsonLines(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  const json& scored = lines[0].at("prompt_logprobs");
  ASSERT_EQ(scored.size(), ids.size());
  EXPECT_TRUE(scored[0].is_null());
  const std::vector<double> want = c.at("logprobs").get<std::vector<double>>();
  for (size_t i = 1; i < ids.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(scored[i].at("token_id").get<int>(), ids[i]);
    EXPECT_TRUE(scored[i].at("text").is_string());
    EXPECT_EQ(scored[i].at("top_logprobs").size(), 2u);
    if (i >= prompt_len) {
      EXPECT_NEAR(scored[i].at("logprob").get<double>(), want[i - prompt_len], 1e-3);
    }
  }
  EXPECT_FALSE(lines[1].contains("prompt_logprobs"));
  const RunResult bad = Folio({"run", "--model", kDemoDir, "--prompt", "The", "--prompt-logprobs",
                               "21"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.err, HasSubstr("prompt_logprobs"));
}

// The model's generation_config.json recommends defaults for the sampling
// flags not given (--generation-config auto); a flag given wins; none turns
// them off.
TEST(FolioRunTest, GenerationConfigDefaultsTheFlagsNotGiven) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / ("gen_config_model_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  for (const char* f : {"config.json", "tokenizer.json", "model.safetensors"}) {
    std::filesystem::create_symlink(std::filesystem::absolute(kDemoDir + "/" + f), dir / f);
  }
  std::ofstream(dir / "generation_config.json") << R"({"temperature": 0.0, "max_new_tokens": 5})";
  const json ref = Reference();
  const json& c = ref.at("cases").at(0);
  const std::vector<int> want = c.at("output_token_ids").get<std::vector<int>>();
  auto tokens = [](const RunResult& r) {
    return JsonLines(r.out).at(0).at("outputs").at(0).at("token_ids").get<std::vector<int>>();
  };
  const std::string prompt = c.at("prompt").get<std::string>();

  const RunResult greedy = Folio({"run", "--model", dir.string(), "--prompt", prompt,
                                  "--ignore-eos", "--json"});
  ASSERT_EQ(greedy.exit_code, 0) << greedy.err;
  EXPECT_THAT(greedy.err, HasSubstr("temperature=0 max_tokens=5"));
  EXPECT_EQ(tokens(greedy), std::vector<int>(want.begin(), want.begin() + 5));

  const RunResult shorter = Folio({"run", "--model", dir.string(), "--prompt", prompt,
                                   "--ignore-eos", "--max-tokens", "3", "--json"});
  ASSERT_EQ(shorter.exit_code, 0) << shorter.err;
  EXPECT_EQ(tokens(shorter), std::vector<int>(want.begin(), want.begin() + 3));

  const RunResult none = Folio({"run", "--model", dir.string(), "--prompt", prompt, "--ignore-eos",
                                "--temperature", "0", "--generation-config", "none", "--json"});
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_EQ(tokens(none).size(), 16u);  // the flag's own default
  EXPECT_THAT(none.err, Not(HasSubstr("generation_config.json")));

  std::ofstream(dir / "generation_config.json", std::ios::trunc) << R"({"top_p": 0})";
  const RunResult bad = Folio({"run", "--model", dir.string(), "--prompt", prompt});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.err, HasSubstr("field 'top_p' must be in (0, 1], got 0"));
  std::filesystem::remove_all(dir);
}

TEST(FolioRunTest, TruncatePromptTokensKeepsThePromptsEnd) {
  const std::string file = ::testing::TempDir() + "/truncate.jsonl";
  std::ofstream(file) << R"({"prompt_token_ids": [5, 6, 7, 8, 9, 10], "max_tokens": 1,)"
                      << R"( "truncate_prompt_tokens": 4})" << "\n"
                      << R"({"prompt_token_ids": [5, 6, 7], "max_tokens": 1})" << "\n";
  const RunResult r = Folio({"run", "--model", kDemoDir, "--prompts-file", file, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<json> lines = JsonLines(r.out);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].at("prompt_token_ids").get<std::vector<int>>(), (std::vector<int>{7, 8, 9, 10}));
  EXPECT_EQ(lines[1].at("prompt_token_ids").get<std::vector<int>>(), (std::vector<int>{5, 6, 7}));
  // The flag applies to every request; 0 is refused.
  const RunResult flag = Folio({"run", "--model", kDemoDir, "--prompt", "In the beginning God",
                                "--truncate-prompt-tokens", "2", "--max-tokens", "1", "--json"});
  ASSERT_EQ(flag.exit_code, 0) << flag.err;
  EXPECT_EQ(JsonLines(flag.out).at(0).at("prompt_token_ids").size(), 2u);
  const RunResult bad = Folio({"run", "--model", kDemoDir, "--prompt", "Hi",
                               "--truncate-prompt-tokens", "0"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.err, HasSubstr("truncate_prompt_tokens must be >= 1"));
}

TEST(FolioRunTest, AllowedTokenIdsAndBadWordsShapeTheOutput) {
  const json ref = Reference().at("cases").at(0);
  const std::string prompt = ref.at("prompt").get<std::string>();
  const std::vector<int> out = ref.at("output_token_ids").get<std::vector<int>>();
  const RunResult allowed =
      Folio({"run", "--model", kDemoDir, "--prompt", prompt, "--temperature", "0", "--ignore-eos",
             "--allowed-token-id", std::to_string(out[2]), "--allowed-token-id",
             std::to_string(out[5]), "--json"});
  ASSERT_EQ(allowed.exit_code, 0) << allowed.err;
  const std::vector<int> ids =
      JsonLines(allowed.out).at(0).at("outputs").at(0).at("token_ids").get<std::vector<int>>();
  ASSERT_EQ(ids.size(), 16u);
  for (int t : ids) EXPECT_TRUE(t == out[2] || t == out[5]) << t;
  // " and" (267) comes at the reference's 13th token: bad_words ["and"] bans it.
  ASSERT_EQ(out[12], 267);
  const RunResult bad = Folio({"run", "--model", kDemoDir, "--prompt", prompt, "--temperature",
                               "0", "--ignore-eos", "--bad-word", "and", "--json"});
  ASSERT_EQ(bad.exit_code, 0) << bad.err;
  const std::vector<int> kept =
      JsonLines(bad.out).at(0).at("outputs").at(0).at("token_ids").get<std::vector<int>>();
  EXPECT_EQ(std::find(kept.begin(), kept.end(), 267), kept.end());
  EXPECT_EQ(std::vector<int>(kept.begin(), kept.begin() + 12),
            std::vector<int>(out.begin(), out.begin() + 12));
  const RunResult oov = Folio({"run", "--model", kDemoDir, "--prompt", "Hi",
                               "--allowed-token-id", "99999"});
  EXPECT_NE(oov.exit_code, 0);
  EXPECT_THAT(oov.err, HasSubstr("allowed_token_ids token id 99999 is out of vocabulary"));
}

TEST(FolioRunTest, BadFlagsExitNonZeroWithAMessage) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"run", "--model", kDemoDir, "--prompt", "Hi", "--bogus-flag"}, "--bogus-flag"},
      {{"run", "--model", kDemoDir, "--prompt", "Hi", "--max-tokens", "many"}, "--max-tokens"},
      {{"run", "--prompt", "Hi"}, "--model"},
      {{"run", "--model", kDemoDir}, "--prompt"},
      {{"run", "--model", kDemoDir, "--prompt", "Hi", "--max-tokens"}, "needs a value"},
      {{"run", "--model", "/nonexistent/model", "--prompt", "Hi"}, "/nonexistent/model"},
      {{"run", "--model", kDemoDir, "--prompt", "Hi", "--top-p", "1.5"}, "top_p"},
      {{"run", "--model", kDemoDir, "--prompts-file", "/nonexistent/prompts.jsonl"},
       "/nonexistent/prompts.jsonl"},
      {{"frobnicate"}, "frobnicate"},
      {{"run", "--model", kDemoDir, "--prompt", ""}, "--prompt is empty"},
      {{"run", "--model", kDemoDir, "--prompt", "Hi", "--dtype", "float16"}, "--dtype float16"},
      {{"run", "--model", kDemoDir, "--prompt", "Hi", "--dtype", "int4"}, "--dtype 'int4'"},
      {{"run", "--model", kDemoDir, "--prompt", "Hi", "--quantization", "fp8"},
       "--quantization 'fp8'"},
      {{"run", "--model", kDemoDir, "--prompt", "Hi", "--kv-cache-dtype", "fp16"},
       "--kv-cache-dtype 'fp16': expected auto, fp8 (fp8_e4m3) or int8"},
      {{"run", "--model", kDemoDir, "--prompt", "Hi", "--kv-cache-dtype"}, "needs a value"},
      // 10 blocks of 16 hold 160 tokens: a longer max_model_len could never finish.
      {{"run", "--model", kDemoDir, "--prompt", "Hi", "--num-device-blocks", "10",
        "--max-model-len", "161"},
       "exceeds the 160 token slots"},
  };
  for (const Case& c : cases) {
    std::string joined;
    for (const std::string& a : c.args) joined += a + " ";
    SCOPED_TRACE(joined);
    const RunResult r = Folio(c.args);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_THAT(r.err, HasSubstr(c.message));
  }
  // --help is not an error.
  EXPECT_THAT(Folio({"run", "--model", "/nonexistent/model", "--prompt", "Hi"}).err,
              HasSubstr("model directory not found"));
  const RunResult help = Folio({"run", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("--prompts-file"));
  EXPECT_THAT(help.out, HasSubstr("--kv-cache-dtype auto|int8|fp8"));
}

// --timing reports the run's figures on stderr, then the step time by part;
// stdout keeps only the text.
// int8 weights serve the same prompt too.
// A quantized KV cache serves the same request: 16 greedy tokens, the first
// one the reference's with its log-prob within the codes' error (later
// tokens may part from fp32's where two were nearly tied).
TEST(FolioRunTest, QuantizedKvCacheGeneratesCloseToTheReference) {
  const json ref = Reference();
  const json& c = ref.at("cases").at(0);
  for (const std::string dtype : {"int8", "fp8"}) {
    SCOPED_TRACE(dtype);
    const RunResult r = Folio({"run", "--model", kDemoDir, "--prompt", c.at("prompt").get<std::string>(),
                               "--max-tokens", "16", "--temperature", "0", "--ignore-eos", "--json",
                               "--kv-cache-dtype", dtype});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::vector<json> lines = JsonLines(r.out);
    ASSERT_EQ(lines.size(), 1u) << r.out;
    const json& o = lines[0].at("outputs").at(0);
    const std::vector<int> ids = o.at("token_ids").get<std::vector<int>>();
    ASSERT_EQ(ids.size(), 16u);
    EXPECT_EQ(ids[0], c.at("output_token_ids").at(0).get<int>());
    EXPECT_NEAR(o.at("logprobs").at(0).get<double>(), c.at("logprobs").at(0).get<double>(), 0.1);
  }
}

TEST(FolioRunTest, TimingLineCountsTheTokens) {
  for (const std::string quantization : {"", "int8"}) {
    std::vector<std::string> args = {"run", "--model", kDemoDir, "--prompt", "Hi", "--max-tokens",
                                     "9", "--ignore-eos", "--temperature", "0", "--timing"};
    if (!quantization.empty()) args.insert(args.end(), {"--quantization", quantization});
    const RunResult r = Folio(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.err, HasSubstr("1 request(s), "));
    EXPECT_THAT(r.err, HasSubstr(" + 9 output tokens in "));
    EXPECT_THAT(r.err, HasSubstr(" ms per output token"));
    EXPECT_THAT(r.out, Not(HasSubstr("ms per output token")));
    // Then the worker's steps by part: 1 prompt step, 8 decode steps.
    EXPECT_THAT(r.err, HasSubstr("folio run: decode steps: 8, 1.0 tokens each, "));
    EXPECT_THAT(r.err, HasSubstr("folio run: prompt steps: 1, "));
    EXPECT_THAT(r.err, HasSubstr("  mlp gemms "));
    EXPECT_THAT(r.err, HasSubstr("  attention "));
  }
}

// The model allows 512 tokens, 10 blocks hold 160: max_model_len is capped
// (and said so); a prompt beyond the cap fails its request, which is
// printed and makes the run exit 1 while the other request is served.
TEST(FolioRunTest, MaxModelLenIsCappedAtTheCacheAndAFailedRequestExitsOne) {
  char path[] = "/tmp/folio_run_test_prompts.XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::string long_prompt;
  for (int i = 0; i < 100; ++i) long_prompt += "and the LORD said ";
  {
    std::ofstream out(path);
    out << json{{"prompt", "And God said"}, {"max_tokens", 4}}.dump() << "\n";
    out << json{{"prompt", long_prompt}, {"max_tokens", 4}}.dump() << "\n";
  }
  const RunResult r = Folio({"run", "--model", kDemoDir, "--prompts-file", path,
                             "--num-device-blocks", "10", "--temperature", "0", "--json"});
  unlink(path);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("max_model_len capped at 160"));
  const std::vector<json> lines = JsonLines(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  EXPECT_FALSE(lines[0].contains("error")) << lines[0];
  EXPECT_EQ(lines[0]["outputs"][0]["token_ids"].size(), 4u);
  EXPECT_THAT(lines[1].value("error", ""), HasSubstr("max_model_len 160"));
}

// --host-prefix-cache: one request at a time on 8 device blocks, a prompt
// comes back after two others evicted its blocks. With the host tier (the
// default with host blocks, or asked for) its two full blocks come back from
// the host (32 cached tokens), without it (--no-host-prefix-cache) nothing is
// cached; the tokens are the same every way.
TEST(FolioRunTest, HostPrefixCacheBringsAnEvictedPromptBackWithTheSameTokens) {
  char path[] = "/tmp/folio_run_test_host_tier.XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  const std::string first =
      "In the beginning God created the heaven and the earth. And the earth was without "
      "form, and void; and darkness was upon the face of the deep.";
  std::string second, third;
  for (int i = 0; i < 2; ++i) {
    second += "And God said, Let there be light: and there was light. And God saw the light, "
              "that it was good: and God divided the light from the darkness. ";
    third += "And God called the light Day, and the darkness he called Night. And the evening "
             "and the morning were the first day. ";
  }
  {
    std::ofstream out(path);
    for (const std::string& p : {first, second, third, first}) {
      out << json{{"prompt", p}, {"max_tokens", 6}}.dump() << "\n";
    }
  }
  std::vector<std::vector<json>> runs;
  for (const char* tier : {"--no-host-prefix-cache", "", "--host-prefix-cache"}) {
    std::vector<std::string> args = {"run", "--model", kDemoDir, "--prompts-file", path,
                                     "--num-device-blocks", "8", "--num-host-blocks", "32",
                                     "--max-num-seqs", "1", "--temperature", "0", "--json"};
    if (*tier != '\0') args.push_back(tier);
    const RunResult r = Folio(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    runs.push_back(JsonLines(r.out));
    ASSERT_EQ(runs.back().size(), 4u);
  }
  unlink(path);
  EXPECT_EQ(runs[0][3]["num_cached_prompt_tokens"], 0);
  EXPECT_EQ(runs[1][3]["num_cached_prompt_tokens"], 32);
  EXPECT_EQ(runs[2][3]["num_cached_prompt_tokens"], 32);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(runs[1][i]["outputs"][0]["token_ids"], runs[0][i]["outputs"][0]["token_ids"]) << i;
    EXPECT_EQ(runs[2][i]["outputs"][0]["token_ids"], runs[0][i]["outputs"][0]["token_ids"]) << i;
  }
  EXPECT_EQ(runs[1][3]["outputs"][0]["token_ids"], runs[1][0]["outputs"][0]["token_ids"]);
}

TEST(FolioRunTest, HostPrefixCacheWithoutHostBlocksIsRefused) {
  const RunResult r = Folio({"run", "--model", kDemoDir, "--prompt", "Hi", "--max-tokens", "2",
                             "--host-prefix-cache"});
  EXPECT_EQ(r.exit_code, 2);  // a bad flag combination, as for other bad flags
  EXPECT_THAT(r.err, HasSubstr("--host-prefix-cache needs host blocks"));
}

}  // namespace
