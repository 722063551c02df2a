#include "scheduler/server/remote_worker_group.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <limits>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/plan_proto.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

namespace folio {
namespace {

absl::Status FromGrpc(const grpc::Status& s, const std::string& context) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat(context, ": ", s.error_message()));
}

std::chrono::system_clock::time_point Deadline(absl::Duration timeout) {
  return absl::ToChronoTime(absl::Now() + timeout);
}

// Runs fn(r) for every rank on its own thread; the first error wins.
template <typename Fn>
absl::Status ForEachRank(size_t n, Fn fn) {
  std::vector<absl::Status> results(n);
  std::vector<std::thread> threads;
  for (size_t r = 0; r < n; ++r) threads.emplace_back([&, r] { results[r] = fn(r); });
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : results) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<RemoteWorkerGroup>> RemoteWorkerGroup::Connect(
    const Options& options) {
  if (options.addresses.empty()) return absl::InvalidArgumentError("no worker addresses");
  std::unique_ptr<RemoteWorkerGroup> group(new RemoteWorkerGroup(options));
  if (absl::Status s = group->Start(); !s.ok()) return s;
  return group;
}

absl::Status RemoteWorkerGroup::Start() {
  const size_t n = options_.addresses.size();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options_.max_message_bytes);
  args.SetMaxSendMessageSize(options_.max_message_bytes);
  // Workers start alongside the scheduler (and again after a crash): retry
  // the connection quickly rather than with gRPC's default backoff (1 s
  // growing to 120 s).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  ranks_.resize(n);
  for (size_t r = 0; r < n; ++r) {
    ranks_[r].address = options_.addresses[r];
    ranks_[r].channel = grpc::CreateCustomChannel(options_.addresses[r],
                                                  grpc::InsecureChannelCredentials(), args);
    if (!ranks_[r].channel->WaitForConnected(Deadline(options_.connect_timeout))) {
      return absl::UnavailableError(absl::StrCat("worker rank ", r, " at ", options_.addresses[r],
                                                 ": not reachable within ",
                                                 absl::FormatDuration(options_.connect_timeout)));
    }
    ranks_[r].stub = v1::Worker::NewStub(ranks_[r].channel);
  }

  absl::StatusOr<std::vector<v1::InitializeResponse>> init = InitializeAll(Generation(0));
  if (!init.ok()) return init.status();
  num_device_blocks_ = INT32_MAX;
  num_host_blocks_ = INT32_MAX;
  for (const v1::InitializeResponse& resp : *init) {
    num_device_blocks_ = std::min<int32_t>(num_device_blocks_, static_cast<int32_t>(resp.num_device_blocks()));
    num_host_blocks_ = std::min<int32_t>(num_host_blocks_, static_cast<int32_t>(resp.num_host_blocks()));
  }
  if (options_.max_device_blocks > 0) num_device_blocks_ = std::min(num_device_blocks_, options_.max_device_blocks);
  if (options_.max_host_blocks >= 0) num_host_blocks_ = std::min(num_host_blocks_, options_.max_host_blocks);
  vocab_size_ = static_cast<int32_t>((*init)[0].vocab_size());
  block_bytes_ = (*init)[0].block_bytes();
  device_name_ = (*init)[0].device_name();
  kv_cache_dtype_ = (*init)[0].kv_cache_dtype();
  if (num_device_blocks_ <= 0) {
    return absl::ResourceExhaustedError(
        "the KV cache budget holds no block on some worker rank: raise the KV cache memory");
  }
  if (absl::Status s = AllocateAll(); !s.ok()) return s;
  if (absl::Status s = OpenStreams(); !s.ok()) return s;
  forward_seconds_.assign(n, 0.0);
  allreduce_seconds_.assign(n, 0.0);
  return absl::OkStatus();
}

std::string RemoteWorkerGroup::Generation(int32_t generation) const {
  // Distinct and none a prefix of another: abandoning one leaves the rest.
  return absl::StrCat(options_.initialize.rendezvous_prefix(), "g", generation, "/");
}

