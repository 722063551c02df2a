#include "scheduler/scheduler.h"

#include <algorithm>
#include <bit>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "scheduler/assign_few.h"
#include "scheduler/prefetch.h"
#include "scheduler/reservation_space.h"

namespace folio {

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(const SchedulerConfig& config) {
  if (absl::Status s = config.Validate(); !s.ok()) return s;
  return std::unique_ptr<Scheduler>(new Scheduler(config));
}

KvCacheManager::Options Scheduler::KvCacheOptions(const SchedulerConfig& config) {
  return {.block_size = config.block_size,
          .num_device_blocks = config.num_device_blocks,
          .num_host_blocks = config.num_host_blocks,
          .enable_prefix_caching = config.enable_prefix_caching,
          .watermark = config.watermark,
          .sliding_window = config.sliding_window,
          .host_prefix_cache = config.host_prefix_cache,
          .host_tier_blocks_per_step =
              config.host_tier_blocks_per_step >= 0
                  ? config.host_tier_blocks_per_step
                  : std::max(1, config.max_num_batched_tokens / std::max(1, config.block_size))};
}

Scheduler::Scheduler(const SchedulerConfig& config)
    : config_(config),
      kv_(KvCacheOptions(config)),
      waiting_(config.policy == SchedulingPolicy::kPriority),
      running_(config.policy == SchedulingPolicy::kPriority),
      swapped_(config.policy == SchedulingPolicy::kPriority) {}

absl::Status Scheduler::AddRequest(RequestSpec spec) {
  if (requests_.contains(spec.id)) {
    return absl::AlreadyExistsError(absl::StrCat("request id ", spec.id, " is already in use"));
  }
  if (spec.prompt.empty()) return absl::InvalidArgumentError("prompt must not be empty");
  for (TokenId t : spec.prompt) {
    if (t < 0) return absl::InvalidArgumentError(absl::StrCat("prompt token id ", t, " is negative"));
  }
  if (absl::Status s = ValidateSamplingParams(spec.sampling); !s.ok()) return s;
  const int32_t parallel = spec.sampling.NumParallelSequences();
  // The field that asks for them: beam_width, else n when n alone is too many.
  const char* parallel_field = spec.sampling.UsesBeamSearch() ? "beam_width"
                               : spec.sampling.n > config_.max_parallel_sequences ||
                                       spec.sampling.n > config_.max_num_seqs ||
                                       spec.sampling.n > config_.max_num_batched_tokens
                                   ? "n"
                                   : "best_of";
  if (parallel > config_.max_parallel_sequences) {
    return absl::InvalidArgumentError(absl::StrCat(
        parallel_field, " must be at most ", config_.max_parallel_sequences, ", got ", parallel));
  }
  // All of a request's sequences run (and decode) in the same step: more of
  // them than max_num_seqs or one step's token budget would wait forever.
  if (parallel > config_.max_num_seqs) {
    return absl::InvalidArgumentError(absl::StrCat(parallel_field, " must be at most ",
                                                   config_.max_num_seqs, " (max_num_seqs), got ",
                                                   parallel));
  }
  if (parallel > config_.max_num_batched_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat(parallel_field, " must be at most ", config_.max_num_batched_tokens,
                     " (max_num_batched_tokens), got ", parallel));
  }
  // A server is not told how long an output will be; what it knows for sure
  // is the most the request may produce.
  if (spec.expected_output_len < 1) spec.expected_output_len = spec.sampling.max_tokens;
  // What the workers ban until min_tokens: the stop token ids and EOS, even
  // under ignore_eos (as vLLM, whose min_tokens bans every EOS id).
  spec.sampling.end_token_ids.clear();
  if (spec.sampling.min_tokens > 0) {
    spec.sampling.end_token_ids = spec.eos_token_ids;
    spec.sampling.end_token_ids.insert(spec.sampling.end_token_ids.end(),
                                       spec.sampling.stop_token_ids.begin(),
                                       spec.sampling.stop_token_ids.end());
  }
  auto request = std::make_unique<Request>();
  request->arrival = next_arrival_++;
  request->seqs.push_back(
      std::make_unique<Sequence>(next_seq_id_++, spec.id, /*index=*/0, spec.prompt));
  request->spec = std::move(spec);
  Request* r = request.get();
  r->scores_prompt = r->spec.sampling.prompt_logprobs.has_value() && r->num_prompt_tokens() > 1;
  num_prompt_logprob_requests_ += r->spec.sampling.prompt_logprobs.has_value() ? 1 : 0;
  // Token arrays growing by doubling as a sequence decodes cost a malloc,
  // a copy and a free in about one sequence step of twenty: size them once
  // for the longest the request can run (bounded, for huge max_tokens).
  constexpr int64_t kMaxReservedOutputTokens = 4096;
  const int64_t longest = std::min<int64_t>(
      {static_cast<int64_t>(r->num_prompt_tokens()) + r->spec.sampling.max_tokens,
       static_cast<int64_t>(r->num_prompt_tokens()) + kMaxReservedOutputTokens,
       static_cast<int64_t>(config_.max_model_len)});
  r->seqs[0]->ReserveTokens(static_cast<int32_t>(longest));
  sequences_[r->seqs[0]->id()] = r->seqs[0].get();
  requests_[r->spec.id] = std::move(request);
  PushWaiting(*r);
  return absl::OkStatus();
}

