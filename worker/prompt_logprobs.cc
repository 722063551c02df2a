#include "worker/prompt_logprobs.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/sampling.h"

namespace folio {

SampledToken ScorePromptRow(std::span<const float> logits, TokenId target, int32_t num_top,
                            PromptRowScratch* scratch) {
  scratch->logprobs.resize(logits.size());
  kernels::cpu::LogSoftmax(logits, scratch->logprobs);
  SampledToken out;
  out.token_id = target;
  out.logprob = scratch->logprobs[static_cast<size_t>(target)];
  if (num_top > 0) {
    kernels::cpu::TopTokens(scratch->logprobs, num_top, &scratch->order, &scratch->top);
    out.top_logprobs.reserve(scratch->top.size());
    for (const kernels::cpu::ScoredToken& t : scratch->top) {
      out.top_logprobs.push_back({t.token, t.logprob});
    }
  }
  return out;
}

absl::Status ScoreRowsOnHost(std::span<const float> logits, int32_t vocab,
                             std::span<const TokenId> targets, int32_t num_top,
                             PromptRowScratch* scratch, std::vector<SampledToken>* scored) {
  if (logits.size() != targets.size() * static_cast<size_t>(vocab)) {
    return absl::InternalError(absl::StrCat("prompt scoring got ", logits.size(),
                                            " logits for ", targets.size(), " rows of ", vocab));
  }
  for (size_t i = 0; i < targets.size(); ++i) {
    scored->push_back(ScorePromptRow(logits.subspan(i * size_t(vocab), size_t(vocab)),
                                     targets[i], num_top, scratch));
  }
  return absl::OkStatus();
}

absl::Status ScorePrompts(const StepPlan& plan, const ForwardBatch& batch,
                          std::span<const MirroredSequence* const> seqs, int32_t vocab_size,
                          int32_t max_rows, bool score, const RowLogitsFn& logits_of,
                          const ScoreRowsFn& score_rows, std::vector<PromptLogprobs>* out) {
  std::vector<int32_t> rows;
  std::vector<TokenId> targets;
  // Rank 0's first scoring error: kept, not returned, until every collective
  // call is made.
  absl::Status failed;
  for (size_t s = 0; s < plan.scheduled.size(); ++s) {
    const ScheduledSequence& work = plan.scheduled[s];
    if (!work.prompt_logprobs) continue;
    const MirroredSequence& m = *seqs[s];
    if (!m.sampling.prompt_logprobs.has_value() && failed.ok()) {
      failed = absl::InvalidArgumentError(absl::StrCat(
          "sequence ", work.seq_id, ": prompt_logprobs scheduled, but its sampling parameters "
          "ask for none"));
    }
    const int32_t num_top = m.sampling.prompt_logprobs.value_or(0);
    // Position p scores prompt token p + 1: positions [start, end).
    const int32_t start = work.start_position;
    const int32_t end = std::min(start + static_cast<int32_t>(work.token_ids.size()),
                                 m.num_prompt_tokens - 1);
    PromptLogprobs scored;
    scored.seq_id = work.seq_id;
    scored.first_index = start + 1;
    for (int32_t p = start; p < end; p += max_rows) {
      const int32_t count = std::min(max_rows, end - p);
      rows.resize(static_cast<size_t>(count));
      targets.resize(static_cast<size_t>(count));
      for (int32_t i = 0; i < count; ++i) {
        rows[i] = batch.query_start[s] + (p - start) + i;
        const TokenId target = m.tokens[static_cast<size_t>(p + i + 1)];
        targets[i] = target;
        if (score && (target < 0 || target >= vocab_size) && failed.ok()) {
          failed = absl::InvalidArgumentError(
              absl::StrCat("sequence ", work.seq_id, ": prompt token ", p + i + 1, " is ",
                           target, ", outside the vocabulary"));
        }
      }
      if (absl::Status st = logits_of(rows); !st.ok()) return st;
      if (!score || !failed.ok()) continue;
      // Rank 0's own part: a failure waits for the other collective calls.
      if (absl::Status st = score_rows(targets, num_top, &scored.tokens); !st.ok()) failed = st;
    }
    if (score) out->push_back(std::move(scored));
  }
  return failed;
}

}  // namespace folio