absl::StatusOr<std::vector<v1::InitializeResponse>> RemoteWorkerGroup::InitializeAll(
    const std::string& rendezvous_prefix) {
  const size_t n = ranks_.size();
  std::vector<v1::InitializeResponse> init(n);
  absl::Status s = ForEachRank(n, [&](size_t r) {
    v1::InitializeRequest request = options_.initialize;
    request.set_rank(static_cast<uint32_t>(r));
    request.set_world_size(static_cast<uint32_t>(n));
    request.set_rendezvous_prefix(rendezvous_prefix);
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(options_.initialize_timeout));
    grpc::Status st = ranks_[r].stub->Initialize(&ctx, request, &init[r]);
    if (st.ok()) return absl::OkStatus();
    // The others may be waiting for this rank in the rendezvous: release them.
    if (options_.abandon_rendezvous && n > 1) options_.abandon_rendezvous(rendezvous_prefix);
    return FromGrpc(st, absl::StrCat("initializing worker rank ", r, " at ", ranks_[r].address));
  });
  if (!s.ok()) return s;
  return init;
}

absl::Status RemoteWorkerGroup::AllocateAll() {
  return ForEachRank(ranks_.size(), [&](size_t r) {
    v1::AllocateCacheRequest request;
    request.set_num_device_blocks(static_cast<uint32_t>(num_device_blocks_));
    request.set_num_host_blocks(static_cast<uint32_t>(num_host_blocks_));
    v1::AllocateCacheResponse response;
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(options_.initialize_timeout));
    grpc::Status st = ranks_[r].stub->AllocateCache(&ctx, request, &response);
    return st.ok() ? absl::OkStatus()
                   : FromGrpc(st, absl::StrCat("allocating the cache on worker rank ", r));
  });
}

absl::Status RemoteWorkerGroup::OpenStreams() {
  // Open every rank's Step stream on the queue and wait for the starts.
  for (size_t r = 0; r < ranks_.size(); ++r) {
    ranks_[r].step_context = std::make_unique<grpc::ClientContext>();
    ranks_[r].step_stream =
        ranks_[r].stub->AsyncStep(ranks_[r].step_context.get(), &cq_, Tag(Op::kStart, r));
    ranks_[r].pending = 1;
  }
  const DrainResult started = Drain(absl::Now() + options_.connect_timeout);
  if (started.timed_out || started.failed_rank >= 0) {
    const size_t r = started.failed_rank >= 0 ? started.failed_rank : 0;
    broken_ = absl::UnavailableError(absl::StrCat("worker rank ", r, " at ", ranks_[r].address,
                                                  ": could not open the Step stream"));
    return broken_;
  }
  return absl::OkStatus();
}

void RemoteWorkerGroup::CloseBrokenStreams() {
  CancelAll();
  grpc::Status ignored;  // the streams are over either way
  for (size_t r = 0; r < ranks_.size(); ++r) {
    Rank& rank = ranks_[r];
    if (rank.step_stream == nullptr) continue;
    rank.step_stream->Finish(&ignored, Tag(Op::kClose, r));
    rank.pending = 1;
  }
  Drain(absl::InfiniteFuture());  // cancelled calls finish promptly
  for (Rank& rank : ranks_) {
    rank.step_stream.reset();
    rank.step_context.reset();
  }
}

absl::Status RemoteWorkerGroup::Rebuild() {
  if (shut_down_) return absl::FailedPreconditionError("the worker group is shut down");
  if (step_in_flight_) return absl::FailedPreconditionError("Rebuild with a step in flight");
  CloseBrokenStreams();
  broken_ = absl::UnavailableError("the worker group is being rebuilt");
  for (size_t r = 0; r < ranks_.size(); ++r) {
    if (!ranks_[r].channel->WaitForConnected(Deadline(options_.reconnect_timeout))) {
      return absl::UnavailableError(absl::StrCat("worker rank ", r, " at ", ranks_[r].address,
                                                 ": not reachable"));
    }
  }
  // A fresh prefix per generation; the old one is given up.
  if (options_.abandon_rendezvous && ranks_.size() > 1) {
    options_.abandon_rendezvous(Generation(generation_));
  }
  ++generation_;
  absl::StatusOr<std::vector<v1::InitializeResponse>> init = InitializeAll(Generation(generation_));
  if (!init.ok()) return init.status();
  for (size_t r = 0; r < ranks_.size(); ++r) {
    const v1::InitializeResponse& resp = (*init)[r];
    std::string why;
    if (static_cast<int32_t>(resp.vocab_size()) != vocab_size_ || resp.block_bytes() != block_bytes_) {
      why = absl::StrCat("another model or tensor-parallel layout (vocab ", resp.vocab_size(),
                         ", ", resp.block_bytes(), " bytes per block; the group serves vocab ",
                         vocab_size_, ", ", block_bytes_, ")");
    } else if (static_cast<int32_t>(resp.num_device_blocks()) < num_device_blocks_ ||
               static_cast<int32_t>(resp.num_host_blocks()) < num_host_blocks_) {
      why = absl::StrCat("room for ", resp.num_device_blocks(), " device and ",
                         resp.num_host_blocks(), " host blocks; the scheduler's pools hold ",
                         num_device_blocks_, " and ", num_host_blocks_);
    }
    if (!why.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "worker rank ", r, " at ", ranks_[r].address, " came back with ", why, ": refused"));
    }
  }
  if (absl::Status s = AllocateAll(); !s.ok()) return s;
  broken_ = absl::OkStatus();
  if (absl::Status s = OpenStreams(); !s.ok()) return s;
  return WarmUp();
}