int32_t Scheduler::num_running_sequences() const {
  int32_t n = 0;
  for (const Request* r : running_) n += r->num_live_sequences();
  return n;
}

int32_t Scheduler::SequenceSlots(const Request& r) const {
  // A request still before its fan-out will need all its parallel sequences.
  return r.fanned_out ? r.num_live_sequences()
                      : std::max(r.num_live_sequences(), r.spec.sampling.NumParallelSequences());
}

int32_t Scheduler::ReservationFor(const Request& r) const {
  // Capped before rounding: max_tokens may be as large as INT32_MAX.
  const auto final_len = static_cast<uint32_t>(
      std::min<int64_t>(static_cast<int64_t>(r.num_prompt_tokens()) + r.spec.expected_output_len,
                        config_.max_model_len));
  switch (config_.reservation) {
    case ReservationPolicy::kNone: return 0;
    case ReservationPolicy::kMax: return config_.max_model_len;
    case ReservationPolicy::kPow2:
      return static_cast<int32_t>(
          std::min<uint32_t>(config_.max_model_len, std::bit_ceil(final_len)));
    case ReservationPolicy::kOracle: return static_cast<int32_t>(final_len);
  }
  return 0;
}

StepPlan Scheduler::Schedule() {
  FOLIO_CHECK(!awaiting_update_);
  awaiting_update_ = true;
  StepPlan plan;
  plan.step_id = next_step_++;
  plan.finished_seq_ids = std::move(pending_finished_ids_);
  pending_finished_ids_.clear();
  scheduled_.clear();
  num_scoring_ = 0;
  ++stats_.num_steps;

  // Entries are built in place as work is committed; size for last step's.
  plan.scheduled.reserve(std::max(last_num_scheduled_, running_.size()));
  int32_t budget = config_.max_num_batched_tokens;
  bool preempted = false;
  // Static batching lets requests in only between batches: the previous one
  // has finished to its last request (swapped ones included).
  const bool between_batches = running_.empty() && swapped_.empty();
  const bool may_admit = config_.batching == BatchingMode::kContinuous || between_batches;
  // Sliding window: what no query to come can see goes back to the pool
  // first, so this step can reuse it (the last step's reads are done).
  if (config_.sliding_window > 0) {
    for (Request* r : running_) {
      for (auto& seq : r->seqs) stats_.num_window_released_blocks += kv_.ReleaseBeforeWindow(*seq);
    }
  }
  ScheduleRunning(plan, budget, preempted);
  int32_t seq_slots = 0;
  for (const Request* r : running_) seq_slots += SequenceSlots(*r);
  // Memory ran short this step: admitting more would only preempt again.
  if (!preempted) ScheduleSwapped(plan, budget, seq_slots);
  // Swapped requests go first, or they could starve behind new arrivals.
  if (!preempted && swapped_.empty() && may_admit) {
    ScheduleWaiting(plan, budget, seq_slots,
                    /*whole_batch=*/config_.batching == BatchingMode::kStatic);
  }

  // The host tier's copies of evicted blocks join the swap-outs.
  kv_.FinishStep(&plan.swap_out);
  last_num_scheduled_ = scheduled_.size();
  MaybeCheckInvariants();
  return plan;
}

