#include "scheduler/server/engine.h"

#include <chrono>
#include <cstdio>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "scheduler/server/scheduler_metrics.h"

namespace folio {
namespace {

// The limits requests are checked against, knowing how the scheduler orders.
RequestLimits WithPolicy(RequestLimits limits, SchedulingPolicy policy) {
  limits.priority_scheduling = policy == SchedulingPolicy::kPriority;
  return limits;
}

// Server-assigned request ids: unlikely to collide with client-chosen ones.
std::string MakeRequestId(RequestId id) {
  static const uint64_t salt = std::random_device{}();
  return absl::StrFormat("folio-%08x-%d", static_cast<uint32_t>(salt), id);
}

int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

constexpr double kNanos = 1e-9;

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(const Options& options,
                                                      std::unique_ptr<Tokenizer> tokenizer,
                                                      const RequestLimits& limits,
                                                      std::unique_ptr<WorkerGroup> workers) {
  if (tokenizer == nullptr || workers == nullptr) {
    return absl::InvalidArgumentError("engine needs a tokenizer and a worker group");
  }
  absl::StatusOr<std::unique_ptr<Scheduler>> scheduler = Scheduler::Create(options.scheduler);
  if (!scheduler.ok()) return scheduler.status();
  return std::unique_ptr<Engine>(new Engine(options, std::move(tokenizer), limits,
                                            std::move(workers), std::move(*scheduler)));
}

Engine::Engine(const Options& options, std::unique_ptr<Tokenizer> tokenizer,
               const RequestLimits& limits, std::unique_ptr<WorkerGroup> workers,
               std::unique_ptr<Scheduler> scheduler)
    : options_(options),
      tokenizer_(std::move(tokenizer)),
      limits_(WithPolicy(limits, options.scheduler.policy)),
      workers_(std::move(workers)),
      scheduler_(std::move(scheduler)) {
  PublishSnapshot();
}

Engine::~Engine() { Shutdown(); }

void Engine::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (started_ || stopping_) return;
  started_ = true;
  loop_ = std::thread([this] { Loop(); });
}

void Engine::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (loop_.joinable()) loop_.join();
}

void Engine::StopAccepting() {
  std::lock_guard<std::mutex> lock(mu_);
  draining_ = true;
}

absl::StatusOr<std::string> Engine::Submit(const v1::GenerateRequest& request,
                                           std::shared_ptr<GenerateSink> sink) {
  absl::StatusOr<ParsedRequest> parsed = ParseGenerateRequest(request, *tokenizer_, limits_);
  if (!parsed.ok()) return parsed.status();
  std::string public_id;
  const int64_t submit_ns = NowNanos();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.ok()) {
      return absl::UnavailableError(absl::StrCat("the engine has stopped: ", failure_.message()));
    }
    if (stopping_) return absl::UnavailableError("the engine is shutting down");
    if (draining_) {
      return absl::UnavailableError(
          "the server is shutting down (draining the requests it has); retry on another replica");
    }
    if (absl::Status overload = CheckOverload(static_cast<int64_t>(parsed->spec.prompt.size()));
        !overload.ok()) {
      return overload;
    }
    const RequestId id = next_id_++;
    public_id = parsed->request_id.value_or(MakeRequestId(id));
    if (!live_.try_emplace(public_id, id).second) {
      return absl::AlreadyExistsError(
          absl::StrCat("request_id '", public_id, "' is already in use by a live request"));
    }
    sinks_.emplace(id, std::move(sink));
    ++in_inbox_.requests;
    in_inbox_.tokens += static_cast<int64_t>(parsed->spec.prompt.size());
    inbox_.push_back(Submitted{id, public_id, std::move(*parsed), submit_ns});
  }
  cv_.notify_all();
  return public_id;
}