absl::Status RemoteWorkerGroup::WarmUp() {
  // One token through the whole model into block 0 (free: every sequence
  // was preempted), then the sequence dropped again.
  constexpr SequenceId kWarmUpSequence = std::numeric_limits<SequenceId>::max();
  StepPlan plan;
  NewSequenceData& seq = plan.new_sequences.emplace_back();
  seq.seq_id = kWarmUpSequence;
  seq.prompt_token_ids = {0};
  seq.block_ids = {0};
  seq.sampling.temperature = 0.0f;
  ScheduledSequence& work = plan.scheduled.emplace_back();
  work.seq_id = kWarmUpSequence;
  work.token_ids = {0};
  work.sample_mode = SampleMode::kSample;
  work.num_samples = 1;
  plan.num_scheduled_tokens = 1;
  absl::StatusOr<StepResult> result = Execute(plan);
  if (!result.ok()) return result.status();
  StepPlan drop;
  drop.finished_seq_ids = {kWarmUpSequence};
  return Execute(drop).status();
}

absl::Status RemoteWorkerGroup::CheckHealth() {
  if (!broken_.ok()) return broken_;
  // grpc.health.v1.Health/Check with an empty HealthCheckRequest (service
  // ""), whose serialized form is empty; SERVING comes back as field 1 = 1.
  const absl::Duration timeout = options_.step_timeout_min / 2;
  return ForEachRank(ranks_.size(), [&](size_t r) {
    grpc::GenericStub stub(ranks_[r].channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(timeout));
    grpc::Slice empty;
    grpc::ByteBuffer request(&empty, 1), response;  // a default ByteBuffer is no message
    std::promise<grpc::Status> done;
    stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request,
                   &response, [&](grpc::Status st) { done.set_value(std::move(st)); });
    const grpc::Status st = done.get_future().get();
    std::vector<grpc::Slice> slices;
    std::string body;
    if (st.ok() && response.Dump(&slices).ok()) {
      for (const grpc::Slice& slice : slices) {
        body.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
      }
    }
    if (st.ok() && body == std::string("\x08\x01", 2)) return absl::OkStatus();
    return absl::UnavailableError(absl::StrCat(
        "worker rank ", r, " at ", ranks_[r].address, ": health check failed: ",
        st.ok() ? "not serving" : st.error_message()));
  });
}

void RemoteWorkerGroup::RecordStepTime(double seconds, int64_t tokens) {
  const double per_token = seconds / static_cast<double>(std::max<int64_t>(tokens, 1));
  if (recent_step_seconds_.size() < kStepHistory) {
    recent_step_seconds_.push_back(seconds);
    recent_seconds_per_token_.push_back(per_token);
    return;
  }
  recent_step_seconds_[next_history_] = seconds;
  recent_seconds_per_token_[next_history_] = per_token;
  next_history_ = (next_history_ + 1) % kStepHistory;
}

