// Random-weight models of other shapes than the demo model, each against
// the reference.json that tools/make_random_model.py computed with a plain
// torch forward pass (never our C++ code): greedy tokens identical,
// log-probs of the chosen tokens and of the top 5 within the reference's
// tolerance; every other case also scores its prompt (prompt_logprobs), checked
// against the reference's forward pass over the prompt. The models are written
// into the build tree at test time by the ctest fixture `random_models`
// (tests/client/CMakeLists.txt), one per directory under FOLIO_RANDOM_MODELS_DIR:
//   llama_hd128  head_dim 128, 32 heads / 8 KV heads, BF16
//   hd256        head_dim 256, tied embeddings, F16, 3 shards + index json
//   qwen2        Qwen2 with QKV bias, tied embeddings, F32, no head_dim in config
//   llama3       llama3 rope scaling, BF16, eos as a list
//   mistral      MistralForCausalLM, F32, block size 8, chunked prefill
//   mistral_window  Mistral with a sliding window of 6, block size 8, chunked
//                   prefill: every case outgrows the window; a pool of 8 blocks,
//                   too small for the batch unless the blocks that fell out of
//                   the window go back (and get reused by the other sequences)
//   qwen2_window    Qwen2 with a window of 5 on layer 1 only (max_window_layers 1)
// and RoPE scaling that lengthens the context (ModelConfig::MaxModelLen, 128
// positions for each), with prompts past the unscaled range:
//   yarn            Qwen2, yarn factor 4 over original 32 = max_position_embeddings,
//                   F32, block size 8, chunked prefill
//   yarn_v5_mscale  transformers v5 rope_parameters, yarn factor 8 over original 16
//                   with mscale / mscale_all_dim, GQA, head_dim 64, BF16
//   linear_v5       v5 rope_parameters, linear factor 2 over 64 positions, F16
//   mistral_v5      v5 rope_parameters without scaling ("default"): its rope_theta

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "client/offline_engine.h"
#include "common/model_config.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace folio {
namespace {

const std::string kModels = FOLIO_RANDOM_MODELS_DIR;

struct Case {
  std::string name;
  int32_t block_size = 16;
  int32_t max_num_batched_tokens = 2048;
  int32_t num_device_blocks = 0;  // 0: a 32 MiB cache
  bool releases_blocks = false;   // every layer windowed: blocks leave the window
  // > 0: the context the config gives (ModelConfig::MaxModelLen), served in
  // full; with linear or yarn rope scaling some reference sequence must run
  // past the unscaled range (max_position_embeddings; yarn: the original).
  int32_t max_model_len = 0;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class RandomModelTest : public ::testing::TestWithParam<Case> {};

// Top-N lists: the same values in the same order as the reference's
// [[id, logprob], ...]; ids where no near-tie makes the order ambiguous.
void ExpectTopLogprobs(const std::vector<TokenLogprob>& got, const nlohmann::json& want,
                       double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    const double lp = want[k][1].get<double>();
    EXPECT_NEAR(got[k].logprob, lp, tol) << "rank " << k;
    const bool clear_above = k == 0 || want[k - 1][1].get<double>() - lp > 2 * tol;
    const bool clear_below = k + 1 == got.size() || lp - want[k + 1][1].get<double>() > 2 * tol;
    if (clear_above && clear_below) {
      EXPECT_EQ(got[k].token_id, want[k][0].get<TokenId>()) << "rank " << k;
    }
  }
}

TEST_P(RandomModelTest, GreedyTokensAndLogprobsMatchTheTorchReference) {
  const Case& c = GetParam();
  const std::string dir = kModels + "/" + c.name;
  ASSERT_TRUE(std::filesystem::exists(dir + "/reference.json"))
      << dir << " is missing: the ctest fixture random_models writes it (run through ctest)";
  std::ifstream in(dir + "/reference.json");
  const nlohmann::json ref = nlohmann::json::parse(in);
  const double tol = ref.value("logprob_tolerance", 1e-3);
  const int32_t max_tokens = ref.at("max_tokens").get<int32_t>();

  OfflineEngine::Options o;
  o.model_dir = dir;
  o.block_size = c.block_size;
  o.max_num_batched_tokens = c.max_num_batched_tokens;
  o.kv_cache_bytes = int64_t{32} << 20;
  o.num_device_blocks = c.num_device_blocks;
  o.check_invariants = true;
  absl::StatusOr<std::unique_ptr<OfflineEngine>> engine = OfflineEngine::Create(o);
  ASSERT_TRUE(engine.ok()) << engine.status();

  if (c.max_model_len > 0) {
    const ModelConfig& mc = (*engine)->model_config();
    EXPECT_EQ(mc.MaxModelLen(), c.max_model_len);
    EXPECT_EQ((*engine)->scheduler().config().max_model_len, c.max_model_len);
    if (mc.rope_scaling.has_value() && mc.rope_scaling->type != RopeScalingType::kLlama3) {
      const int32_t unscaled = mc.rope_scaling->type == RopeScalingType::kYarn
                                   ? mc.rope_scaling->original_max_position_embeddings
                                   : mc.max_position_embeddings;
      size_t longest = 0;
      for (const auto& rc : ref.at("cases")) {
        longest = std::max(longest, rc.at("prompt_token_ids").size() + max_tokens);
      }
      EXPECT_GT(longest, static_cast<size_t>(unscaled));
      EXPECT_LE(longest, static_cast<size_t>(c.max_model_len));
    }
  }

  // Every case in one batch: prefills of different lengths and decodes mixed.
  std::vector<OfflineEngine::Request> requests;
  for (const auto& rc : ref.at("cases")) {
    OfflineEngine::Request r;
    r.prompt_token_ids = rc.at("prompt_token_ids").get<std::vector<TokenId>>();
    r.sampling.temperature = 0.0f;
    r.sampling.max_tokens = max_tokens;
    r.sampling.ignore_eos = true;
    r.sampling.logprobs = 5;
    // Every other case scores its prompt too (no prefix-cache reuse for it):
    // chunked prefills, windows and a tight pool must not change the scores.
    if (requests.size() % 2 == 0) r.sampling.prompt_logprobs = 5;
    requests.push_back(std::move(r));
  }
  ASSERT_GE(requests.size(), 3u);
  absl::StatusOr<std::vector<OfflineEngine::Result>> results = (*engine)->Generate(requests);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), requests.size());
  const int64_t released = (*engine)->scheduler().stats().num_window_released_blocks;
  if (c.releases_blocks) {
    EXPECT_GT(released, 0);
  } else {
    EXPECT_EQ(released, 0);
  }

  for (size_t i = 0; i < requests.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << c.name << " case " << i << " (prompt of "
                                      << requests[i].prompt_token_ids->size() << " tokens)");
    const nlohmann::json& rc = ref["cases"][i];
    const OfflineEngine::Result& r = (*results)[i];
    ASSERT_EQ(r.error, "");
    ASSERT_EQ(r.sequences.size(), 1u);
    const OfflineEngine::Sequence& seq = r.sequences[0];
    EXPECT_EQ(seq.token_ids, rc.at("output_token_ids").get<std::vector<TokenId>>());
    const std::vector<double> want = rc.at("logprobs").get<std::vector<double>>();
    ASSERT_EQ(seq.logprobs.size(), want.size());
    for (size_t t = 0; t < want.size(); ++t) {
      EXPECT_NEAR(seq.logprobs[t], want[t], tol) << "token " << t;
    }
    if (rc.contains("top_logprobs")) {
      const nlohmann::json& tops = rc["top_logprobs"];
      ASSERT_EQ(seq.top_logprobs.size(), tops.size());
      for (size_t t = 0; t < tops.size(); ++t) {
        SCOPED_TRACE(::testing::Message() << "output token " << t);
        ExpectTopLogprobs(seq.top_logprobs[t], tops[t], tol);
      }
    }
    // Prompt scoring against the reference's one forward pass over the prompt.
    if (!requests[i].sampling.prompt_logprobs.has_value()) {
      EXPECT_FALSE(r.prompt_logprobs.has_value());
      continue;
    }
    ASSERT_TRUE(r.prompt_logprobs.has_value());
    const std::vector<SampledToken>& got = *r.prompt_logprobs;
    const nlohmann::json& scored = rc.at("prompt_logprobs");
    ASSERT_EQ(got.size(), scored.size());
    ASSERT_EQ(got.size() + 1, requests[i].prompt_token_ids->size());
    for (size_t t = 0; t < scored.size(); ++t) {
      SCOPED_TRACE(::testing::Message() << "prompt token " << t + 1);
      EXPECT_EQ(got[t].token_id, scored[t].at("token_id").get<TokenId>());
      EXPECT_NEAR(got[t].logprob, scored[t].at("logprob").get<double>(), tol);
      ExpectTopLogprobs(got[t].top_logprobs, scored[t].at("top_logprobs"), tol);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, RandomModelTest,
                         ::testing::Values(Case{"llama_hd128"}, Case{"hd256"}, Case{"qwen2"},
                                           Case{"llama3"}, Case{"mistral", 8, 16},
                                           Case{"mistral_window", 8, 16, 8, true},
                                           Case{"qwen2_window"},
                                           Case{.name = "yarn",
                                                .block_size = 8,
                                                .max_num_batched_tokens = 32,
                                                .max_model_len = 128},
                                           Case{.name = "yarn_v5_mscale", .max_model_len = 128},
                                           Case{.name = "linear_v5", .max_model_len = 128},
                                           Case{.name = "mistral_v5", .max_model_len = 2048}),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
}  // namespace folio
