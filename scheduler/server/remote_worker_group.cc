#include "scheduler/server/remote_worker_group.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/plan_proto.h"
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
  // Workers start alongside the scheduler: retry the connection quickly
  // rather than with gRPC's default backoff (1 s growing to 120 s).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  ranks_.resize(n);
  for (size_t r = 0; r < n; ++r) {
    ranks_[r].address = options_.addresses[r];
    auto channel = grpc::CreateCustomChannel(options_.addresses[r],
                                             grpc::InsecureChannelCredentials(), args);
    if (!channel->WaitForConnected(Deadline(options_.connect_timeout))) {
      return absl::UnavailableError(absl::StrCat("worker rank ", r, " at ", options_.addresses[r],
                                                 ": not reachable within ",
                                                 absl::FormatDuration(options_.connect_timeout)));
    }
    ranks_[r].stub = v1::Worker::NewStub(channel);
  }

  // All ranks at once: they meet in the collective group during Initialize.
  std::vector<v1::InitializeResponse> init(n);
  absl::Status s = ForEachRank(n, [&](size_t r) {
    v1::InitializeRequest request = options_.initialize;
    request.set_rank(static_cast<uint32_t>(r));
    request.set_world_size(static_cast<uint32_t>(n));
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(options_.initialize_timeout));
    grpc::Status st = ranks_[r].stub->Initialize(&ctx, request, &init[r]);
    return st.ok() ? absl::OkStatus()
                   : FromGrpc(st, absl::StrCat("initializing worker rank ", r, " at ", ranks_[r].address));
  });
  if (!s.ok()) return s;

  num_device_blocks_ = INT32_MAX;
  num_host_blocks_ = INT32_MAX;
  for (const v1::InitializeResponse& resp : init) {
    num_device_blocks_ = std::min<int32_t>(num_device_blocks_, static_cast<int32_t>(resp.num_device_blocks()));
    num_host_blocks_ = std::min<int32_t>(num_host_blocks_, static_cast<int32_t>(resp.num_host_blocks()));
  }
  if (options_.max_device_blocks > 0) num_device_blocks_ = std::min(num_device_blocks_, options_.max_device_blocks);
  if (options_.max_host_blocks >= 0) num_host_blocks_ = std::min(num_host_blocks_, options_.max_host_blocks);
  vocab_size_ = static_cast<int32_t>(init[0].vocab_size());
  device_name_ = init[0].device_name();
  if (num_device_blocks_ <= 0) {
    return absl::ResourceExhaustedError(
        "the KV cache budget holds no block on some worker rank: raise the KV cache memory");
  }

  s = ForEachRank(n, [&](size_t r) {
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
  if (!s.ok()) return s;

  // Open every rank's Step stream on the queue and wait for the starts.
  for (size_t r = 0; r < n; ++r) {
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
  forward_seconds_.assign(n, 0.0);
  allreduce_seconds_.assign(n, 0.0);
  return absl::OkStatus();
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
  begun_deadline_ = absl::Now() + options_.step_timeout;
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
                     absl::FormatDuration(options_.step_timeout), " (",
                     ranks_.size(), " ranks, first at ", ranks_[0].address, ")"));
    return broken_;
  }
  if (done.failed_rank >= 0) {
    broken_ = BrokenStream(done.failed_rank, done.failed_op);
    return broken_;
  }

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
