// Tensor parallelism with in-process ranks (LocalCommunicator, one thread per
// rank): TP = 2 and 4 give the logits of TP = 1 (<= 1e-4 relative) and the
// same greedy tokens through a real Scheduler, with an fp32 KV cache and with
// int8 / fp8 ones (each rank quantizes its own heads). Models are random-weight ones
// written at test time: one with fewer KV heads than ranks (replicated KV
// heads) and a vocabulary not divisible by the world size, tied embeddings;
// one with KV heads divided among ranks and a separate LM head.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "tests/worker/runner_workload.h"
#include "tests/worker/worker_test_util.h"
#include "worker/cache_engine.h"
#include "worker/cpu_worker.h"
#include "worker/local_communicator.h"
#include "worker/model_runner.h"
#include "worker/model_weights.h"

namespace folio {
namespace {

struct ModelCase {
  const char* name;
  const char* args;
};

const ModelCase kModels[] = {
    // 4 heads, 1 KV head: replicated on every rank; vocab 1001 = 2*500+1 = 4*250+1.
    {"kv1_tied", "--hidden-size 64 --layers 2 --heads 4 --kv-heads 1 --head-dim 16 "
                 "--intermediate-size 128 --vocab-size 1001 --tie --dtype f32 --seed 11"},
    // 8 heads, 4 KV heads: split; vocab 1003; untied LM head.
    {"kv4_untied", "--hidden-size 64 --layers 2 --heads 8 --kv-heads 4 --head-dim 8 "
                   "--intermediate-size 96 --vocab-size 1003 --dtype f32 --seed 12"},
};

using testing::OnRanks;

class TensorParallelTest : public ::testing::TestWithParam<ModelCase> {
 protected:
  void SetUp() override {
    dir_ = testing::MakeRandomModel(GetParam().name, GetParam().args);
    ASSERT_FALSE(dir_.empty()) << "tools/make_random_model.py failed for " << GetParam().name;
  }
  std::string dir_;
};

// Two prefills (7 and 20 tokens), then one decode each, logits of every row;
// returns the rows' logits per step on rank 0.
std::vector<std::vector<float>> RunnerLogits(
    const std::string& dir, int world, kernels::CacheDtype kv_dtype = kernels::CacheDtype::kFloat32) {
  std::vector<std::vector<float>> per_rank_step0(world), per_rank_step1(world);
  auto comms = LocalCommunicator::CreateGroup(world);
  std::vector<absl::Status> errors(world);
  OnRanks(world, [&](int rank) {
    errors[rank] = testing::RunTwoStepWorkload(dir, rank, world,
                                               world > 1 ? comms[rank].get() : nullptr,
                                               &per_rank_step0[rank], &per_rank_step1[rank],
                                               kv_dtype);
  });
  for (int r = 0; r < world; ++r) EXPECT_TRUE(errors[r].ok()) << "rank " << r << ": " << errors[r];
  return {per_rank_step0[0], per_rank_step1[0]};
}

void ExpectLogitsMatchOneRank(const std::string& dir, kernels::CacheDtype kv_dtype) {
  const auto ref = RunnerLogits(dir, 1, kv_dtype);
  ASSERT_FALSE(ref[0].empty());
  for (int world : {2, 4}) {
    SCOPED_TRACE(::testing::Message() << "TP=" << world);
    const auto got = RunnerLogits(dir, world, kv_dtype);
    for (size_t step = 0; step < ref.size(); ++step) {
      ASSERT_EQ(got[step].size(), ref[step].size());
      float scale = 0.0f, worst = 0.0f;
      for (float v : ref[step]) scale = std::max(scale, std::fabs(v));
      for (size_t i = 0; i < ref[step].size(); ++i) {
        worst = std::max(worst, std::fabs(got[step][i] - ref[step][i]));
      }
      EXPECT_LE(worst, 1e-4f * scale) << "step " << step << ": max |diff| " << worst
                                      << " against max |logit| " << scale;
    }
  }
}

TEST_P(TensorParallelTest, LogitsMatchOneRank) {
  ExpectLogitsMatchOneRank(dir_, kernels::CacheDtype::kFloat32);
}

// Each rank quantizes its own KV heads, per head, as one rank does: a
// quantized cache gives the same logits whatever the split.
TEST_P(TensorParallelTest, QuantizedCacheLogitsMatchOneRank) {
  for (kernels::CacheDtype dtype : {kernels::CacheDtype::kInt8, kernels::CacheDtype::kFp8E4m3}) {
    SCOPED_TRACE(dtype == kernels::CacheDtype::kInt8 ? "int8" : "fp8");
    ExpectLogitsMatchOneRank(dir_, dtype);
  }
}

// Greedy generation of mixed prompts through a real Scheduler (LocalCommunicator
// ranks); empty on failure, which the test reports.
std::vector<std::vector<TokenId>> Generate(
    const std::string& dir, int world, kernels::CacheDtype kv_dtype = kernels::CacheDtype::kFloat32) {
  auto comms = LocalCommunicator::CreateGroup(world);
  std::vector<Communicator*> ranks(world, nullptr);
  for (int r = 0; world > 1 && r < world; ++r) ranks[r] = comms[r].get();
  auto tokens = testing::GenerateOnRanks(dir, ranks, kv_dtype);
  EXPECT_TRUE(tokens.ok()) << tokens.status();
  return tokens.ok() ? *std::move(tokens) : std::vector<std::vector<TokenId>>{};
}

TEST_P(TensorParallelTest, GreedyTokensMatchOneRank) {
  const auto ref = Generate(dir_, 1);
  ASSERT_EQ(ref.size(), 10u);
  for (int world : {2, 4}) {
    SCOPED_TRACE(::testing::Message() << "TP=" << world);
    EXPECT_EQ(Generate(dir_, world), ref);
  }
}

TEST_P(TensorParallelTest, QuantizedCacheGreedyTokensMatchOneRank) {
  const auto ref = Generate(dir_, 1, kernels::CacheDtype::kInt8);
  ASSERT_EQ(ref.size(), 10u);
  for (int world : {2, 4}) {
    SCOPED_TRACE(::testing::Message() << "TP=" << world);
    EXPECT_EQ(Generate(dir_, world, kernels::CacheDtype::kInt8), ref);
  }
}

// Prompt scoring through CpuWorkers on `world` ranks: one plan computing a
// 150-token prompt in one chunk (its 149 scored rows take three LM-head
// calls of at most 64 rows, each gathered across the ranks). Returns rank
// 0's entries, and through *row_logits (when not null, world 1 only) the
// logits of every row of the same forward pass, from the runner directly.
std::vector<PromptLogprobs> ScorePromptOnRanks(const std::string& dir, int world,
                                               std::vector<float>* row_logits) {
  constexpr int32_t kLen = 150, kBlock = 8, kBlocks = (kLen + kBlock - 1) / kBlock;
  auto comms = LocalCommunicator::CreateGroup(world);
  std::vector<std::unique_ptr<CpuWorker>> workers(world);
  for (int r = 0; r < world; ++r) {
    CpuWorker::Options o;
    o.model_dir = dir;
    o.shard = ShardSpec{r, world};
    o.block_size = kBlock;
    o.num_device_blocks = kBlocks;
    o.communicator = world > 1 ? comms[r].get() : nullptr;
    absl::StatusOr<std::unique_ptr<CpuWorker>> w = CpuWorker::Create(o);
    EXPECT_TRUE(w.ok()) << w.status();
    if (!w.ok()) return {};
    workers[r] = std::move(*w);
  }
  const int32_t vocab = workers[0]->config().vocab_size;
  std::vector<TokenId> prompt;
  for (int32_t t = 0; t < kLen; ++t) prompt.push_back((t * 53 + 7) % vocab);
  const StepPlan plan = testing::WholePromptScoringPlan(prompt, kBlocks, /*top=*/3);
  const NewSequenceData& n = plan.new_sequences[0];
  std::vector<absl::StatusOr<StepResult>> results(world, absl::UnknownError("not run"));
  OnRanks(world, [&](int r) { results[r] = workers[r]->Execute(plan); });
  for (int r = 0; r < world; ++r) {
    EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].status();
    if (!results[r].ok()) return {};
    if (r > 0) {
      EXPECT_TRUE(results[r]->prompt_logprobs.empty()) << "rank " << r;
    }
  }
  if (row_logits != nullptr) {
    // The same prompt through a bare runner, every row's logits at once.
    absl::StatusOr<std::unique_ptr<ModelWeights>> w = ModelWeights::Load(dir, ShardSpec{0, 1});
    EXPECT_TRUE(w.ok());
    CacheEngine::Options co;
    co.num_layers = (*w)->config.num_layers;
    co.num_kv_heads = (*w)->shape.num_kv_heads;
    co.head_dim = (*w)->config.head_dim;
    co.block_size = kBlock;
    co.num_device_blocks = kBlocks;
    absl::StatusOr<std::unique_ptr<CacheEngine>> cache = CacheEngine::Create(co);
    EXPECT_TRUE(cache.ok());
    const PackedWeights packed =
        PackedWeights::PackAndRelease(**w, kernels::cpu::WeightType::kFloat32);
    ModelRunner runner(**w, packed, **cache, nullptr);
    ForwardBatch b;
    b.max_blocks_per_seq = kBlocks;
    b.query_start = {0, kLen};
    b.context_lens = {kLen};
    b.block_tables = n.block_ids;
    for (int32_t p = 0; p < kLen; ++p) {
      b.token_ids.push_back(n.prompt_token_ids[p]);
      b.positions.push_back(p);
      b.slot_mapping.push_back(p);  // blocks 0.. in order: slot = position
      b.logits_rows.push_back(p);
    }
    EXPECT_TRUE(runner.Forward(b, *row_logits).ok());
  }
  return std::move(results[0]->prompt_logprobs);
}

TEST_P(TensorParallelTest, PromptScoresMatchTheRunnersLogitsOnEveryRankCount) {
  std::vector<float> logits;
  const std::vector<PromptLogprobs> ref = ScorePromptOnRanks(dir_, 1, &logits);
  ASSERT_EQ(ref.size(), 1u);
  const std::vector<SampledToken>& scored = ref[0].tokens;
  EXPECT_EQ(ref[0].first_index, 1);
  ASSERT_EQ(scored.size(), 149u);
  const size_t vocab = logits.size() / 150;
  std::vector<float> row(vocab);
  for (size_t p = 0; p < scored.size(); ++p) {
    SCOPED_TRACE(::testing::Message() << "prompt token " << p + 1);
    // log_softmax of row p, in double, is the reference.
    const float* x = &logits[p * vocab];
    const double m = *std::max_element(x, x + vocab);
    double sum = 0.0;
    for (size_t v = 0; v < vocab; ++v) sum += std::exp(double(x[v]) - m);
    auto logprob = [&](TokenId t) { return double(x[t]) - m - std::log(sum); };
    EXPECT_NEAR(scored[p].logprob, logprob(scored[p].token_id), 1e-5);
    ASSERT_EQ(scored[p].top_logprobs.size(), 3u);
    EXPECT_EQ(scored[p].top_logprobs[0].token_id, std::max_element(x, x + vocab) - x);
    for (const TokenLogprob& t : scored[p].top_logprobs) {
      EXPECT_NEAR(t.logprob, logprob(t.token_id), 1e-5);
    }
  }
  for (int world : {2, 4}) {
    SCOPED_TRACE(::testing::Message() << "TP=" << world);
    const std::vector<PromptLogprobs> got = ScorePromptOnRanks(dir_, world, nullptr);
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(got[0].tokens.size(), scored.size());
    for (size_t p = 0; p < scored.size(); ++p) {
      EXPECT_EQ(got[0].tokens[p].token_id, scored[p].token_id);
      EXPECT_NEAR(got[0].tokens[p].logprob, scored[p].logprob, 1e-4) << "prompt token " << p + 1;
    }
  }
}

TEST_P(TensorParallelTest, ShardShapesCoverTheVocabulary) {
  absl::StatusOr<ModelConfig> c = ModelConfig::LoadFromDirectory(dir_);
  ASSERT_TRUE(c.ok());
  for (int world : {2, 4}) {
    int32_t next = 0;
    for (int r = 0; r < world; ++r) {
      absl::StatusOr<ShardShape> s = ShardShape::Make(*c, ShardSpec{r, world});
      ASSERT_TRUE(s.ok()) << s.status();
      EXPECT_EQ(s->vocab_begin, next);
      EXPECT_GE(s->vocab_padded, s->vocab_count);
      EXPECT_LE(s->vocab_padded - s->vocab_count, 1);
      next += s->vocab_count;
      EXPECT_GE(s->num_kv_heads, 1);
    }
    EXPECT_EQ(next, c->vocab_size);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, TensorParallelTest, ::testing::ValuesIn(kModels),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(LocalCommunicatorTest, AllReduceGatherAndBrokenGroup) {
  for (int world : {1, 2, 4}) {
    auto comms = LocalCommunicator::CreateGroup(world);
    std::vector<std::vector<float>> data(world), gathered(world);
    OnRanks(world, [&](int r) {
      data[r] = {float(r), float(2 * r), 1.0f};
      EXPECT_TRUE(comms[r]->AllReduceSum(data[r].data(), 3).ok());
      std::vector<float> send = {float(10 * r), float(10 * r + 1)};
      gathered[r].assign(2 * world, -1.0f);
      EXPECT_TRUE(comms[r]->GatherToRank0(send.data(), 2, gathered[r].data()).ok());
      EXPECT_TRUE(comms[r]->Barrier().ok());
    });
    const float sum = world * (world - 1) / 2.0f;
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(data[r], (std::vector<float>{sum, 2 * sum, float(world)}));
    }
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(gathered[0][2 * r], 10.0f * r);
      EXPECT_EQ(gathered[0][2 * r + 1], 10.0f * r + 1);
    }
    EXPECT_GE(comms[0]->busy_seconds(), 0.0);
  }
  // A rank that never arrives: the others time out, then the group is broken.
  auto comms = LocalCommunicator::CreateGroup(2, absl::Milliseconds(50));
  float x = 1.0f;
  EXPECT_EQ(comms[0]->AllReduceSum(&x, 1).code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(comms[1]->AllReduceSum(&x, 1).code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace folio