absl::Duration RemoteWorkerGroup::StepTimeout(const StepPlan& plan) const {
  constexpr size_t kMinMeasured = 4;  // before that: the ceiling
  if (recent_step_seconds_.size() < kMinMeasured) return options_.step_timeout;
  int64_t prefill_tokens = 0;
  for (const ScheduledSequence& s : plan.scheduled) {
    prefill_tokens += static_cast<int64_t>(s.token_ids.size()) - 1;
  }
  const double k = options_.step_timeout_multiple;
  const double slowest = *std::max_element(recent_step_seconds_.begin(), recent_step_seconds_.end());
  const double per_token =
      *std::max_element(recent_seconds_per_token_.begin(), recent_seconds_per_token_.end());
  const absl::Duration timeout =
      std::max(options_.step_timeout_min, absl::Seconds(k * slowest)) +
      absl::Seconds(k * per_token * static_cast<double>(prefill_tokens));
  return std::min(timeout, options_.step_timeout);
}

RemoteWorkerGroup::~RemoteWorkerGroup() { Shutdown(); }

void* RemoteWorkerGroup::Tag(Op op, size_t rank) {
  return reinterpret_cast<void*>((static_cast<uintptr_t>(rank) << 2) | static_cast<uintptr_t>(op));
}

void RemoteWorkerGroup::CancelAll(int except_rank) {
  for (size_t r = 0; r < ranks_.size(); ++r) {
    if (static_cast<int>(r) != except_rank && ranks_[r].step_context != nullptr) {
      ranks_[r].step_context->TryCancel();
    }
  }
}

RemoteWorkerGroup::DrainResult RemoteWorkerGroup::Drain(absl::Time deadline) {
  DrainResult result;
  int pending = 0;
  for (const Rank& rank : ranks_) pending += rank.pending;
  bool cancelled = false;
  while (pending > 0) {
    void* tag = nullptr;
    bool ok = false;
    // After a cancellation the outstanding operations complete on their own.
    const auto wait_until = cancelled ? std::chrono::system_clock::time_point::max()
                                      : absl::ToChronoTime(deadline);
    const grpc::CompletionQueue::NextStatus next = cq_.AsyncNext(&tag, &ok, wait_until);
    if (next == grpc::CompletionQueue::TIMEOUT) {
      result.timed_out = true;
      cancelled = true;
      CancelAll();
      continue;
    }
    if (next == grpc::CompletionQueue::SHUTDOWN) break;  // not reached: we own the queue
    const auto bits = reinterpret_cast<uintptr_t>(tag);
    const size_t r = bits >> 2;
    const Op op = static_cast<Op>(bits & 3);
    --ranks_[r].pending;
    --pending;
    if (!ok && result.failed_rank < 0 && !result.timed_out) {
      // Rank r's stream is gone (the process died, or its call ended). The
      // others may wait on it in a collective: stop them rather than wait.
      result.failed_rank = static_cast<int>(r);
      result.failed_op = op;
      cancelled = true;
      CancelAll(/*except_rank=*/static_cast<int>(r));
    }
  }
  return result;
}

absl::Status RemoteWorkerGroup::BrokenStream(size_t r, Op op) {
  Rank& rank = ranks_[r];
  grpc::Status st;
  rank.step_stream->Finish(&st, Tag(Op::kClose, r));
  rank.pending = 1;
  Drain(absl::InfiniteFuture());  // the call is over: Finish completes at once
  rank.step_stream.reset();       // finished: Shutdown must not touch it again
  const char* what = op == Op::kWrite ? "sending the plan failed" : "no result";
  return absl::UnavailableError(absl::StrCat("worker rank ", r, " at ", rank.address, ": ", what,
                                             ": ", st.error_message()));
}

absl::StatusOr<StepResult> RemoteWorkerGroup::Execute(const StepPlan& plan) {
  if (absl::Status s = Begin(plan); !s.ok()) return s;
  return Wait();
}

