#ifndef FOLIO_TESTS_WORKER_WORKER_TEST_UTIL_H_
#define FOLIO_TESTS_WORKER_WORKER_TEST_UTIL_H_

// Helpers for the tensor-parallel and worker-service tests: random-weight
// models written at test time, and a loop driving a real Scheduler against
// any executor of plans.

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/step_plan.h"
#include "scheduler/scheduler.h"

namespace folio::testing {

// Writes (once; shared by the test processes) a random-weight model with
// `args` for tools/make_random_model.py under the system temp dir; returns
// its path, or an empty string when the tool failed. Written beside, then
// renamed into place, so concurrent test processes never see half a model.
inline std::string MakeRandomModel(const std::string& name, const std::string& args) {
  const std::string dir = absl::StrCat(std::filesystem::temp_directory_path().string(),
                                       "/folio_worker_test_", name, "_",
                                       std::hash<std::string>()(args) % 1000000);
  if (std::filesystem::exists(dir + "/config.json")) return dir;
  const std::string tmp = absl::StrCat(dir, ".tmp", ::getpid());
  const std::string cmd = absl::StrCat("/usr/bin/python3 ", FOLIO_SOURCE_DIR,
                                       "/tools/make_random_model.py --out ", tmp, " ", args,
                                       " > ", tmp, ".log 2>&1");
  if (std::system(cmd.c_str()) != 0) return "";
  std::error_code ec;
  std::filesystem::rename(tmp, dir, ec);
  if (ec) std::filesystem::remove_all(tmp, ec);  // another process won the race
  std::filesystem::remove(tmp + ".log", ec);
  return std::filesystem::exists(dir + "/config.json") ? dir : "";
}

struct Prompt {
  std::vector<TokenId> tokens;
  int32_t max_tokens = 8;
};

// Runs `prompts` (greedy, ignore_eos) through `scheduler`, executing every
// plan with `execute`; returns each request's output tokens, in request
// order, or the first error.
inline absl::StatusOr<std::vector<std::vector<TokenId>>> RunGreedy(
    Scheduler& scheduler, const std::vector<Prompt>& prompts,
    const std::function<absl::StatusOr<StepResult>(const StepPlan&)>& execute,
    int max_steps = 10000) {
  for (size_t i = 0; i < prompts.size(); ++i) {
    RequestSpec spec;
    spec.id = static_cast<RequestId>(i);
    spec.prompt = prompts[i].tokens;
    spec.sampling.temperature = 0.0f;
    spec.sampling.max_tokens = prompts[i].max_tokens;
    spec.sampling.ignore_eos = true;
    if (absl::Status s = scheduler.AddRequest(spec); !s.ok()) return s;
  }
  std::vector<std::vector<TokenId>> out(prompts.size());
  int steps = 0;
  while (scheduler.HasUnfinishedRequests()) {
    if (++steps > max_steps) return absl::InternalError("too many steps");
    const StepPlan plan = scheduler.Schedule();
    absl::StatusOr<StepResult> result = execute(plan);
    if (!result.ok()) return result.status();
    absl::StatusOr<std::vector<RequestOutput>> outputs = scheduler.Update(*result);
    if (!outputs.ok()) return outputs.status();
    for (const RequestOutput& o : *outputs) {
      if (!o.error.empty()) return absl::InternalError(o.error);
      for (const SequenceOutput& s : o.sequences) {
        auto& v = out[static_cast<size_t>(o.request_id)];
        v.insert(v.end(), s.token_ids.begin(), s.token_ids.end());
      }
    }
  }
  return out;
}

// Prompts of mixed lengths (chunked prefill with a small token budget).
inline std::vector<Prompt> MixedPrompts(int32_t vocab, int count, uint32_t seed) {
  std::vector<Prompt> prompts;
  uint32_t x = seed;
  for (int i = 0; i < count; ++i) {
    Prompt p;
    const int len = 3 + (i * 13) % 40;
    for (int t = 0; t < len; ++t) {
      x = x * 1664525u + 1013904223u;
      p.tokens.push_back(static_cast<TokenId>((x >> 8) % static_cast<uint32_t>(vocab - 2)));
    }
    p.max_tokens = 4 + i % 9;
    prompts.push_back(std::move(p));
  }
  return prompts;
}

// One plan computing `prompt` whole as a new sequence 1 (blocks 0, 1, ... in
// order), greedy: it samples the first token and scores the prompt with
// `top` alternatives a token (prompt_logprobs).
inline StepPlan WholePromptScoringPlan(const std::vector<TokenId>& prompt, int32_t num_blocks,
                                       int32_t top) {
  StepPlan plan;
  NewSequenceData& n = plan.new_sequences.emplace_back();
  n.seq_id = 1;
  n.request_id = 1;
  n.prompt_token_ids = prompt;
  for (int32_t b = 0; b < num_blocks; ++b) n.block_ids.push_back(b);
  n.sampling.temperature = 0.0f;
  n.sampling.prompt_logprobs = top;
  ScheduledSequence& work = plan.scheduled.emplace_back();
  work.seq_id = 1;
  work.token_ids.assign(prompt.begin(), prompt.end());
  work.sample_mode = SampleMode::kSample;
  work.num_samples = 1;
  work.prompt_logprobs = true;
  plan.num_scheduled_tokens = static_cast<int32_t>(prompt.size());
  return plan;
}

}  // namespace folio::testing

#endif  // FOLIO_TESTS_WORKER_WORKER_TEST_UTIL_H_