absl::Status Engine::CheckOverload(int64_t prompt_tokens) const {
  const int64_t requests =
      snapshot_.num_waiting + moved_since_snapshot_.requests + in_inbox_.requests;
  const int64_t tokens =
      snapshot_.num_waiting_tokens + moved_since_snapshot_.tokens + in_inbox_.tokens;
  const char* noun = requests == 1 ? " request" : " requests";
  if (options_.max_waiting_requests > 0 && requests >= options_.max_waiting_requests) {
    return absl::ResourceExhaustedError(
        absl::StrCat("overloaded: ", requests, noun, " waiting (--max-waiting-requests ",
                     options_.max_waiting_requests, "); retry later"));
  }
  // One request alone may exceed the token bound (max_model_len does bound
  // it): it is refused only while others wait.
  if (options_.max_waiting_tokens > 0 && requests > 0 &&
      tokens + prompt_tokens > options_.max_waiting_tokens) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "overloaded: ", requests, noun, " with ", tokens,
        " prompt tokens waiting (--max-waiting-tokens ", options_.max_waiting_tokens,
        "); retry later"));
  }
  return absl::OkStatus();
}

bool Engine::Abort(const std::string& request_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(request_id);
    if (it == live_.end()) return false;
    aborts_.push_back(it->second);
  }
  cv_.notify_all();
  return true;
}

// One step is pipelined with the delivery of the previous one's outputs:
// schedule step N+1, send its plan, then detokenize and stream step N's
// outputs to the clients while the workers compute, then wait for N+1. The
// engine's per-token work (stop strings, text, protos, gRPC writes) thus
// leaves the workers' critical path, as vLLM's V1 engine overlaps output
// processing with the model. Scheduling N+1 needs only N's sampled tokens,
// which Update(N) has applied. Stop strings found while delivering N stop
// their sequences (or requests) after step N+1, which ran one step too far
// for them; the streams drop its tokens.
void Engine::Loop() {
  SchedulerMetrics* const metrics = options_.metrics;
  std::vector<RequestOutput> pending;  // step N's outputs, not yet delivered
  int64_t pending_ns = 0;
  std::vector<StoppedByText> stopped;  // stop strings met while delivering
  auto deliver_pending = [&] {
    for (const RequestOutput& output : pending) Deliver(output, pending_ns, &stopped);
    pending.clear();
  };
  auto abort_stopped = [&] {
    for (const StoppedByText& s : stopped) {  // false: finished meanwhile
      if (s.index < 0) {
        scheduler_->Abort(s.request_id);
      } else {
        scheduler_->StopSequence(s.request_id, s.index);
      }
    }
    stopped.clear();
  };
  // A lost worker group: the stop strings met in the last delivered step
  // still apply to the requeued requests.
  auto recover = [&](const absl::Status& cause) {
    if (!RecoverWorkers(cause, &stopped)) return false;
    abort_stopped();
    return RebuildWorkers();
  };
  while (true) {
    if (!scheduler_->HasUnfinishedRequests()) {
      // No next step to overlap with: deliver now (TakeWork may sleep next).
      deliver_pending();
      abort_stopped();
      if (metrics != nullptr) metrics->Flush(/*force=*/true);
      PublishSnapshot();
    }
    bool check_health = false;
    if (!TakeWork(/*wait=*/true, &check_health)) break;
    if (check_health) {
      if (absl::Status s = workers_->CheckHealth(); !s.ok() && !recover(s)) return;
    }
    if (!scheduler_->HasUnfinishedRequests()) continue;
    const int64_t start_ns = metrics != nullptr ? NowNanos() : 0;
    const StepPlan plan = scheduler_->Schedule();
    if (absl::Status s = workers_->Begin(plan); !s.ok()) {
      deliver_pending();
      if (!recover(s)) return;
      continue;
    }
    deliver_pending();  // overlaps the workers' forward pass
    // The delivered latencies and the gauges of the plan in flight.
    if (metrics != nullptr) metrics->Flush(/*force=*/false);
    absl::StatusOr<StepResult> result = workers_->Wait();
    if (!result.ok()) {
      if (!recover(result.status())) return;
      continue;
    }
    absl::StatusOr<std::vector<RequestOutput>> outputs = scheduler_->Update(*result);
    if (!outputs.ok()) {
      FailAll(outputs.status());
      return;
    }
    abort_stopped();
    pending_ns = NowNanos();
    if (metrics != nullptr) {
      metrics->RecordStep(*scheduler_, plan.num_scheduled_tokens,
                          (pending_ns - start_ns) * kNanos);
      RecordScheduled(plan, start_ns);
    }
    pending = std::move(*outputs);
    PublishSnapshot();
  }
  deliver_pending();
  abort_stopped();
  PublishSnapshot();
}

