#include "scheduler/server/remote_worker_group.h"

#include <algorithm>

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

  for (Rank& rank : ranks_) {
    rank.step_context = std::make_unique<grpc::ClientContext>();
    rank.step_stream = rank.stub->Step(rank.step_context.get());
  }
  forward_seconds_.assign(n, 0.0);
  allreduce_seconds_.assign(n, 0.0);
  watchdog_ = std::thread([this] { Watchdog(); });
  return absl::OkStatus();
}

RemoteWorkerGroup::~RemoteWorkerGroup() { Shutdown(); }

void RemoteWorkerGroup::Watchdog() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_watchdog_) {
    if (absl::Now() >= step_deadline_) {
      timed_out_ = true;
      step_deadline_ = absl::InfiniteFuture();
      for (Rank& rank : ranks_) rank.step_context->TryCancel();
    }
    if (step_deadline_ == absl::InfiniteFuture()) {
      cv_.wait(lock);
    } else {
      cv_.wait_until(lock, absl::ToChronoTime(step_deadline_));
    }
  }
}

absl::Status RemoteWorkerGroup::StreamError(size_t r, const char* what) {
  bool timed_out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    timed_out = timed_out_;
  }
  if (timed_out) {
    return absl::DeadlineExceededError(absl::StrCat("worker rank ", r, " at ", ranks_[r].address,
                                                    ": step took longer than ",
                                                    absl::FormatDuration(options_.step_timeout)));
  }
  ranks_[r].step_context->TryCancel();
  grpc::Status st = ranks_[r].step_stream->Finish();
  return absl::UnavailableError(absl::StrCat("worker rank ", r, " at ", ranks_[r].address, ": ",
                                             what, ": ", st.error_message()));
}

absl::StatusOr<StepResult> RemoteWorkerGroup::Execute(const StepPlan& plan) {
  if (shut_down_) return absl::FailedPreconditionError("the worker group is shut down");
  v1::StepPlan proto;
  ToProto(plan, &proto);
  {
    std::lock_guard<std::mutex> lock(mu_);
    step_deadline_ = absl::Now() + options_.step_timeout;
  }
  cv_.notify_all();
  auto disarm = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    step_deadline_ = absl::InfiniteFuture();
  };

  for (size_t r = 0; r < ranks_.size(); ++r) {
    if (!ranks_[r].step_stream->Write(proto)) {
      disarm();
      return StreamError(r, "sending the plan failed");
    }
  }
  StepResult result;
  for (size_t r = 0; r < ranks_.size(); ++r) {
    v1::StepResult reply;
    if (!ranks_[r].step_stream->Read(&reply)) {
      disarm();
      return StreamError(r, "no result");
    }
    if (absl::Status st = FromProto(reply.status()); !st.ok()) {
      disarm();
      return absl::Status(st.code(), absl::StrCat("worker rank ", r, " failed step ",
                                                  plan.step_id, ": ", st.message()));
    }
    if (reply.step_id() != plan.step_id) {
      disarm();
      return absl::InternalError(absl::StrCat("worker rank ", r, " answered step ",
                                              reply.step_id(), " to plan ", plan.step_id));
    }
    forward_seconds_[r] = reply.forward_seconds();
    allreduce_seconds_[r] = reply.allreduce_seconds();
    if (r == 0) {
      if (absl::Status st = FromProto(reply, &result); !st.ok()) {
        disarm();
        return absl::Status(st.code(), absl::StrCat("worker rank 0 result: ", st.message()));
      }
    }
  }
  disarm();
  return result;
}

void RemoteWorkerGroup::Shutdown(absl::Duration grace) {
  if (shut_down_) return;
  shut_down_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_watchdog_ = true;
  }
  cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  for (Rank& rank : ranks_) {
    if (rank.step_stream != nullptr) {
      rank.step_stream->WritesDone();
      rank.step_context->TryCancel();
      (void)rank.step_stream->Finish();
    }
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
