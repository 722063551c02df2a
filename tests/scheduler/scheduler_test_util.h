#ifndef FOLIO_TESTS_SCHEDULER_SCHEDULER_TEST_UTIL_H_
#define FOLIO_TESTS_SCHEDULER_SCHEDULER_TEST_UTIL_H_

// Shared helpers of the scheduler tests: configs, prompts, a step loop that
// drives the real Scheduler with a SimulatedWorker (which verifies the KV
// mapping of every scheduled sequence), an output collector, and the drain
// check every workload test ends with.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/step_plan.h"
#include "gtest/gtest.h"
#include "scheduler/scheduler.h"
#include "scheduler/simulated_worker.h"

#define FOLIO_ASSERT_OK(expr)                                   \
  do {                                                          \
    const absl::Status folio_status_ = (expr);                  \
    ASSERT_TRUE(folio_status_.ok()) << folio_status_.ToString(); \
  } while (0)
#define FOLIO_EXPECT_OK(expr)                                   \
  do {                                                          \
    const absl::Status folio_status_ = (expr);                  \
    EXPECT_TRUE(folio_status_.ok()) << folio_status_.ToString(); \
  } while (0)

namespace folio::test {

// A small config with invariant checks on (every test sets them) and no
// watermark unless a test asks for one.
inline SchedulerConfig TestConfig(int32_t num_device_blocks, int32_t block_size = 8) {
  SchedulerConfig c;
  c.block_size = block_size;
  c.num_device_blocks = num_device_blocks;
  c.num_host_blocks = 0;
  c.max_num_batched_tokens = 512;
  c.max_num_seqs = 64;
  c.max_model_len = 1024;
  c.watermark = 0.0;
  c.check_invariants = true;
  return c;
}

inline std::unique_ptr<Scheduler> MakeScheduler(const SchedulerConfig& config) {
  absl::StatusOr<std::unique_ptr<Scheduler>> s = Scheduler::Create(config);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

inline SimulatedWorker::Options WorkerOptions(const SchedulerConfig& config) {
  SimulatedWorker::Options o;
  o.block_size = config.block_size;
  o.num_device_blocks = config.num_device_blocks;
  o.num_host_blocks = config.num_host_blocks;
  o.verify_kv = true;
  o.sliding_window = config.sliding_window;
  o.seed = 7;
  return o;
}

// Distinct prompts per `base` (so unrelated requests never share a cached
// prefix), the same prompt for the same base.
inline std::vector<TokenId> MakePrompt(int32_t len, int32_t base = 1) {
  std::vector<TokenId> p(len);
  for (int32_t i = 0; i < len; ++i) p[i] = (base * 997 + i * 13 + 1) % 31000;
  return p;
}

inline RequestSpec MakeRequest(RequestId id, int32_t prompt_len, int32_t max_tokens,
                               int32_t base = -1) {
  RequestSpec spec;
  spec.id = id;
  spec.prompt = MakePrompt(prompt_len, base < 0 ? static_cast<int32_t>(id) + 1 : base);
  spec.sampling.max_tokens = max_tokens;
  spec.sampling.ignore_eos = true;
  return spec;
}

// One output sequence as the front end would assemble it from deltas.
struct CollectedSequence {
  std::vector<TokenId> token_ids;
  std::vector<float> logprobs;
  FinishReason finish_reason = FinishReason::kNone;
  double cumulative_logprob = 0.0;
};

struct CollectedRequest {
  std::map<int32_t, CollectedSequence> sequences;  // by SequenceOutput::index
  bool finished = false;
  std::string error;
  int32_t num_outputs = 0;  // RequestOutput messages received
  int32_t num_prompt_tokens = 0;
  int32_t num_cached_prompt_tokens = 0;
  int32_t num_output_tokens = 0;

  const std::vector<TokenId>& tokens(int32_t index = 0) const {
    static const std::vector<TokenId> kEmpty;
    auto it = sequences.find(index);
    return it == sequences.end() ? kEmpty : it->second.token_ids;
  }
  FinishReason reason(int32_t index = 0) const {
    auto it = sequences.find(index);
    return it == sequences.end() ? FinishReason::kNone : it->second.finish_reason;
  }
};

// Assembles streamed deltas per request and checks what every output must
// satisfy: nothing after the final output, one entry per index per message,
// a log-prob per token, and usage equal to what was delivered.
class OutputCollector {
 public:
  absl::Status Add(const std::vector<RequestOutput>& outputs) {
    for (const RequestOutput& out : outputs) {
      CollectedRequest& r = requests_[out.request_id];
      if (r.finished) {
        return absl::InternalError(absl::StrCat("request ", out.request_id,
                                                " got an output after its final one"));
      }
      ++r.num_outputs;
      absl::flat_hash_set<int32_t> seen;
      for (const SequenceOutput& s : out.sequences) {
        if (!seen.insert(s.index).second) {
          return absl::InternalError(absl::StrCat("request ", out.request_id,
                                                  ": index ", s.index, " twice in one output"));
        }
        if (s.logprobs.size() != s.token_ids.size()) {
          return absl::InternalError(absl::StrCat("request ", out.request_id,
                                                  ": logprobs do not match tokens"));
        }
        CollectedSequence& c = r.sequences[s.index];
        if (c.finish_reason != FinishReason::kNone) {
          return absl::InternalError(absl::StrCat("request ", out.request_id, ": sequence ",
                                                  s.index, " continued after finishing"));
        }
        c.token_ids.insert(c.token_ids.end(), s.token_ids.begin(), s.token_ids.end());
        c.logprobs.insert(c.logprobs.end(), s.logprobs.begin(), s.logprobs.end());
        c.finish_reason = s.finish_reason;
        c.cumulative_logprob = s.cumulative_logprob;
      }
      r.finished = out.finished;
      r.error = out.error;
      r.num_prompt_tokens = out.num_prompt_tokens;
      r.num_cached_prompt_tokens = out.num_cached_prompt_tokens;
      r.num_output_tokens = out.num_output_tokens;
      int32_t delivered = 0;
      for (const auto& [index, c] : r.sequences) delivered += static_cast<int32_t>(c.token_ids.size());
      if (delivered != out.num_output_tokens) {
        return absl::InternalError(absl::StrCat("request ", out.request_id, " reports ",
                                                out.num_output_tokens, " output tokens but ",
                                                delivered, " were delivered"));
      }
      if (out.finished) {
        for (const auto& [index, c] : r.sequences) {
          if (c.finish_reason == FinishReason::kNone) {
            return absl::InternalError(absl::StrCat("request ", out.request_id,
                                                    " finished with sequence ", index,
                                                    " unfinished"));
          }
        }
      }
    }
    return absl::OkStatus();
  }

  bool contains(RequestId id) const { return requests_.contains(id); }
  const CollectedRequest& at(RequestId id) const {
    auto it = requests_.find(id);
    EXPECT_TRUE(it != requests_.end()) << "no output for request " << id;
    static const CollectedRequest kNone;
    return it == requests_.end() ? kNone : it->second;
  }
  const std::map<RequestId, CollectedRequest>& all() const { return requests_; }

 private:
  std::map<RequestId, CollectedRequest> requests_;  // stable references
};

// Checks every plan must satisfy whatever the workload.
inline absl::Status CheckPlan(const StepPlan& plan, const Scheduler& s) {
  const SchedulerConfig& c = s.config();
  int32_t tokens = 0;
  absl::flat_hash_set<SequenceId> seqs;
  for (const ScheduledSequence& w : plan.scheduled) {
    tokens += static_cast<int32_t>(w.token_ids.size());
    if (w.token_ids.empty()) return absl::InternalError("scheduled a sequence with no tokens");
    if (!seqs.insert(w.seq_id).second) {
      return absl::InternalError(absl::StrCat("sequence ", w.seq_id, " scheduled twice"));
    }
  }
  if (tokens != plan.num_scheduled_tokens) {
    return absl::InternalError(absl::StrCat("num_scheduled_tokens ", plan.num_scheduled_tokens,
                                            " but ", tokens, " tokens scheduled"));
  }
  if (tokens > c.max_num_batched_tokens) {
    return absl::InternalError(absl::StrCat("step ", plan.step_id, " schedules ", tokens,
                                            " tokens, budget ", c.max_num_batched_tokens));
  }
  if (static_cast<int32_t>(seqs.size()) > c.max_num_seqs ||
      s.num_running_sequences() > c.max_num_seqs) {
    return absl::InternalError(absl::StrCat("step ", plan.step_id, " runs more than max_num_seqs ",
                                            c.max_num_seqs, " sequences"));
  }
  return absl::OkStatus();
}

using StepObserver = std::function<void(const StepPlan&, const Scheduler&)>;

// One iteration: Schedule, worker, Update. After the worker ran, every
// scheduled sequence's mirrored block table must equal the scheduler's.
inline absl::Status Step(Scheduler& s, SimulatedWorker& w, OutputCollector& out,
                         StepPlan* plan_out = nullptr, StepResult* result_out = nullptr) {
  StepPlan plan = s.Schedule();
  if (absl::Status st = CheckPlan(plan, s); !st.ok()) return st;
  absl::StatusOr<StepResult> result = w.Execute(plan);
  if (!result.ok()) return result.status();
  absl::flat_hash_map<SequenceId, const Sequence*> live;
  for (const Request* r : s.RunningRequests()) {
    for (const auto& seq : r->seqs) live[seq->id()] = seq.get();
  }
  for (const ScheduledSequence& work : plan.scheduled) {
    auto it = live.find(work.seq_id);
    if (it == live.end()) {
      return absl::InternalError(absl::StrCat("scheduled sequence ", work.seq_id, " not running"));
    }
    const std::vector<BlockId>* mirror = w.MirrorBlockTable(work.seq_id);
    if (mirror == nullptr || *mirror != it->second->block_table().blocks()) {
      return absl::InternalError(absl::StrCat("sequence ", work.seq_id,
                                              ": worker block table differs from the scheduler's"));
    }
  }
  absl::StatusOr<std::vector<RequestOutput>> outputs = s.Update(*result);
  if (!outputs.ok()) return outputs.status();
  if (plan_out != nullptr) *plan_out = std::move(plan);
  if (result_out != nullptr) *result_out = std::move(*result);
  return out.Add(*outputs);
}

// Steps until nothing is left, at most `max_steps` times (a hang is an
// error, never a stuck test). `observe` sees every plan.
inline absl::Status RunUntilDrained(Scheduler& s, SimulatedWorker& w, OutputCollector& out,
                                    int32_t max_steps, const StepObserver& observe = nullptr) {
  for (int32_t step = 0; s.HasUnfinishedRequests(); ++step) {
    if (step >= max_steps) {
      return absl::DeadlineExceededError(absl::StrCat(
          "not drained after ", max_steps, " steps: ", s.num_waiting(), " waiting, ",
          s.num_running(), " running, ", s.num_swapped(), " swapped"));
    }
    StepPlan plan;
    if (absl::Status st = Step(s, w, out, &plan); !st.ok()) return st;
    if (observe) observe(plan, s);
  }
  return absl::OkStatus();
}

inline absl::StatusOr<OutputCollector> RunToCompletion(Scheduler& s, SimulatedWorker& w,
                                                       int32_t max_steps,
                                                       const StepObserver& observe = nullptr) {
  OutputCollector out;
  if (absl::Status st = RunUntilDrained(s, w, out, max_steps, observe); !st.ok()) return st;
  return out;
}

// After a workload: no request left, invariants hold, every block free (or
// cached-free) with reference count zero, in both pools.
inline void ExpectDrained(const Scheduler& s) {
  EXPECT_FALSE(s.HasUnfinishedRequests());
  EXPECT_EQ(s.num_waiting(), 0);
  EXPECT_EQ(s.num_running(), 0);
  EXPECT_EQ(s.num_swapped(), 0);
  EXPECT_EQ(s.num_running_sequences(), 0);
  EXPECT_EQ(s.num_device_tokens(), 0);
  const absl::Status inv = s.CheckInvariants();
  EXPECT_TRUE(inv.ok()) << inv.ToString();
  const BlockPool& device = s.kv_cache().device_pool();
  EXPECT_EQ(device.num_free_blocks(), device.num_blocks());
  EXPECT_EQ(device.num_used_blocks(), 0);
  for (BlockId b = 0; b < device.num_blocks(); ++b) {
    EXPECT_EQ(device.ref_count(b), 0) << "device block " << b;
  }
  const BlockPool& host = s.kv_cache().host_pool();
  EXPECT_EQ(host.num_free_blocks(), host.num_blocks());
  for (BlockId b = 0; b < host.num_blocks(); ++b) {
    EXPECT_EQ(host.ref_count(b), 0) << "host block " << b;
  }
}

}  // namespace folio::test

#endif  // FOLIO_TESTS_SCHEDULER_SCHEDULER_TEST_UTIL_H_
