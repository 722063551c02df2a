#include "scheduler/kvsim/multiturn.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <random>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "scheduler/scheduler.h"
#include "scheduler/simulated_worker.h"

namespace folio::kvsim {
namespace {

constexpr double kLengthSigma = 0.8;
constexpr int32_t kVocab = 32000;

struct Turn {
  std::vector<TokenId> user;  // the new message
  int32_t reply_len = 0;
};

struct Conversation {
  std::vector<Turn> turns;
  size_t next_turn = 0;
  std::vector<TokenId> history;  // what the next turn re-sends before its message
  std::vector<TokenId> reply;    // the turn in flight's reply so far
};

std::vector<TokenId> RandomTokens(std::mt19937_64& rng, int32_t n) {
  std::vector<TokenId> out(n);
  for (TokenId& t : out) t = static_cast<TokenId>(rng() % kVocab);
  return out;
}

Conversation MakeConversation(const MultiTurnWorkload& w, std::mt19937_64& rng,
                              const std::vector<TokenId>& system_prompt) {
  Conversation c;
  c.history = system_prompt;
  // 1 + geometric: P(another turn) = 1 - 1 / mean_turns.
  std::geometric_distribution<int32_t> extra(1.0 / std::max(1.0, w.mean_turns));
  const int32_t turns = std::min(w.max_turns, 1 + extra(rng));
  for (int32_t t = 0; t < turns; ++t) {
    Turn turn;
    turn.user = RandomTokens(rng, DrawLogNormal(rng, w.mean_user_len, kLengthSigma));
    turn.reply_len = DrawLogNormal(rng, w.mean_reply_len, kLengthSigma);
    c.turns.push_back(std::move(turn));
  }
  return c;
}

}  // namespace

absl::StatusOr<MultiTurnResult> SimulateMultiTurn(const MultiTurnWorkload& workload,
                                                  const SimulationOptions& options,
                                                  int64_t host_token_slots, bool host_tier,
                                                  int32_t host_tier_blocks_per_step) {
  if (workload.conversations <= 0 || workload.concurrency <= 0) {
    return absl::InvalidArgumentError("--conversations and --concurrency must be positive");
  }
  if (workload.system_prompt_len + 2 > options.max_model_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the system prompt (", workload.system_prompt_len, " tokens) leaves no room in "
        "--max-model-len ", options.max_model_len));
  }
  SchedulerConfig config;
  config.block_size = options.block_size;
  config.num_device_blocks = static_cast<int32_t>(options.token_slots / options.block_size);
  config.num_host_blocks = static_cast<int32_t>(host_token_slots / options.block_size);
  config.max_model_len = options.max_model_len;
  config.max_num_seqs = options.max_num_seqs;
  config.max_num_batched_tokens = options.max_num_batched_tokens;
  config.enable_prefix_caching = true;
  config.host_prefix_cache = host_tier;
  config.host_tier_blocks_per_step = host_tier_blocks_per_step;
  config.check_invariants = false;  // the worker's KV check covers the mapping
  absl::StatusOr<std::unique_ptr<Scheduler>> created = Scheduler::Create(config);
  if (!created.ok()) return created.status();
  Scheduler& scheduler = **created;

  SimulatedWorker worker(WorkerOptionsFor(config, options));

  std::mt19937_64 rng(options.seed ^ 0x6d75'6c74'6954ULL);
  const std::vector<TokenId> system_prompt = RandomTokens(rng, workload.system_prompt_len);
  std::deque<Conversation> not_started;
  for (int32_t i = 0; i < workload.conversations; ++i) {
    not_started.push_back(MakeConversation(workload, rng, system_prompt));
  }

  MultiTurnResult result;
  absl::flat_hash_map<RequestId, Conversation> in_flight;
  RequestId next_id = 0;
  // Sends the conversation's next turn; false when it has none left (or the
  // next would not fit), so it is over.
  auto send_turn = [&](Conversation c) -> absl::StatusOr<bool> {
    if (c.next_turn == c.turns.size()) return false;
    const Turn& turn = c.turns[c.next_turn++];
    c.history.insert(c.history.end(), turn.user.begin(), turn.user.end());
    const int32_t reply_len =
        std::min<int32_t>(turn.reply_len, options.max_model_len - static_cast<int32_t>(c.history.size()));
    if (reply_len < 1) return false;
    RequestSpec spec;
    spec.id = next_id++;
    spec.prompt = c.history;
    spec.sampling.max_tokens = reply_len;
    spec.sampling.ignore_eos = true;
    spec.expected_output_len = reply_len;
    result.prompt_tokens += static_cast<int64_t>(spec.prompt.size());
    ++result.requests;
    const RequestId id = spec.id;
    if (absl::Status s = scheduler.AddRequest(std::move(spec)); !s.ok()) return s;
    in_flight.emplace(id, std::move(c));
    return true;
  };
  // Keeps `concurrency` conversations going while any are left.
  auto fill = [&]() -> absl::Status {
    while (static_cast<int32_t>(in_flight.size()) < workload.concurrency && !not_started.empty()) {
      Conversation c = std::move(not_started.front());
      not_started.pop_front();
      absl::StatusOr<bool> sent = send_turn(std::move(c));
      if (!sent.ok()) return sent.status();
    }
    return absl::OkStatus();
  };
  if (absl::Status s = fill(); !s.ok()) return s;

  int64_t scheduled_tokens = 0;
  while (scheduler.HasUnfinishedRequests()) {
    StepPlan plan = scheduler.Schedule();
    scheduled_tokens += plan.num_scheduled_tokens;
    absl::StatusOr<StepResult> executed = worker.Execute(plan);
    if (!executed.ok()) return executed.status();
    absl::StatusOr<std::vector<RequestOutput>> outputs = scheduler.Update(*executed);
    if (!outputs.ok()) return outputs.status();
    for (RequestOutput& out : *outputs) {
      auto it = in_flight.find(out.request_id);
      if (it == in_flight.end()) continue;
      Conversation& c = it->second;
      if (!out.sequences.empty()) {
        const auto& ids = out.sequences[0].token_ids;
        c.reply.insert(c.reply.end(), ids.begin(), ids.end());
      }
      if (!out.finished) continue;
      result.hit_tokens += out.num_cached_prompt_tokens;
      Conversation done = std::move(c);
      in_flight.erase(it);
      if (!out.error.empty()) {
        ++result.failed_requests;  // the conversation ends with its turn
        continue;
      }
      done.history.insert(done.history.end(), done.reply.begin(), done.reply.end());
      done.reply.clear();
      absl::StatusOr<bool> sent = send_turn(std::move(done));
      if (!sent.ok()) return sent.status();
    }
    if (absl::Status s = fill(); !s.ok()) return s;
    if (++result.steps > 50'000'000) return absl::InternalError("simulation does not terminate");
  }
  const KvCacheManager::PrefixCacheStats& prefix = scheduler.kv_cache().prefix_cache_stats();
  result.host_hit_tokens = prefix.host_hits;
  result.blocks_to_host = prefix.blocks_to_host;
  result.blocks_from_host = prefix.blocks_from_host;
  result.blocks_over_budget = prefix.blocks_over_budget;
  const SchedulerStats& stats = scheduler.stats();
  result.preemptions = stats.num_preemptions_recompute + stats.num_preemptions_swap;
  // Every generated token but each request's last is computed once as a
  // decode input; the rest of the computed tokens are prompt (and recomputed) ones.
  result.computed_prompt_tokens =
      scheduled_tokens - (stats.num_generation_tokens - result.requests);
  if (absl::Status s = scheduler.CheckInvariants(); !s.ok()) return s;
  if (scheduler.kv_cache().num_free_device_blocks() != config.num_device_blocks ||
      scheduler.kv_cache().host_pool().num_free_blocks() != config.num_host_blocks) {
    return absl::InternalError("KV blocks are still held after the workload");
  }
  return result;
}

}  // namespace folio::kvsim