absl::Status RemoteWorkerGroup::Begin(const StepPlan& plan) {
  if (shut_down_) return absl::FailedPreconditionError("the worker group is shut down");
  if (!broken_.ok()) return broken_;
  if (step_in_flight_) return absl::FailedPreconditionError("a step is in flight already");
  v1::StepPlan proto;
  ToProto(plan, &proto);
  // Every rank's write and read in flight at once; gRPC serializes the plan
  // once per Write (the message is copied, so `proto` may go), which is
  // cheap next to a network hop.
  for (size_t r = 0; r < ranks_.size(); ++r) {
    Rank& rank = ranks_[r];
    rank.reply.Clear();
    rank.step_stream->Write(proto, Tag(Op::kWrite, r));
    rank.step_stream->Read(&rank.reply, Tag(Op::kRead, r));
    rank.pending = 2;
  }
  step_in_flight_ = true;
  begun_step_id_ = plan.step_id;
  begun_at_ = absl::Now();
  begun_tokens_ = plan.num_scheduled_tokens;
  begun_timeout_ = StepTimeout(plan);
  begun_deadline_ = begun_at_ + begun_timeout_;
  return absl::OkStatus();
}

absl::StatusOr<StepResult> RemoteWorkerGroup::Wait() {
  if (!step_in_flight_) return absl::FailedPreconditionError("Wait without Begin");
  step_in_flight_ = false;
  const uint64_t step_id = begun_step_id_;
  const DrainResult done = Drain(begun_deadline_);
  if (done.timed_out) {
    broken_ = absl::DeadlineExceededError(
        absl::StrCat("a worker rank did not finish step ", step_id, " within ",
                     absl::FormatDuration(begun_timeout_), " (its deadline; ", ranks_.size(),
                     " rank(s), first at ", ranks_[0].address, ")"));
    return broken_;
  }
  if (done.failed_rank >= 0) {
    broken_ = BrokenStream(done.failed_rank, done.failed_op);
    return broken_;
  }

  RecordStepTime(absl::ToDoubleSeconds(absl::Now() - begun_at_), begun_tokens_);
  // Every rank answered: check them all before trusting rank 0's samples.
  StepResult result;
  for (size_t r = 0; r < ranks_.size(); ++r) {
    const v1::StepResult& reply = ranks_[r].reply;
    if (absl::Status st = FromProto(reply.status()); !st.ok()) {
      return absl::Status(st.code(), absl::StrCat("worker rank ", r, " failed step ",
                                                  step_id, ": ", st.message()));
    }
    if (reply.step_id() != step_id) {
      broken_ = absl::InternalError(absl::StrCat("worker rank ", r, " answered step ",
                                                 reply.step_id(), " to plan ", step_id));
      return broken_;
    }
    forward_seconds_[r] = reply.forward_seconds();
    allreduce_seconds_[r] = reply.allreduce_seconds();
  }
  if (absl::Status st = FromProto(ranks_[0].reply, &result); !st.ok()) {
    return absl::Status(st.code(), absl::StrCat("worker rank 0 result: ", st.message()));
  }
  return result;
}

void RemoteWorkerGroup::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  // End the streams cleanly where they still work (the workers see the end
  // of the stream and answer OK); a stream that does not finish within
  // `grace` is cancelled. Every operation is drained before the queue goes.
  const bool healthy = broken_.ok();
  for (size_t r = 0; r < ranks_.size(); ++r) {
    Rank& rank = ranks_[r];
    if (rank.step_stream == nullptr || rank.pending > 0) continue;
    if (healthy) {
      rank.step_stream->WritesDone(Tag(Op::kClose, r));
      rank.pending = 1;
    }
  }
  Drain(absl::Now() + grace);
  grpc::Status finish_status;  // ignored: the streams are over either way
  for (size_t r = 0; r < ranks_.size(); ++r) {
    Rank& rank = ranks_[r];
    if (rank.step_stream == nullptr) continue;
    rank.step_stream->Finish(&finish_status, Tag(Op::kClose, r));
    rank.pending = 1;
  }
  Drain(absl::Now() + grace);
  for (Rank& rank : ranks_) rank.step_stream.reset();
  cq_.Shutdown();
  void* tag;
  bool ok;
  while (cq_.Next(&tag, &ok)) {
  }

  ForEachRank(ranks_.size(), [&](size_t r) {
    if (ranks_[r].stub == nullptr) return absl::OkStatus();
    v1::ShutdownRequest request;
    request.set_grace_seconds(static_cast<float>(absl::ToDoubleSeconds(grace)));
    v1::ShutdownResponse response;
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(grace));
    (void)ranks_[r].stub->Shutdown(&ctx, request, &response);
    return absl::OkStatus();
  }).IgnoreError();
}

}  // namespace folio