bool Engine::TakeWork(bool wait, bool* check_health) {
  std::vector<Submitted> inbox;
  std::vector<RequestId> aborts;
  bool stopping;
  {
    std::unique_lock<std::mutex> lock(mu_);
    auto has_work = [&] {
      return stopping_ || !inbox_.empty() || !aborts_.empty() ||
             scheduler_->HasUnfinishedRequests();
    };
    const absl::Duration interval = options_.health_check_interval;
    if (wait && interval > absl::ZeroDuration() && check_health != nullptr) {
      *check_health = !cv_.wait_for(lock, absl::ToChronoNanoseconds(interval), has_work);
    } else if (wait) {
      cv_.wait(lock, has_work);
    }
    inbox.swap(inbox_);
    moved_since_snapshot_.requests += in_inbox_.requests;
    moved_since_snapshot_.tokens += in_inbox_.tokens;
    in_inbox_ = {};
    aborts.swap(aborts_);
    stopping = stopping_;
  }
  for (Submitted& s : inbox) Admit(std::move(s));
  if (stopping) {
    for (const auto& [id, stream] : streams_) aborts.push_back(id);
  }
  for (RequestId id : aborts) scheduler_->Abort(id);  // false: finished meanwhile
  return !(stopping && !scheduler_->HasUnfinishedRequests());
}

void Engine::Admit(Submitted submitted) {
  auto stream = std::make_unique<RequestStream>(submitted.public_id, *tokenizer_, submitted.parsed,
                                                options_.stream_interval);
  RequestSpec spec = std::move(submitted.parsed.spec);
  spec.id = submitted.id;
  if (absl::Status s = scheduler_->AddRequest(std::move(spec)); !s.ok()) {
    std::shared_ptr<GenerateSink> sink;
    {
      std::lock_guard<std::mutex> lock(mu_);
      sink = std::move(sinks_[submitted.id]);
      sinks_.erase(submitted.id);
      live_.erase(submitted.public_id);
    }
    cv_.notify_all();
    if (sink != nullptr) sink->OnError(s);
    return;
  }
  stream->timing().submit_ns = submitted.submit_ns;
  streams_.emplace(submitted.id, std::move(stream));
}

void Engine::RecordScheduled(const StepPlan& plan, int64_t start_ns) {
  for (const NewSequenceData& s : plan.new_sequences) {
    auto it = streams_.find(s.request_id);
    if (it == streams_.end()) continue;
    RequestStream::Timing& t = it->second->timing();
    if (t.scheduled) continue;
    t.scheduled = true;
    options_.metrics->RecordQueueTime((start_ns - t.submit_ns) * kNanos);
  }
}

void Engine::RecordOutput(RequestStream& stream, const RequestOutput& output, int64_t now_ns) {
  RequestStream::Timing& t = stream.timing();
  for (const SequenceOutput& s : output.sequences) {
    if (s.token_ids.empty()) continue;
    if (t.last_output_ns < 0) {
      options_.metrics->RecordFirstToken((now_ns - t.submit_ns) * kNanos);
    } else {
      options_.metrics->RecordInterToken((now_ns - t.last_output_ns) * kNanos);
    }
    t.last_output_ns = now_ns;
    break;
  }
  if (stream.finished()) {
    options_.metrics->RecordFinished(stream.finish_reason(), (now_ns - t.submit_ns) * kNanos);
  }
}

void Engine::Deliver(const RequestOutput& output, int64_t now_ns,
                     std::vector<StoppedByText>* stopped) {
  auto it = streams_.find(output.request_id);
  if (it == streams_.end()) return;
  RequestStream& stream = *it->second;
  RequestStream::Stopped stops;
  std::vector<v1::GenerateResponse> messages = stream.Consume(output, &stops);
  if (options_.metrics != nullptr) RecordOutput(stream, output, now_ns);
  // Stop strings ended sequences (or all of them): the caller frees their
  // blocks once the step in flight is back; the stream ended them already.
  if (stops.request) stopped->push_back({output.request_id, -1});
  for (int32_t index : stops.sequences) stopped->push_back({output.request_id, index});
  std::shared_ptr<GenerateSink> sink;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto s = sinks_.find(output.request_id);
    if (s != sinks_.end()) sink = s->second;
    if (stream.finished()) {
      // Forget before sending: a client may reuse the id once it sees Finished.
      sinks_.erase(output.request_id);
      live_.erase(stream.request_id());
    }
  }
  if (sink != nullptr) {
    for (v1::GenerateResponse& m : messages) sink->OnResponse(std::move(m));
  }
  if (stream.finished()) {
    streams_.erase(it);
    cv_.notify_all();
  }
}