bool Scheduler::PlanTokens(const Request& r, int32_t budget, std::vector<int32_t>& counts,
                           bool& sample) const {
  counts.clear();
  int32_t total = 0;
  for (const auto& seq : r.seqs) {
    counts.push_back(seq->num_pending_tokens());
    total += counts.back();
  }
  // Everything fits: compute it all and sample every sequence together (beam
  // search and fan-out need all of a request's sequences in the same step).
  if (total <= budget) {
    sample = true;
    return total > 0;
  }
  // Otherwise chunked prefill: catch up all but each sequence's last token.
  sample = false;
  int32_t left = budget;
  for (size_t i = 0; i < counts.size(); ++i) {
    counts[i] = std::min(counts[i] - 1, left);
    left -= counts[i];
  }
  return left < budget;
}

bool Scheduler::Commit(Request& r, const std::vector<int32_t>& counts, bool sample,
                       StepPlan& plan, int32_t& budget, bool may_fail) {
  const SamplingParams& sp = r.spec.sampling;
  SampleMode mode = SampleMode::kNone;
  int32_t num_samples = 0;
  if (sample) {
    if (sp.UsesBeamSearch()) {
      mode = SampleMode::kBeamCandidates;
      num_samples = 2 * sp.beam_width;
    } else {
      mode = SampleMode::kSample;
      num_samples = r.fanned_out ? 1 : sp.best_of;
    }
  }
  for (size_t i = 0; i < r.seqs.size(); ++i) {
    Sequence& seq = *r.seqs[i];
    const bool ok = kv_.AllocateSlots(seq, counts[i], r.reserved_tokens, r.spec.cache_salt,
                                      &plan.copies);
    if (!ok && may_fail) {
      FOLIO_CHECK(r.seqs.size() == 1);  // so nothing was allocated yet
      return false;
    }
    FOLIO_CHECK(ok);
    if (counts[i] == 0) continue;
    // Emitted now, while seq is in cache: nothing later in this step touches
    // committed work (preemption only takes requests not yet scheduled).
    // Scores the prompt positions of this chunk not scored before (a
    // recomputed chunk may repeat some).
    const bool score =
        num_prompt_logprob_requests_ > 0 && r.scores_prompt &&
        std::min(seq.num_computed_tokens() + counts[i], r.num_prompt_tokens() - 1) >
            static_cast<int32_t>(r.prompt_logprobs.size());
    num_scoring_ += score ? 1 : 0;
    EmitPlanEntry(scheduled_.emplace_back(
                      Scheduled{&seq, &r, seq.id(), counts[i], mode, score, num_samples}),
                  plan);
    budget -= counts[i];
  }
  return true;
}

namespace {

// Fetches what scheduling a sequence reads beyond the sequence itself: its
// block-table tail and the tokens the plan carries.
void PrefetchSequenceTails(const Sequence& seq) {
  const std::vector<BlockId>& blocks = seq.block_table().blocks();
  if (!blocks.empty()) PrefetchLine(&blocks.back());
  PrefetchLine(seq.tokens().data() + seq.num_computed_tokens());
}

}  // namespace

