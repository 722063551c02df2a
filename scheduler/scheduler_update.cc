// Scheduler::Update and request completion: what happens after a step.

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "scheduler/assign_few.h"
#include "scheduler/beam_search.h"
#include "scheduler/prefetch.h"
#include "scheduler/reservation_space.h"
#include "scheduler/scheduler.h"

namespace folio {
namespace {

// Outputs are copied from empty prototypes: value-initializing one (what
// emplace_back() does) zeroes every byte of its inline storage first, with a
// `rep stos` that cost ~25 ns per output here; a copy of an empty one
// writes only its headers.
const RequestOutput& EmptyRequestOutput() {
  static const RequestOutput empty{};
  return empty;
}
const SequenceOutput& EmptySequenceOutput() {
  static const SequenceOutput empty{};
  return empty;
}

}  // namespace

absl::StatusOr<std::vector<RequestOutput>> Scheduler::Update(const StepResult& result) {
  FOLIO_CHECK(awaiting_update_);
  awaiting_update_ = false;
  // Before the samples: the step that samples a prompt's first token may
  // also score its last positions, and that step's output carries the scores.
  if (num_scoring_ > 0 || !result.prompt_logprobs.empty()) {
    if (absl::Status s = ApplyPromptLogprobs(result); !s.ok()) return s;
  }
  // Resolve every sampled sequence's samples before changing anything. Rank 0
  // answers in plan order, so the lookup is a cursor; a map only if not.
  sampled_.clear();
  size_t cursor = 0;
  absl::flat_hash_map<SequenceId, const SequenceSamples*> by_seq;
  for (const Scheduled& s : scheduled_) {
    if (s.mode == SampleMode::kNone) continue;
    const SequenceSamples* samples = nullptr;
    if (cursor < result.samples.size() && result.samples[cursor].seq_id == s.seq_id) {
      samples = &result.samples[cursor++];
    } else {
      if (by_seq.empty()) {
        for (const SequenceSamples& r : result.samples) by_seq[r.seq_id] = &r;
      }
      auto it = by_seq.find(s.seq_id);
      if (it != by_seq.end()) samples = it->second;
    }
    if (samples == nullptr) {
      return absl::InternalError(absl::StrCat("step ", result.step_id, ": no samples for sequence ",
                                              s.seq_id));
    }
    const size_t expected = s.mode == SampleMode::kSample ? s.num_samples : 1;
    if (samples->tokens.size() < expected ||
        samples->tokens.size() > static_cast<size_t>(s.num_samples)) {
      return absl::InternalError(absl::StrCat("step ", result.step_id, ": sequence ", s.seq_id,
                                              " got ", samples->tokens.size(), " samples, asked ",
                                              s.num_samples));
    }
    sampled_.push_back({s.request, s.seq, samples});
  }

  std::vector<RequestOutput> outputs = std::move(pending_outputs_);
  pending_outputs_.clear();
  outputs.reserve(outputs.size() + sampled_.size());
  // Requests and sequences are scattered on the heap: fetch a few ahead, in
  // two stages (the tails' addresses are read from the sequence), with the
  // samples and the output slot about to be built.
  auto prefetch = [&](size_t i) {
    if (i + 4 < sampled_.size()) {
      const SampledSequence& far = sampled_[i + 4];
      PrefetchLine(far.request);
      PrefetchLine(&far.request->spec.id);
      PrefetchLine(&far.request->spec.sampling.beam_width);
      PrefetchLine(far.seq);
      PrefetchLine(reinterpret_cast<const char*>(far.seq) + 64);
    }
    if (i + 2 < sampled_.size()) {
      const Sequence& near = *sampled_[i + 2].seq;
      PrefetchLine(near.tokens().data() + near.num_tokens());
      PrefetchLine(near.output_logprobs().data() + near.output_logprobs().size());
      PrefetchLine(sampled_[i + 2].samples->tokens.data());
    }
    if (outputs.size() + 2 < outputs.capacity()) {
      const char* slot = reinterpret_cast<const char*>(outputs.data() + outputs.size() + 2);
      for (size_t b = 0; b < sizeof(RequestOutput); b += 64) PrefetchLine(slot + b);
    }
  };
  // A request's sequences are contiguous in the plan: handle each run.
  for (size_t begin = 0; begin < sampled_.size();) {
    prefetch(begin);
    Request* r = sampled_[begin].request;
    size_t end = begin + 1;
    while (end < sampled_.size() && sampled_[end].request == r) ++end;
    const std::span<const SampledSequence> group(sampled_.data() + begin, end - begin);
    begin = end;
    // Built in place: moving outputs with inline storage copies them.
    RequestOutput& out = outputs.emplace_back(EmptyRequestOutput());
    if (r->spec.sampling.UsesBeamSearch()) {
      ApplyBeamStep(*r, group);
    } else {
      ApplySamples(*r, group, out);
    }
    if (r->seqs.empty()) {
      FinishRequest(*r, FinishReason::kNone, "", out);
    } else if (!out.sequences.empty()) {
      if (num_prompt_logprob_requests_ > 0) AttachPromptLogprobs(*r, out);
      FillUsage(*r, out);
    } else {
      outputs.pop_back();
    }
  }
  scheduled_.clear();
  sampled_.clear();
  MaybeCheckInvariants();
  return outputs;
}

std::unique_ptr<Sequence> Scheduler::ForkSequence(Request& r, const Sequence& parent) {
  const int32_t index = r.num_live_sequences() + static_cast<int32_t>(r.finished_seqs.size());
  auto child = parent.Fork(next_seq_id_++, index);
  kv_.Fork(parent, *child);
  sequences_[child->id()] = child.get();
  return child;
}

void Scheduler::ApplySamples(Request& r, std::span<const SampledSequence> s,
                             RequestOutput& out) {
  const bool stream = StreamsDeltas(r);
  // Top log-probs travel only in streamed deltas: each delta's last token
  // is the one sampled now (see SequenceOutput::top_logprobs).
  const bool want_top = stream && r.spec.sampling.logprobs > 0;
  std::vector<std::pair<const Sequence*, const SampledToken*>> top;
  for (const auto& [request, seq, samples] : s) {
    const std::vector<SampledToken>& tokens = samples->tokens;
    if (!r.fanned_out && tokens.size() > 1) {
      // The prompt's first token, sampled best_of times: fork the others
      // before the parent appends, so all share the prompt's blocks.
      for (size_t i = 1; i < tokens.size(); ++i) {
        std::unique_ptr<Sequence> child = ForkSequence(r, *seq);
        child->AppendToken(tokens[i].token_id, tokens[i].logprob);
        if (want_top) top.push_back({child.get(), &tokens[i]});
        r.seqs.push_back(std::move(child));
      }
    }
    seq->AppendToken(tokens[0].token_id, tokens[0].logprob);
    if (want_top) top.push_back({seq, &tokens[0]});
  }
  r.fanned_out = true;
  stats_.num_generation_tokens += static_cast<int64_t>(r.seqs.size());
  // Stop checks, then deltas for streamed requests (retired sequences stay
  // alive in finished_seqs, so the pointers hold).
  SequencePtrs touched = r.LiveSequences();
  for (size_t i = 0; i < r.seqs.size();) {
    const FinishReason reason = StopReason(r, *r.seqs[i]);
    if (reason != FinishReason::kNone) {
      RetireSequence(r, i, reason);
    } else {
      ++i;
    }
  }
  if (stream) AppendDeltas(touched, out);
  if (want_top) {
    for (size_t i = 0; i < touched.size() && i < out.sequences.size(); ++i) {
      SequenceOutput& delta = out.sequences[i];
      if (delta.token_ids.empty()) continue;
      delta.top_logprobs.resize(delta.token_ids.size());
      for (const auto& [seq, sampled] : top) {
        if (seq == touched[i]) delta.top_logprobs.back() = sampled->top_logprobs;
      }
    }
  }
}

void Scheduler::ApplyBeamStep(Request& r, std::span<const SampledSequence> s) {
  const SamplingParams& sp = r.spec.sampling;
  FOLIO_CHECK_EQ(s.size(), r.seqs.size());  // every beam is scheduled together
  std::vector<double> cumulative;
  std::vector<std::vector<SampledToken>> candidates;
  for (const auto& [request, seq, samples] : s) {
    cumulative.push_back(seq->cumulative_logprob());
    candidates.push_back(samples->tokens);
  }
  // Beams grow together: before min_tokens no token ends one (the workers
  // ban them; a banned candidate could only come back from a tiny vocabulary).
  std::vector<TokenId> end_tokens;
  if (s.front().seq->num_output_tokens() + 1 >= sp.min_tokens) {
    if (!sp.ignore_eos) end_tokens = r.spec.eos_token_ids;
    end_tokens.insert(end_tokens.end(), sp.stop_token_ids.begin(), sp.stop_token_ids.end());
  }
  const BeamSelection sel = SelectBeams(cumulative, candidates, sp.beam_width, end_tokens);
  r.fanned_out = true;

  auto snapshot = [&](const Sequence& parent, const BeamExtension* ext, FinishReason reason) {
    FinishedBeam beam;
    beam.output_tokens.assign(parent.output_tokens().begin(), parent.output_tokens().end());
    beam.output_logprobs = parent.output_logprobs();
    beam.cumulative_logprob = parent.cumulative_logprob();
    if (ext != nullptr) {
      beam.output_tokens.push_back(ext->token);
      beam.output_logprobs.push_back(ext->logprob);
      beam.cumulative_logprob = ext->cumulative_logprob;
    }
    beam.score = BeamScore(beam.cumulative_logprob, static_cast<int32_t>(beam.output_tokens.size()),
                           sp.length_penalty);
    beam.reason = reason;
    r.finished_beams.push_back(std::move(beam));
  };
  for (const BeamExtension& ext : sel.finished) {
    const Sequence& parent = *s[ext.parent].seq;
    const bool is_eos = std::find(r.spec.eos_token_ids.begin(), r.spec.eos_token_ids.end(),
                                  ext.token) != r.spec.eos_token_ids.end();
    snapshot(parent, &ext, is_eos && !sp.ignore_eos ? FinishReason::kEos : FinishReason::kStop);
  }

  // Continue the chosen beams: a parent's first child forks off it before it
  // appends; the last child is the parent itself. Unchosen parents die.
  std::vector<std::vector<const BeamExtension*>> children(s.size());
  for (const BeamExtension& ext : sel.continuing) children[ext.parent].push_back(&ext);
  decltype(r.seqs) next;
  for (size_t b = 0; b < s.size(); ++b) {
    Sequence* parent = s[b].seq;
    auto owned = std::find_if(r.seqs.begin(), r.seqs.end(),
                              [&](const auto& p) { return p.get() == parent; });
    FOLIO_CHECK(owned != r.seqs.end());
    if (children[b].empty()) {
      DropSequence(*parent);
      continue;
    }
    for (size_t c = 0; c + 1 < children[b].size(); ++c) {
      std::unique_ptr<Sequence> child = ForkSequence(r, *parent);
      child->AppendToken(children[b][c]->token, children[b][c]->logprob);
      next.push_back(std::move(child));
    }
    parent->AppendToken(children[b].back()->token, children[b].back()->logprob);
    next.push_back(std::move(*owned));
  }
  r.seqs = std::move(next);
  stats_.num_generation_tokens += static_cast<int64_t>(r.seqs.size());

  // Beams that reached a length limit are finished hypotheses too.
  for (size_t i = 0; i < r.seqs.size();) {
    const FinishReason reason = StopReason(r, *r.seqs[i]);
    if (reason == FinishReason::kNone) {
      ++i;
      continue;
    }
    snapshot(*r.seqs[i], nullptr, reason);
    DropSequence(*r.seqs[i]);
    r.seqs.erase(r.seqs.begin() + i);
  }
  // Stop when no live beam can still enter the top beam_width.
  std::vector<double> scores;
  for (const FinishedBeam& b : r.finished_beams) scores.push_back(b.score);
  std::sort(scores.rbegin(), scores.rend());
  double best_live = -1e300;
  for (const auto& seq : r.seqs) {
    best_live = std::max(best_live, BeamScore(seq->cumulative_logprob(), seq->num_output_tokens(),
                                              sp.length_penalty));
  }
  if (!r.seqs.empty() && BeamSearchDone(scores, sp.beam_width, best_live)) {
    for (auto& seq : r.seqs) DropSequence(*seq);
    r.seqs.clear();
  }
}

FinishReason Scheduler::StopReason(const Request& r, const Sequence& seq) const {
  const SamplingParams& sp = r.spec.sampling;
  const TokenId last = seq.tokens().back();
  auto holds = [last](const std::vector<TokenId>& ids) {
    return std::find(ids.begin(), ids.end(), last) != ids.end();
  };
  const bool may_end = seq.num_output_tokens() >= sp.min_tokens;
  if (may_end && !sp.ignore_eos && holds(r.spec.eos_token_ids)) return FinishReason::kEos;
  if (may_end && holds(sp.stop_token_ids)) {
    return FinishReason::kStop;
  }
  if (seq.num_output_tokens() >= sp.max_tokens || seq.num_tokens() >= config_.max_model_len) {
    return FinishReason::kLength;
  }
  return FinishReason::kNone;
}

void Scheduler::DropSequence(Sequence& seq) {
  kv_.Free(seq);
  if (seq.known_to_workers()) {
    pending_finished_ids_.push_back(seq.id());
    seq.set_known_to_workers(false);
  }
  sequences_.erase(seq.id());
}

void Scheduler::RetireSequence(Request& r, size_t live_index, FinishReason reason) {
  std::unique_ptr<Sequence> seq = std::move(r.seqs[live_index]);
  r.seqs.erase(r.seqs.begin() + live_index);
  seq->Finish(reason);
  DropSequence(*seq);
  r.finished_seqs.push_back(std::move(seq));
}

void Scheduler::FinishRequest(Request& r, FinishReason reason, std::string error,
                              RequestOutput& out) {
  switch (r.status) {
    case RequestStatus::kWaiting:
      FOLIO_CHECK(waiting_.Remove(&r));
      CountLeavingWaiting(r);
      break;
    case RequestStatus::kRunning: FOLIO_CHECK(running_.Remove(&r)); break;
    case RequestStatus::kSwapped: FOLIO_CHECK(swapped_.Remove(&r)); break;
    case RequestStatus::kFinished: FOLIO_CHECK(false);
  }
  r.status = RequestStatus::kFinished;
  if (config_.reservation_space != nullptr && r.reserved_tokens > 0) {
    config_.reservation_space->Release(r.spec.id);
  }
  r.reserved_tokens = 0;
  // Forced ends (abort, errors, a pool too small) finish every live sequence.
  // Live beams become hypotheses ended by `reason`, so a beam search cut
  // short (say, by a KV cache too small for its next tokens) still returns
  // the beams it has, ranked, rather than nothing.
  if (r.spec.sampling.UsesBeamSearch()) {
    for (const auto& seq : r.seqs) {
      FinishedBeam beam;
      beam.output_tokens.assign(seq->output_tokens().begin(), seq->output_tokens().end());
      beam.output_logprobs = seq->output_logprobs();
      beam.cumulative_logprob = seq->cumulative_logprob();
      beam.score = BeamScore(beam.cumulative_logprob, seq->num_output_tokens(),
                             r.spec.sampling.length_penalty);
      beam.reason = reason;
      r.finished_beams.push_back(std::move(beam));
    }
  }
  SequencePtrs forced = r.LiveSequences();
  while (!r.seqs.empty()) RetireSequence(r, r.seqs.size() - 1, reason);
  if (StreamsDeltas(r)) {
    AppendDeltas(forced, out);
  } else {
    AppendRanked(r, out);
  }
  out.finished = true;
  out.error = std::move(error);
  AttachPromptLogprobs(r, out);
  if (r.spec.sampling.prompt_logprobs.has_value() && !r.prompt_logprobs_sent) {
    --num_prompt_logprob_requests_;  // ended before its prompt was scored
  }
  FillUsage(r, out);
  requests_.erase(r.spec.id);  // destroys r
}

bool Scheduler::StreamsDeltas(const Request& r) {
  const SamplingParams& sp = r.spec.sampling;
  return !sp.UsesBeamSearch() && sp.best_of == sp.n;
}

void Scheduler::AppendDeltas(std::span<Sequence* const> seqs, RequestOutput& out) {
  for (Sequence* s : seqs) {
    SequenceOutput& delta = out.sequences.emplace_back(EmptySequenceOutput());  // in place
    delta.index = s->index();
    const int32_t from = s->num_streamed_tokens();
    AssignFew(delta.token_ids, s->output_tokens().begin() + from, s->output_tokens().end());
    AssignFew(delta.logprobs, s->output_logprobs().begin() + from, s->output_logprobs().end());
    delta.finish_reason = s->finish_reason();
    delta.cumulative_logprob = s->cumulative_logprob();
    s->set_num_streamed_tokens(s->num_output_tokens());
  }
}

void Scheduler::AppendRanked(Request& r, RequestOutput& out) {
  const SamplingParams& sp = r.spec.sampling;
  std::vector<SequenceOutput> ranked;  // best first
  if (sp.UsesBeamSearch()) {
    std::stable_sort(r.finished_beams.begin(), r.finished_beams.end(),
                     [](const FinishedBeam& a, const FinishedBeam& b) { return a.score > b.score; });
    for (const FinishedBeam& b : r.finished_beams) {
      SequenceOutput o;
      o.token_ids.assign(b.output_tokens.begin(), b.output_tokens.end());
      o.logprobs.assign(b.output_logprobs.begin(), b.output_logprobs.end());
      o.finish_reason = b.reason;
      o.cumulative_logprob = b.cumulative_logprob;
      ranked.push_back(std::move(o));
    }
    // Ended before any beam finished (abort, error): report the reason.
    if (ranked.empty() && !r.finished_seqs.empty()) {
      ranked.push_back({0, {}, {}, r.finished_seqs.back()->finish_reason(), 0.0, {}});
    }
  } else {
    std::vector<const Sequence*> seqs;
    for (const auto& s : r.finished_seqs) seqs.push_back(s.get());
    std::stable_sort(seqs.begin(), seqs.end(), [](const Sequence* a, const Sequence* b) {
      return a->cumulative_logprob() > b->cumulative_logprob();
    });
    for (const Sequence* s : seqs) {
      SequenceOutput o;
      o.token_ids.assign(s->output_tokens().begin(), s->output_tokens().end());
      o.logprobs.assign(s->output_logprobs().begin(), s->output_logprobs().end());
      o.finish_reason = s->finish_reason();
      o.cumulative_logprob = s->cumulative_logprob();
      ranked.push_back(std::move(o));
    }
  }
  if (ranked.size() > static_cast<size_t>(sp.n)) ranked.resize(sp.n);
  for (size_t i = 0; i < ranked.size(); ++i) {
    ranked[i].index = static_cast<int32_t>(i);
    out.sequences.push_back(std::move(ranked[i]));
  }
}

absl::Status Scheduler::ApplyPromptLogprobs(const StepResult& result) {
  size_t next = 0;
  for (const Scheduled& s : scheduled_) {
    if (!s.prompt_logprobs) continue;
    if (next >= result.prompt_logprobs.size() ||
        result.prompt_logprobs[next].seq_id != s.seq_id) {
      return absl::InternalError(absl::StrCat("step ", result.step_id,
                                              ": no prompt log-probs for sequence ", s.seq_id));
    }
    const PromptLogprobs& scored = result.prompt_logprobs[next++];
    Request& r = *s.request;
    // The chunk scored positions [start, end): prompt tokens start+1 .. end.
    const int32_t start = s.seq->num_computed_tokens() - s.num_tokens;
    const int32_t end = std::min(start + s.num_tokens, r.num_prompt_tokens() - 1);
    if (scored.first_index != start + 1 ||
        scored.tokens.size() != static_cast<size_t>(std::max(0, end - start))) {
      return absl::InternalError(absl::StrCat(
          "step ", result.step_id, ": sequence ", s.seq_id, " scored ", scored.tokens.size(),
          " prompt tokens from ", scored.first_index, ", expected ", std::max(0, end - start),
          " from ", start + 1));
    }
    if (static_cast<size_t>(scored.first_index) > r.prompt_logprobs.size() + 1) {
      return absl::InternalError(absl::StrCat("step ", result.step_id, ": sequence ", s.seq_id,
                                              " scored its prompt from ", scored.first_index,
                                              " but only ", r.prompt_logprobs.size(),
                                              " tokens before it were scored"));
    }
    // Keep the ones not scored before (recompute repeats earlier ones).
    for (size_t i = 0; i < scored.tokens.size(); ++i) {
      const size_t index = static_cast<size_t>(scored.first_index) + i;  // prompt index
      if (scored.tokens[i].token_id != r.spec.prompt[index]) {
        return absl::InternalError(absl::StrCat(
            "step ", result.step_id, ": sequence ", s.seq_id, " scored token ",
            scored.tokens[i].token_id, " as prompt token ", index, ", which is ",
            r.spec.prompt[index]));
      }
      if (index == r.prompt_logprobs.size() + 1) r.prompt_logprobs.push_back(scored.tokens[i]);
    }
    if (r.prompt_logprobs.size() + 1 >= r.spec.prompt.size()) r.scores_prompt = false;
  }
  if (next != result.prompt_logprobs.size()) {
    return absl::InternalError(absl::StrCat("step ", result.step_id, ": ",
                                            result.prompt_logprobs.size() - next,
                                            " prompt log-prob entries for unscheduled scoring"));
  }
  return absl::OkStatus();
}

void Scheduler::AttachPromptLogprobs(Request& r, RequestOutput& out) {
  // Only a complete scoring (a request ended before its prompt was computed
  // has none to give).
  if (!r.spec.sampling.prompt_logprobs.has_value() || r.prompt_logprobs_sent || r.scores_prompt) {
    return;
  }
  out.prompt_logprobs =
      std::make_shared<const std::vector<SampledToken>>(std::move(r.prompt_logprobs));
  r.prompt_logprobs.clear();
  r.prompt_logprobs_sent = true;
  --num_prompt_logprob_requests_;
}

void Scheduler::FillUsage(const Request& r, RequestOutput& out) const {
  out.request_id = r.spec.id;
  out.num_prompt_tokens = r.num_prompt_tokens();
  out.num_cached_prompt_tokens = r.num_cached_prompt_tokens;
  out.num_output_tokens = 0;
  if (!StreamsDeltas(r)) {
    // best_of > n and beam search return only their ranked winners (beams
    // are snapshots outside finished_seqs): count what is returned.
    for (const SequenceOutput& s : out.sequences) {
      out.num_output_tokens += static_cast<int32_t>(s.token_ids.size());
    }
    return;
  }
  for (const auto& s : r.seqs) out.num_output_tokens += s->num_output_tokens();
  for (const auto& s : r.finished_seqs) out.num_output_tokens += s->num_output_tokens();
}

bool Scheduler::Abort(RequestId id) {
  FOLIO_CHECK(!awaiting_update_);  // the engine loop aborts between steps
  auto it = requests_.find(id);
  if (it == requests_.end()) return false;
  FinishRequest(*it->second, FinishReason::kAbort, "", pending_outputs_.emplace_back());
  return true;
}

bool Scheduler::StopSequence(RequestId id, int32_t index) {
  FOLIO_CHECK(!awaiting_update_);  // like Abort: between steps
  auto it = requests_.find(id);
  if (it == requests_.end() || !StreamsDeltas(*it->second)) return false;
  Request& r = *it->second;
  for (size_t i = 0; i < r.seqs.size(); ++i) {
    if (r.seqs[i]->index() != index) continue;
    if (r.seqs.size() == 1) {
      FinishRequest(r, FinishReason::kStop, "", pending_outputs_.emplace_back());
      return true;
    }
    Sequence* const stopped[] = {r.seqs[i].get()};  // lives on in r.finished_seqs
    RetireSequence(r, i, FinishReason::kStop);
    RequestOutput& out = pending_outputs_.emplace_back(EmptyRequestOutput());
    AppendDeltas(stopped, out);
    FillUsage(r, out);
    return true;
  }
  return false;
}

}  // namespace folio