void Engine::FailAll(const absl::Status& status) {
  absl::flat_hash_map<RequestId, std::shared_ptr<GenerateSink>> sinks;
  std::vector<Submitted> inbox;
  {
    std::lock_guard<std::mutex> lock(mu_);
    failure_ = status;
    sinks.swap(sinks_);
    inbox.swap(inbox_);
    in_inbox_ = {};
    live_.clear();
  }
  if (options_.on_failure) options_.on_failure(status);
  const int64_t now_ns = NowNanos();
  for (auto& [id, stream] : streams_) {
    auto s = sinks.find(id);
    std::vector<v1::GenerateResponse> last = stream->Fail(std::string(status.message()));
    if (options_.metrics != nullptr) {
      options_.metrics->RecordFinished(FinishReason::kError,
                                       (now_ns - stream->timing().submit_ns) * kNanos);
    }
    if (s != sinks.end()) {
      for (v1::GenerateResponse& m : last) s->second->OnResponse(std::move(m));
    }
  }
  if (options_.metrics != nullptr) options_.metrics->Flush(/*force=*/true);
  for (Submitted& submitted : inbox) {
    auto s = sinks.find(submitted.id);
    if (s != sinks.end()) {
      s->second->OnError(absl::UnavailableError(absl::StrCat("the engine has stopped: ", status.message())));
    }
  }
  streams_.clear();
  PublishSnapshot();
}

bool Engine::RecoverWorkers(const absl::Status& cause, std::vector<StoppedByText>* stopped) {
  const absl::Status failure(cause.code(), absl::StrCat("worker step failed: ", cause.message()));
  if (!workers_->CanRebuild()) {
    FailAll(failure);
    return false;
  }
  const bool fail = options_.on_worker_failure == WorkerFailurePolicy::kFail;
  std::fprintf(stderr,
               "folio-scheduler: the worker group failed (%s); %s %d running and %d swapped "
               "request(s), rebuilding the group\n",
               std::string(cause.message()).c_str(), fail ? "failing" : "requeueing",
               scheduler_->num_running(), scheduler_->num_swapped());
  {
    std::lock_guard<std::mutex> lock(mu_);
    rebuilding_ = true;
  }
  if (options_.on_serving_changed) options_.on_serving_changed(false, failure);
  scheduler_->RequeueAfterWorkerLoss(fail ? 0 : options_.max_requeues,
                                     std::string(failure.message()));
  if (options_.metrics != nullptr) options_.metrics->RecordWorkerFailure();
  DeliverBetweenSteps(stopped);
  return true;
}

void Engine::DeliverBetweenSteps(std::vector<StoppedByText>* stopped) {
  const int64_t now_ns = NowNanos();
  for (const RequestOutput& output : scheduler_->TakePendingOutputs()) {
    Deliver(output, now_ns, stopped);
  }
  if (options_.metrics != nullptr) options_.metrics->Flush(/*force=*/true);
  PublishSnapshot();
}

bool Engine::RebuildWorkers() {
  const absl::Time start = absl::Now();
  absl::Duration backoff = options_.rebuild_backoff_initial;
  std::vector<StoppedByText> stopped;  // nothing streams while rebuilding
  std::string last_error;
  for (int attempt = 1;; ++attempt) {
    // Requests keep arriving and leaving: queue them, end the aborted ones.
    const bool go_on = TakeWork(/*wait=*/false);
    DeliverBetweenSteps(&stopped);
    if (!go_on) return false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return false;
    }
    absl::Status s = workers_->Rebuild();
    if (s.ok()) break;
    if (std::string(s.message()) != last_error) {  // once per new reason, not per attempt
      last_error = std::string(s.message());
      std::fprintf(stderr, "folio-scheduler: rebuilding the worker group (attempt %d): %s\n",
                   attempt, last_error.c_str());
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, absl::ToChronoNanoseconds(backoff), [&] {
      return stopping_ || !aborts_.empty();
    });
    backoff = std::min(backoff * 2, options_.rebuild_backoff_max);
  }
  std::fprintf(stderr, "folio-scheduler: the worker group is rebuilt (%s); serving again\n",
               absl::FormatDuration(absl::Trunc(absl::Now() - start, absl::Milliseconds(1))).c_str());
  {
    std::lock_guard<std::mutex> lock(mu_);
    rebuilding_ = false;
  }
  if (options_.on_serving_changed) options_.on_serving_changed(true, absl::OkStatus());
  return true;
}