void Scheduler::ScheduleRunning(StepPlan& plan, int32_t& budget, bool& preempted) {
  std::vector<int32_t> counts;
  // Indexing a std::deque costs a dozen instructions; the loop and its
  // lookahead index a flat copy. Preemption only removes requests from the
  // back, so running_[i] == order[i] for every i < running_.size().
  std::vector<Request*>& order = running_snapshot_;
  order.assign(running_.begin(), running_.end());
  // Requests and sequences are scattered on the heap, and each is reached
  // through the one before: fetch ahead in stages, each reading only lines an
  // earlier stage fetched (request, then its sequence, then the tails, then
  // the last block's reference count), so the misses of several requests
  // overlap instead of queueing.
  auto prefetch = [&](size_t i) {
    const size_t n = running_.size();
    if (i + 8 < n) {
      const Request* far = order[i + 8];
      PrefetchLine(far);
      PrefetchLine(&far->spec.sampling.beam_width);
      PrefetchLine(&far->spec.cache_salt);
    }
    if (i + 5 < n && !order[i + 5]->seqs.empty()) {
      const Sequence* seq = order[i + 5]->seqs.front().get();
      PrefetchLine(seq);
      PrefetchLine(reinterpret_cast<const char*>(seq) + 64);
    }
    if (i + 3 < n && !order[i + 3]->seqs.empty()) {
      PrefetchSequenceTails(*order[i + 3]->seqs.front());
    }
    if (i + 1 < n && !order[i + 1]->seqs.empty()) {
      kv_.PrefetchForAppend(*order[i + 1]->seqs.front());
    }
  };
  for (size_t i = 0; i < running_.size(); ++i) {
    Request& r = *order[i];
    prefetch(i);
    bool sample = false;
    if (budget <= 0) break;
    if (!PlanTokens(r, budget, counts, sample)) continue;
    if (r.seqs.size() == 1) {
      // AllocateSlots checks the exact block count itself, changing nothing
      // when short: just try it.
      if (Commit(r, counts, sample, plan, budget, /*may_fail=*/true)) continue;
    }
    SequencePtrs seqs = r.LiveSequences();
    // Usually the pool has room even if every written block were copied:
    // then the exact count (reference counts of shared blocks) is not needed.
    if (r.seqs.size() > 1 &&
        kv_.BlocksNeededBound(seqs, counts, r.reserved_tokens) <= kv_.num_free_device_blocks()) {
      Commit(r, counts, sample, plan, budget);
      continue;
    }
    bool dropped = false;
    while (kv_.BlocksNeeded(seqs, counts, r.reserved_tokens) > kv_.num_free_device_blocks()) {
      // The victim is the least important running request: the last one.
      Request& victim = *running_.back();
      if (&victim == &r && running_.size() == 1) {
        // Alone and still short: the pool can never hold this request's
        // next tokens. Stop it rather than wait forever.
        FinishRequest(r, FinishReason::kLength,
                      absl::StrCat("the KV cache (", kv_.device_pool().num_blocks(),
                                   " blocks) cannot hold this request's next tokens"),
                      pending_outputs_.emplace_back());
        dropped = true;
        break;
      }
      Preempt(victim, plan);
      preempted = true;
      if (&victim == &r) {
        dropped = true;
        break;
      }
    }
    if (dropped) break;  // r was the last running request
    Commit(r, counts, sample, plan, budget);
  }
}

void Scheduler::Preempt(Request& victim, StepPlan& plan) {
  SequencePtrs seqs = victim.LiveSequences();
  PreemptionMode mode = config_.preemption_mode;
  if (mode == PreemptionMode::kAuto) {
    // Recompute would lose a multi-sequence request's shared fork structure.
    mode = seqs.size() > 1 ? PreemptionMode::kSwap : PreemptionMode::kRecompute;
  }
  // A full host pool falls back to recompute; the engine never aborts.
  if (mode == PreemptionMode::kSwap && !kv_.CanSwapOut(seqs)) mode = PreemptionMode::kRecompute;

  FOLIO_CHECK(running_.Remove(&victim));
  ++victim.num_preemptions;
  for (Sequence* seq : seqs) {
    if (seq->known_to_workers()) {
      plan.preempted_seq_ids.push_back(seq->id());
      seq->set_known_to_workers(false);
    }
  }
  if (mode == PreemptionMode::kSwap) {
    kv_.SwapOut(seqs, &plan.swap_out);
    victim.status = RequestStatus::kSwapped;
    swapped_.Insert(&victim);
    ++stats_.num_preemptions_swap;
    return;
  }
  RequeueForRecompute(victim);
}

void Scheduler::RequeueForRecompute(Request& r) {
  for (const auto& seq : r.seqs) {
    kv_.Free(*seq);
    seq->set_num_computed_tokens(0);
    seq->set_known_to_workers(false);
  }
  // Recompute gives the reservation back (it is claimed again at
  // readmission). A swapped request keeps it: its table still covers the
  // reserved tokens and FinishRequest releases it.
  if (config_.reservation_space != nullptr && r.reserved_tokens > 0) {
    config_.reservation_space->Release(r.spec.id);
  }
  r.reserved_tokens = 0;
  r.preempted = true;
  r.status = RequestStatus::kWaiting;
  PushWaiting(r);
  ++stats_.num_preemptions_recompute;
}

