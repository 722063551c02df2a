// Tensor parallelism with in-process ranks (LocalCommunicator, one thread per
// rank): TP = 2 and 4 give the logits of TP = 1 (<= 1e-4 relative) and the
// same greedy tokens through a real Scheduler. Models are random-weight ones
// written at test time: one with fewer KV heads than ranks (replicated KV
// heads) and a vocabulary not divisible by the world size, tied embeddings;
// one with KV heads divided among ranks and a separate LM head.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

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

// Runs fn(rank) on one thread per rank and joins them.
template <typename F>
void OnRanks(int world, F&& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) threads.emplace_back([&fn, r] { fn(r); });
  for (auto& t : threads) t.join();
}

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
std::vector<std::vector<float>> RunnerLogits(const std::string& dir, int world) {
  constexpr int32_t kBlock = 16;
  std::vector<std::vector<float>> per_rank_step0(world), per_rank_step1(world);
  auto comms = LocalCommunicator::CreateGroup(world);
  std::vector<absl::Status> errors(world);
  OnRanks(world, [&](int rank) {
    auto fail = [&](absl::Status s) { errors[rank] = s; };
    absl::StatusOr<std::unique_ptr<ModelWeights>> w = ModelWeights::Load(dir, ShardSpec{rank, world});
    if (!w.ok()) return fail(w.status());
    const ModelConfig& c = (*w)->config;
    CacheEngine::Options co;
    co.num_layers = c.num_layers;
    co.num_kv_heads = (*w)->shape.num_kv_heads;
    co.head_dim = c.head_dim;
    co.block_size = kBlock;
    co.num_device_blocks = 8;
    absl::StatusOr<std::unique_ptr<CacheEngine>> cache = CacheEngine::Create(co);
    if (!cache.ok()) return fail(cache.status());
    ModelRunner runner(**w, **cache, world > 1 ? comms[rank].get() : nullptr);
    const std::vector<std::vector<int32_t>> tables = {{0}, {1, 2}};
    std::vector<std::vector<TokenId>> tokens(2);
    for (int t = 0; t < 7; ++t) tokens[0].push_back((t * 37 + 5) % c.vocab_size);
    for (int t = 0; t < 20; ++t) tokens[1].push_back((t * 101 + 998) % c.vocab_size);
    for (int step = 0; step < 2; ++step) {
      ForwardBatch b;
      b.max_blocks_per_seq = 2;
      b.query_start.push_back(0);
      for (int s = 0; s < 2; ++s) {
        const int32_t len = static_cast<int32_t>(tokens[s].size());
        const int32_t begin = step == 0 ? 0 : len - 1;
        for (int32_t p = begin; p < len; ++p) {
          b.logits_rows.push_back(b.num_tokens());
          b.token_ids.push_back(tokens[s][p]);
          b.positions.push_back(p);
          b.slot_mapping.push_back(int64_t{tables[s][p / kBlock]} * kBlock + p % kBlock);
        }
        b.query_start.push_back(b.num_tokens());
        b.context_lens.push_back(len);
        for (int32_t k = 0; k < 2; ++k) {
          b.block_tables.push_back(k < static_cast<int32_t>(tables[s].size()) ? tables[s][k] : 0);
        }
      }
      std::vector<float> logits;
      if (absl::Status s = runner.Forward(b, logits); !s.ok()) return fail(s);
      if (rank != 0 && !logits.empty()) return fail(absl::InternalError("logits on rank != 0"));
      (step == 0 ? per_rank_step0 : per_rank_step1)[rank] = logits;
      tokens[0].push_back(3);
      tokens[1].push_back(998);
    }
  });
  for (int r = 0; r < world; ++r) EXPECT_TRUE(errors[r].ok()) << "rank " << r << ": " << errors[r];
  return {per_rank_step0[0], per_rank_step1[0]};
}

TEST_P(TensorParallelTest, LogitsMatchOneRank) {
  const auto ref = RunnerLogits(dir_, 1);
  ASSERT_FALSE(ref[0].empty());
  for (int world : {2, 4}) {
    SCOPED_TRACE(::testing::Message() << "TP=" << world);
    const auto got = RunnerLogits(dir_, world);
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

// Greedy generation of mixed prompts through a real Scheduler; returns the
// tokens and checks every block went back to the pool.
std::vector<std::vector<TokenId>> Generate(const std::string& dir, int world) {
  constexpr int32_t kBlocks = 64;
  auto comms = LocalCommunicator::CreateGroup(world);
  std::vector<std::unique_ptr<CpuWorker>> workers(world);
  for (int r = 0; r < world; ++r) {
    CpuWorker::Options o;
    o.model_dir = dir;
    o.shard = ShardSpec{r, world};
    o.block_size = 8;
    o.num_device_blocks = kBlocks;
    o.num_host_blocks = 16;
    o.communicator = world > 1 ? comms[r].get() : nullptr;
    absl::StatusOr<std::unique_ptr<CpuWorker>> w = CpuWorker::Create(o);
    EXPECT_TRUE(w.ok()) << w.status();
    if (!w.ok()) return {};
    workers[r] = std::move(*w);
  }
  SchedulerConfig sc;
  sc.block_size = 8;
  sc.num_device_blocks = kBlocks;
  sc.num_host_blocks = 16;
  sc.max_num_batched_tokens = 48;  // chunked prefills mixed with decodes
  sc.max_model_len = 128;
  absl::StatusOr<std::unique_ptr<Scheduler>> scheduler = Scheduler::Create(sc);
  EXPECT_TRUE(scheduler.ok()) << scheduler.status();
  if (!scheduler.ok()) return {};
  const int32_t vocab = workers[0]->config().vocab_size;
  auto tokens = testing::RunGreedy(**scheduler, testing::MixedPrompts(vocab, 10, 7),
                                   [&](const StepPlan& plan) -> absl::StatusOr<StepResult> {
    std::vector<absl::StatusOr<StepResult>> results(world, absl::UnknownError("not run"));
    OnRanks(world, [&](int r) { results[r] = workers[r]->Execute(plan); });
    for (int r = 1; r < world; ++r) {
      if (!results[r].ok()) return results[r].status();
      if (!results[r]->samples.empty()) return absl::InternalError("samples from rank != 0");
    }
    return results[0];
  });
  EXPECT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ((*scheduler)->kv_cache().num_free_device_blocks(), kBlocks);
  return tokens.ok() ? *tokens : std::vector<std::vector<TokenId>>{};
}

TEST_P(TensorParallelTest, GreedyTokensMatchOneRank) {
  const auto ref = Generate(dir_, 1);
  ASSERT_EQ(ref.size(), 10u);
  for (int world : {2, 4}) {
    SCOPED_TRACE(::testing::Message() << "TP=" << world);
    EXPECT_EQ(Generate(dir_, world), ref);
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