void Engine::PublishSnapshot() {
  EngineSnapshot snap;
  snap.num_steps = scheduler_->stats().num_steps;
  snap.num_running = scheduler_->num_running();
  snap.num_waiting = scheduler_->num_waiting();
  snap.num_waiting_tokens = scheduler_->num_waiting_tokens();
  snap.num_swapped = scheduler_->num_swapped();
  snap.num_free_device_blocks = scheduler_->kv_cache().device_pool().num_free_blocks();
  snap.num_free_host_blocks = scheduler_->kv_cache().host_pool().num_free_blocks();
  snap.num_preemptions = scheduler_->stats().num_preemptions_recompute +
                         scheduler_->stats().num_preemptions_swap;
  {
    std::lock_guard<std::mutex> lock(mu_);
    snap.num_live_requests = static_cast<int32_t>(live_.size());
    snapshot_ = snap;
    moved_since_snapshot_ = {};  // the scheduler's counts now include them
  }
  cv_.notify_all();
}

v1::ModelInfo Engine::ModelInfo() const {
  const SchedulerConfig& c = options_.scheduler;
  v1::ModelInfo info;
  info.set_model_name(options_.model_name);
  info.set_max_model_len(static_cast<uint32_t>(c.max_model_len));
  info.set_block_size(static_cast<uint32_t>(c.block_size));
  info.set_num_device_blocks(static_cast<uint32_t>(c.num_device_blocks));
  info.set_num_host_blocks(static_cast<uint32_t>(c.num_host_blocks));
  info.set_kv_token_capacity(static_cast<uint64_t>(c.num_device_blocks) * c.block_size);
  info.set_tensor_parallel_size(static_cast<uint32_t>(options_.tensor_parallel_size));
  info.set_vocab_size(static_cast<uint32_t>(limits_.vocab_size));
  info.set_prefix_caching(c.enable_prefix_caching);
  info.set_host_prefix_cache(Scheduler::KvCacheOptions(c).host_tier_enabled());
  info.set_kv_cache_dtype(options_.kv_cache_dtype);
  return info;
}

std::vector<TokenId> Engine::Tokenize(const std::string& text, bool add_special_tokens) const {
  return tokenizer_->EncodePrompt(text, add_special_tokens);
}

absl::StatusOr<std::string> Engine::Detokenize(std::span<const TokenId> ids,
                                               bool skip_special_tokens) const {
  if (absl::Status s = CheckTokenIds(ids, limits_.vocab_size, "token_ids"); !s.ok()) return s;
  return tokenizer_->Decode(ids, skip_special_tokens);
}

bool Engine::FailureFree() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_.ok();
}

bool Engine::healthy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_.ok() && !stopping_ && !rebuilding_ && !draining_;
}

EngineSnapshot Engine::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return snapshot_;
}

absl::Status Engine::CheckDrained() const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) return absl::FailedPreconditionError("CheckDrained needs Shutdown() first");
  }
  if (!FailureFree()) return absl::OkStatus();
  const BlockPool& device = scheduler_->kv_cache().device_pool();
  const BlockPool& host = scheduler_->kv_cache().host_pool();
  if (device.num_free_blocks() != device.num_blocks() || host.num_free_blocks() != host.num_blocks()) {
    return absl::InternalError(absl::StrCat(
        "KV blocks leaked: ", device.num_used_blocks(), " device and ", host.num_used_blocks(),
        " host blocks still in use with no request left"));
  }
  return scheduler_->CheckInvariants();
}

bool Engine::WaitIdle(absl::Duration timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] {
    return live_.empty() && snapshot_.num_live_requests == 0;  // and the step's figures are out
  });
}

}  // namespace folio