void Scheduler::RequeueAfterWorkerLoss(int32_t max_requeues, const std::string& cause) {
  // The step in flight (if any) is gone with the workers' KV: nothing of it
  // is applied, and the sequences it advanced start over.
  awaiting_update_ = false;
  scheduled_.clear();
  num_scoring_ = 0;
  std::vector<Request*> lost(running_.begin(), running_.end());
  lost.insert(lost.end(), swapped_.begin(), swapped_.end());
  for (Request* r : lost) {
    if (++r->num_worker_requeues > max_requeues) {
      std::string error = cause;
      if (max_requeues > 0) {
        absl::StrAppend(&error, " (the request was requeued ", max_requeues,
                        max_requeues == 1 ? " time" : " times", " already)");
      }
      FinishRequest(*r, FinishReason::kError, std::move(error), pending_outputs_.emplace_back());
      continue;
    }
    FOLIO_CHECK(r->status == RequestStatus::kRunning ? running_.Remove(r) : swapped_.Remove(r));
    ++r->num_preemptions;
    RequeueForRecompute(*r);
  }
  // The new workers know no sequence, hold no block and cache nothing.
  pending_finished_ids_.clear();
  kv_.ForgetCachedContent();
  ++stats_.num_worker_losses;
  MaybeCheckInvariants();
}

std::vector<RequestOutput> Scheduler::TakePendingOutputs() {
  FOLIO_CHECK(!awaiting_update_);
  std::vector<RequestOutput> outputs = std::move(pending_outputs_);
  pending_outputs_.clear();
  return outputs;
}

void Scheduler::ScheduleSwapped(StepPlan& plan, int32_t& budget, int32_t& seq_slots) {
  std::vector<int32_t> counts;
  while (!swapped_.empty() && budget > 0) {
    Request& r = *swapped_.front();
    SequencePtrs seqs = r.LiveSequences();
    if (seq_slots + SequenceSlots(r) > config_.max_num_seqs) break;
    if (!kv_.CanSwapIn(seqs)) break;
    bool sample = false;
    if (!PlanTokens(r, budget, counts, sample)) break;
    swapped_.PopFront();
    kv_.SwapIn(seqs, &plan.swap_in);
    r.status = RequestStatus::kRunning;
    running_.Insert(&r);
    seq_slots += SequenceSlots(r);
    // CanSwapIn left a block per sequence to grow into; a longer chunk may
    // not fit, and then the request simply runs next step.
    if (kv_.BlocksNeeded(seqs, counts, r.reserved_tokens) <= kv_.num_free_device_blocks()) {
      Commit(r, counts, sample, plan, budget);
    }
  }
}

AllocStatus Scheduler::CheckAdmission(Request& r, std::string* why) {
  const Sequence& first = *r.seqs.front();
  if (first.num_tokens() + 1 > config_.max_model_len) {
    *why = absl::StrCat("prompt of ", first.num_tokens(), " tokens plus 1 generated token exceeds ",
                        "max_model_len ", config_.max_model_len);
    return AllocStatus::kNever;
  }
  const int32_t reserve = ReservationFor(r);
  SequencePtrs seqs = r.LiveSequences();
  int32_t needed_blocks = 0;
  for (Sequence* seq : seqs) {
    needed_blocks = std::max(needed_blocks,
                             kv_.BlocksForTokens(std::max(seq->num_tokens() + 1, reserve)));
  }
  if (needed_blocks > config_.num_device_blocks) {
    *why = absl::StrCat("needs ", needed_blocks, " KV blocks but the device pool has only ",
                        config_.num_device_blocks);
    return AllocStatus::kNever;
  }
  ReservationSpace* space = config_.reservation_space;
  const int64_t claim = static_cast<int64_t>(reserve) * static_cast<int64_t>(SequenceSlots(r));
  if (space != nullptr && reserve > 0 && claim > space->capacity()) {
    *why = absl::StrCat("reservation of ", claim, " token slots exceeds the capacity ",
                        space->capacity());
    return AllocStatus::kNever;
  }
  AllocStatus status = kv_.CanAdmit(seqs, r.spec.cache_salt, !r.scores_prompt);
  if (status == AllocStatus::kOk && reserve > 0) {
    // A paged reservation must find all its blocks now.
    int32_t reserved_blocks = 0;
    for (Sequence* seq : seqs) {
      reserved_blocks += kv_.BlocksForTokens(std::max(seq->num_tokens() + 1, reserve));
    }
    if (reserved_blocks > kv_.num_free_device_blocks()) status = AllocStatus::kLater;
  }
  if (status == AllocStatus::kNever) {
    *why = absl::StrCat("needs more KV blocks than the device pool has (",
                        config_.num_device_blocks, ")");
    if (kv_.watermark_blocks() > 0) {
      absl::StrAppend(why, " less the ", kv_.watermark_blocks(), " kept free as the watermark");
    }
  }
  if (status == AllocStatus::kOk && space != nullptr && reserve > 0 &&
      !space->TryReserve(r.spec.id, claim)) {
    status = AllocStatus::kLater;
  }
  // With no request running or swapped, nothing holds device blocks or ever
  // will free more: "later" would be forever (say, a recompute-preempted
  // group whose sequences, no longer sharing blocks, outgrew the pool).
  if (status == AllocStatus::kLater && running_.empty() && swapped_.empty()) {
    int32_t blocks = 0;
    for (const Sequence* seq : seqs) blocks += kv_.BlocksForTokens(seq->num_tokens() + 1);
    *why = absl::StrCat("does not fit even in an empty KV cache (", config_.num_device_blocks,
                        " blocks): its ", seqs.size(), " sequence(s) need ", blocks,
                        r.preempted ? " blocks to be computed again" : " blocks");
    if (r.preempted && config_.num_host_blocks == 0) {
      absl::StrAppend(why, "; swap space (--swap-space-mb) lets a preempted group swap out "
                           "instead of being recomputed");
    }
    status = AllocStatus::kNever;
  }
  if (status == AllocStatus::kOk) r.reserved_tokens = reserve;
  return status;
}

