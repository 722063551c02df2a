// The workloads the tensor-parallel tests share, ranks on threads: a
// ModelRunner one (two prefills of 7 and 20 tokens, then one decode each, the
// logits of every row) and a served one (greedy generation through a real
// Scheduler and CpuWorkers). Header-only, for tests/worker.
#ifndef FOLIO_TESTS_WORKER_RUNNER_WORKLOAD_H_
#define FOLIO_TESTS_WORKER_RUNNER_WORKLOAD_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "scheduler/scheduler.h"
#include "tests/worker/worker_test_util.h"
#include "worker/cache_engine.h"
#include "worker/communicator.h"
#include "worker/cpu_worker.h"
#include "worker/model_runner.h"
#include "worker/model_weights.h"

namespace folio::testing {

// Runs fn(rank) on one thread per rank and joins them.
template <typename F>
void OnRanks(int world, F&& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) threads.emplace_back([&fn, r] { fn(r); });
  for (auto& t : threads) t.join();
}

// Rank `rank` of `world` (comm null for one rank) runs the workload on the
// model in `dir`; *step0 and *step1 get its logits per step (empty on ranks
// other than 0, which the runner must leave empty).
inline absl::Status RunTwoStepWorkload(
    const std::string& dir, int rank, int world, Communicator* comm, std::vector<float>* step0,
    std::vector<float>* step1, kernels::CacheDtype kv_dtype = kernels::CacheDtype::kFloat32) {
  constexpr int32_t kBlock = 16;
  absl::StatusOr<std::unique_ptr<ModelWeights>> w = ModelWeights::Load(dir, ShardSpec{rank, world});
  if (!w.ok()) return w.status();
  const ModelConfig& c = (*w)->config;
  CacheEngine::Options co;
  co.num_layers = c.num_layers;
  co.num_kv_heads = (*w)->shape.num_kv_heads;
  co.head_dim = c.head_dim;
  co.block_size = kBlock;
  co.num_device_blocks = 8;
  co.dtype = kv_dtype;
  absl::StatusOr<std::unique_ptr<CacheEngine>> cache = CacheEngine::Create(co);
  if (!cache.ok()) return cache.status();
  const PackedWeights packed = PackedWeights::PackAndRelease(**w, kernels::cpu::WeightType::kFloat32);
  ModelRunner runner(**w, packed, **cache, comm);
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
    if (absl::Status s = runner.Forward(b, logits); !s.ok()) return s;
    if (rank != 0 && !logits.empty()) return absl::InternalError("logits on rank != 0");
    *(step == 0 ? step0 : step1) = std::move(logits);
    tokens[0].push_back(3);
    tokens[1].push_back(998);
  }
  return absl::OkStatus();
}

// Greedy generation of MixedPrompts(vocab, 10, 7) through a real Scheduler
// (chunked prefills mixed with decodes) and one CpuWorker per entry of
// `comms`: rank r joins the group through comms[r] (null for a rank alone).
// Returns each request's tokens; fails if a rank other than 0 returns samples
// or a KV block is not back in the pool at the end.
inline absl::StatusOr<std::vector<std::vector<TokenId>>> GenerateOnRanks(
    const std::string& dir, const std::vector<Communicator*>& comms,
    kernels::CacheDtype kv_dtype = kernels::CacheDtype::kFloat32) {
  constexpr int32_t kBlocks = 64;
  const int world = static_cast<int>(comms.size());
  std::vector<std::unique_ptr<CpuWorker>> workers(world);
  for (int r = 0; r < world; ++r) {
    CpuWorker::Options o;
    o.model_dir = dir;
    o.shard = ShardSpec{r, world};
    o.block_size = 8;
    o.num_device_blocks = kBlocks;
    o.num_host_blocks = 16;
    o.kv_cache_dtype = kv_dtype;
    o.communicator = comms[r];
    absl::StatusOr<std::unique_ptr<CpuWorker>> w = CpuWorker::Create(o);
    if (!w.ok()) return w.status();
    workers[r] = std::move(*w);
  }
  SchedulerConfig sc;
  sc.block_size = 8;
  sc.num_device_blocks = kBlocks;
  sc.num_host_blocks = 16;
  sc.max_num_batched_tokens = 48;  // chunked prefills mixed with decodes
  sc.max_model_len = 128;
  absl::StatusOr<std::unique_ptr<Scheduler>> scheduler = Scheduler::Create(sc);
  if (!scheduler.ok()) return scheduler.status();
  const int32_t vocab = workers[0]->config().vocab_size;
  auto tokens = RunGreedy(**scheduler, MixedPrompts(vocab, 10, 7),
                          [&](const StepPlan& plan) -> absl::StatusOr<StepResult> {
    std::vector<absl::StatusOr<StepResult>> results(world, absl::UnknownError("not run"));
    OnRanks(world, [&](int r) { results[r] = workers[r]->Execute(plan); });
    for (int r = 1; r < world; ++r) {
      if (!results[r].ok()) return results[r].status();
      if (!results[r]->samples.empty()) return absl::InternalError("samples from rank != 0");
    }
    return results[0];
  });
  if (!tokens.ok()) return tokens.status();
  const int32_t free_blocks = (*scheduler)->kv_cache().num_free_device_blocks();
  if (free_blocks != kBlocks) {
    return absl::InternalError(
        absl::StrCat(free_blocks, " of ", kBlocks, " KV blocks free after the workload"));
  }
  return tokens;
}

}  // namespace folio::testing

#endif  // FOLIO_TESTS_WORKER_RUNNER_WORKLOAD_H_
