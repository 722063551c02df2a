#include "scheduler/simulated_worker.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace folio {
namespace {

uint64_t Mix(uint64_t x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

double Unit(uint64_t x) { return static_cast<double>(Mix(x) >> 11) * 0x1.0p-53; }

}  // namespace

SimulatedWorker::SimulatedWorker(const Options& options)
    : options_(options),
      device_(options.verify_kv ? static_cast<size_t>(options.num_device_blocks) * options.block_size : 0),
      host_(options.verify_kv ? static_cast<size_t>(options.num_host_blocks) * options.block_size : 0),
      mirror_(options.block_size, options.num_device_blocks) {}

const std::vector<BlockId>* SimulatedWorker::MirrorBlockTable(SequenceId id) const {
  const MirroredSequence* m = mirror_.Find(id);
  return m == nullptr ? nullptr : &m->blocks;
}

absl::Status SimulatedWorker::ApplyCopies(const std::vector<BlockCopy>& ops,
                                          std::vector<Slot>& from, std::vector<Slot>& to,
                                          int32_t from_blocks, int32_t to_blocks, const char* what) {
  for (const BlockCopy& op : ops) {
    if (op.src < 0 || op.src >= from_blocks || op.dst < 0 || op.dst >= to_blocks) {
      return absl::InternalError(absl::StrCat(what, " op ", op.src, "->", op.dst, " out of range"));
    }
    if (!options_.verify_kv) continue;
    const int32_t bs = options_.block_size;
    std::copy_n(from.begin() + static_cast<size_t>(op.src) * bs, bs,
                to.begin() + static_cast<size_t>(op.dst) * bs);
  }
  return absl::OkStatus();
}

absl::StatusOr<StepResult> SimulatedWorker::Execute(const StepPlan& plan) {
  const int32_t nd = options_.num_device_blocks;
  const int32_t nh = options_.num_host_blocks;
  if (absl::Status s = ApplyCopies(plan.swap_out, device_, host_, nd, nh, "swap-out"); !s.ok()) return s;
  if (absl::Status s = ApplyCopies(plan.swap_in, host_, device_, nh, nd, "swap-in"); !s.ok()) return s;
  if (absl::Status s = ApplyCopies(plan.copies, device_, device_, nd, nd, "copy"); !s.ok()) return s;

  if (absl::Status s = mirror_.ApplyMetadata(plan); !s.ok()) return s;

  StepResult result;
  result.step_id = plan.step_id;
  for (const ScheduledSequence& work : plan.scheduled) {
    absl::StatusOr<MirroredSequence*> m = mirror_.ApplyScheduled(work);
    if (!m.ok()) return m.status();
    if (absl::Status s = Compute(work, **m); !s.ok()) return s;
    // Distinct beam candidates: more than the vocabulary would never end.
    if (work.sample_mode == SampleMode::kBeamCandidates && work.num_samples > options_.vocab_size) {
      return absl::InternalError(absl::StrCat("sequence ", work.seq_id, ": ", work.num_samples,
                                              " beam candidates from a vocabulary of ",
                                              options_.vocab_size));
    }
    if (work.sample_mode != SampleMode::kNone) {
      result.samples.push_back({work.seq_id, Sample(work, **m)});
    }
    if (work.prompt_logprobs) {
      if (!(*m)->sampling.prompt_logprobs.has_value()) {
        return absl::InternalError(absl::StrCat("sequence ", work.seq_id,
                                                ": prompt_logprobs scheduled but not asked for"));
      }
      result.prompt_logprobs.push_back(ScorePrompt(work, **m));
    }
  }
  return result;
}

absl::Status SimulatedWorker::Compute(const ScheduledSequence& work, const MirroredSequence& m) {
  const int32_t bs = options_.block_size;
  const int32_t start = work.start_position;
  const int32_t end = start + static_cast<int32_t>(work.token_ids.size());
  if (!options_.verify_kv) return absl::OkStatus();
  // Reshape-and-cache, then "attention" over every position the queries
  // [start, end) see: all before them, or their sliding windows.
  for (int32_t p = start; p < end; ++p) {
    device_[static_cast<size_t>(m.blocks[p / bs]) * bs + p % bs] = {m.tokens[p], p};
  }
  const int32_t first_seen =
      options_.sliding_window > 0 ? std::max(0, start - options_.sliding_window + 1) : 0;
  for (int32_t p = first_seen; p < end; ++p) {
    const Slot& slot = device_[static_cast<size_t>(m.blocks[p / bs]) * bs + p % bs];
    if (slot.token != m.tokens[p] || slot.position != p) {
      return absl::InternalError(absl::StrCat(
          "sequence ", work.seq_id, ": KV at position ", p, " (block ", m.blocks[p / bs],
          ") holds token ", slot.token, "@", slot.position, ", expected ", m.tokens[p]));
    }
  }
  return absl::OkStatus();
}

uint64_t SimulatedWorker::ContentHash(const MirroredSequence& m) const {
  uint64_t h = Mix(options_.seed ^ (m.sampling.seed.has_value() ? Mix(*m.sampling.seed + 1) : 0));
  for (TokenId t : m.tokens) h = Mix(h ^ static_cast<uint64_t>(t));
  return h;
}

std::vector<SampledToken> SimulatedWorker::Sample(const ScheduledSequence& work,
                                                  const MirroredSequence& m) const {
  const uint64_t h = ContentHash(m);
  std::vector<SampledToken> out;
  auto token_at = [&](uint64_t key) {
    return static_cast<TokenId>(Mix(key) % static_cast<uint64_t>(options_.vocab_size));
  };
  if (work.sample_mode == SampleMode::kBeamCandidates) {
    // Distinct tokens with falling log-probs.
    double lp = -Unit(h) * options_.beam_logprob_spread;
    for (uint64_t j = 0; static_cast<int32_t>(out.size()) < work.num_samples; ++j) {
      const TokenId t = token_at(h + 7919 * (j + 1));
      if (std::any_of(out.begin(), out.end(), [&](const SampledToken& s) { return s.token_id == t; })) {
        continue;
      }
      out.push_back({t, static_cast<float>(lp), {}});
      lp -= Unit(h ^ (j + 1)) * options_.beam_logprob_spread;
    }
    return out;
  }
  for (int32_t i = 0; i < work.num_samples; ++i) {
    const uint64_t key = Mix(h + static_cast<uint64_t>(i) * 104729);
    TokenId t = token_at(key);
    if (options_.eos_token_id >= 0 && Unit(key ^ 0x5bd1e995) < options_.eos_probability) {
      t = options_.eos_token_id;
    }
    out.push_back({t, static_cast<float>(-5.0 * Unit(key ^ 0x27d4eb2f)), {}});
  }
  return out;
}

PromptLogprobs SimulatedWorker::ScorePrompt(const ScheduledSequence& work,
                                            const MirroredSequence& m) const {
  PromptLogprobs out;
  out.seq_id = work.seq_id;
  out.first_index = work.start_position + 1;
  const int32_t end = std::min(work.start_position + static_cast<int32_t>(work.token_ids.size()),
                               m.num_prompt_tokens - 1);
  uint64_t h = Mix(options_.seed ^ 0x7f4a7c15ULL);
  for (int32_t p = 0; p < end; ++p) {
    h = Mix(h ^ static_cast<uint64_t>(m.tokens[p]));
    if (p < work.start_position) continue;
    SampledToken t;
    t.token_id = m.tokens[p + 1];
    t.logprob = static_cast<float>(-8.0 * Unit(h ^ static_cast<uint64_t>(t.token_id)));
    for (int32_t k = 0; k < *m.sampling.prompt_logprobs; ++k) {
      const uint64_t key = h + 31 * static_cast<uint64_t>(k + 1);
      t.top_logprobs.push_back({static_cast<TokenId>(Mix(key) % options_.vocab_size),
                                static_cast<float>(-0.5 * k - Unit(key))});
    }
    out.tokens.push_back(std::move(t));
  }
  return out;
}

}  // namespace folio