void Scheduler::ScheduleWaiting(StepPlan& plan, int32_t& budget, int32_t& seq_slots,
                                bool whole_batch) {
  std::vector<int32_t> counts;
  while (!waiting_.empty() && (budget > 0 || whole_batch)) {
    Request& r = *waiting_.front();
    if (seq_slots + SequenceSlots(r) > config_.max_num_seqs) break;
    std::string why;
    const AllocStatus status = CheckAdmission(r, &why);
    if (status == AllocStatus::kNever) {
      // A recompute-preempted request that outgrew the pool ends like one
      // that cannot grow while running: by length, keeping its tokens.
      const FinishReason reason = r.preempted ? FinishReason::kLength : FinishReason::kError;
      FinishRequest(r, reason, std::move(why), pending_outputs_.emplace_back());
      continue;
    }
    if (status == AllocStatus::kLater) break;
    waiting_.PopFront();
    CountLeavingWaiting(r);
    int32_t hit_tokens = 0;
    // Scoring the prompt needs every position's logits: no cache hits then.
    if (!r.scores_prompt) {
      for (const auto& seq : r.seqs) {
        hit_tokens += kv_.AttachCachedPrefix(*seq, r.spec.cache_salt, &plan.swap_in);
      }
    }
    if (!r.counted_cached_prompt) {
      r.num_cached_prompt_tokens = hit_tokens;
      r.counted_cached_prompt = true;
      stats_.num_prompt_tokens += r.num_prompt_tokens();
    }
    r.status = RequestStatus::kRunning;
    running_.Insert(&r);
    seq_slots += SequenceSlots(r);
    bool sample = false;
    SequencePtrs seqs = r.LiveSequences();
    if (PlanTokens(r, budget, counts, sample) &&
        kv_.BlocksNeeded(seqs, counts, r.reserved_tokens) <= kv_.num_free_device_blocks()) {
      Commit(r, counts, sample, plan, budget);
    }
  }
}

void Scheduler::EmitPlanEntry(const Scheduled& s, StepPlan& plan) {
  Sequence& seq = *s.seq;
  BlockTable& table = seq.block_table();
  const int32_t start = seq.num_computed_tokens();
  if (!seq.known_to_workers()) {
    NewSequenceData data;
    data.seq_id = seq.id();
    data.request_id = seq.request_id();
    data.sequence_index = seq.index();
    data.prompt_token_ids.assign(seq.prompt_tokens().begin(), seq.prompt_tokens().end());
    data.output_token_ids.assign(seq.output_tokens().begin(), seq.output_tokens().end());
    data.block_ids = table.blocks();
    data.num_computed_tokens = start;
    data.sampling = s.request->spec.sampling;
    plan.new_sequences.push_back(std::move(data));
    seq.set_known_to_workers(true);
  } else if (table.synced_prefix() < table.size()) {
    CachedSequenceData diff;
    diff.seq_id = seq.id();
    diff.block_table_offset = table.synced_prefix();
    diff.block_ids.assign(table.blocks().begin() + diff.block_table_offset, table.blocks().end());
    diff.num_computed_tokens = start;
    plan.cached_sequences.push_back(std::move(diff));
  }
  table.MarkSynced();
  ScheduledSequence& work = plan.scheduled.emplace_back();  // in place: no inline-storage move
  work.seq_id = seq.id();
  work.start_position = start;
  AssignFew(work.token_ids, seq.tokens().begin() + start,
            seq.tokens().begin() + start + s.num_tokens);
  work.sample_mode = s.mode;
  work.num_samples = s.num_samples;
  work.prompt_logprobs = s.prompt_logprobs;
  plan.num_scheduled_tokens += s.num_tokens;
  seq.set_num_computed_tokens(start + s.num_tokens);
}

const Request* Scheduler::FindRequest(RequestId id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second.get();
}

std::vector<const Request*> Scheduler::RunningRequests() const {
  return {running_.begin(), running_.end()};
}

int64_t Scheduler::num_device_tokens() const {
  int64_t n = 0;
  for (const Request* r : running_) {
    for (const auto& seq : r->seqs) n += seq->num_computed_tokens();
  }
  return n;
}

double Scheduler::num_unfilled_device_slots() const {
  const BlockPool& pool = kv_.device_pool();
  const int32_t block_size = kv_.block_size();
  double unfilled = 0.0;
  for (const Request* r : running_) {
    for (const auto& seq : r->seqs) {
      const BlockTable& table = seq->block_table();
      if (table.empty() || table.on_host()) continue;
      const int32_t slack = table.size() * block_size - seq->num_computed_tokens();
      if (slack > 0) unfilled += static_cast<double>(slack) / pool.ref_count(table.back());
    }
  }
  return unfilled;
}

std::vector<const Sequence*> Scheduler::AllLiveSequences() const {
  std::vector<const Sequence*> out;
  out.reserve(sequences_.size());
  for (const auto& [id, seq] : sequences_) out.push_back(seq);
  return out;
}

absl::Status Scheduler::CheckInvariants() const {
  if (absl::Status s = kv_.CheckInvariants(AllLiveSequences()); !s.ok()) return s;
  size_t queued = waiting_.size() + running_.size() + swapped_.size();
  if (queued != requests_.size()) {
    return absl::InternalError(absl::StrCat(queued, " requests queued but ", requests_.size(),
                                            " unfinished"));
  }
  for (const Request* r : swapped_) {
    for (const auto& seq : r->seqs) {
      if (!seq->block_table().on_host() && !seq->block_table().empty()) {
        return absl::InternalError(absl::StrCat("swapped sequence ", seq->id(), " is on the device"));
      }
    }
  }
  int64_t waiting_tokens = 0;
  for (const Request* r : waiting_) {
    waiting_tokens += r->waiting_tokens;
    for (const auto& seq : r->seqs) {
      if (!seq->block_table().empty()) {
        return absl::InternalError(absl::StrCat("waiting sequence ", seq->id(), " holds blocks"));
      }
    }
  }
  if (waiting_tokens != num_waiting_tokens_) {
    return absl::InternalError(absl::StrCat("waiting requests hold ", waiting_tokens,
                                            " tokens but ", num_waiting_tokens_, " are counted"));
  }
  int32_t unsent_scores = 0;
  for (const auto& [id, r] : requests_) {
    unsent_scores += r->spec.sampling.prompt_logprobs.has_value() && !r->prompt_logprobs_sent;
  }
  if (unsent_scores != num_prompt_logprob_requests_) {
    return absl::InternalError(absl::StrCat(unsent_scores, " requests await prompt scores but ",
                                            num_prompt_logprob_requests_, " are counted"));
  }
  return absl::OkStatus();
}

void Scheduler::PushWaiting(Request& r) {
  int64_t tokens = 0;
  for (const auto& seq : r.seqs) tokens += seq->num_tokens();
  r.waiting_tokens = static_cast<int32_t>(std::min<int64_t>(tokens, INT32_MAX));
  num_waiting_tokens_ += r.waiting_tokens;
  waiting_.Insert(&r);
}

void Scheduler::CountLeavingWaiting(Request& r) {
  num_waiting_tokens_ -= r.waiting_tokens;
  r.waiting_tokens = 0;
}

void Scheduler::MaybeCheckInvariants() const {
  if (!config_.check_invariants) return;
  absl::Status s = CheckInvariants();
  if (!s.ok()) {
    std::fprintf(stderr, "folio scheduler invariant violated: %s\n", std::string(s.message()).c_str());
    std::abort();
  }
}

}  // namespace folio
