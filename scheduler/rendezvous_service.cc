#include "scheduler/rendezvous_service.h"

#include <algorithm>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/support/time.h"

namespace folio {
namespace {

// Blocked calls wake at least this often to notice a cancelled client.
constexpr absl::Duration kCancelPoll = absl::Milliseconds(50);

grpc::Status CheckKey(const std::string& key) {
  if (key.empty()) return {grpc::StatusCode::INVALID_ARGUMENT, "key is empty"};
  if (key.size() > RendezvousService::kMaxKeyBytes) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            absl::StrCat("key is ", key.size(), " bytes; the limit is ",
                         RendezvousService::kMaxKeyBytes)};
  }
  return grpc::Status::OK;
}

absl::Time Deadline(const grpc::ServerContext* context) {
  const gpr_timespec d =
      gpr_convert_clock_type(context->raw_deadline(), GPR_CLOCK_REALTIME);
  if (gpr_time_cmp(d, gpr_inf_future(GPR_CLOCK_REALTIME)) == 0) return absl::InfiniteFuture();
  return absl::FromUnixNanos(static_cast<int64_t>(d.tv_sec) * 1000000000 + d.tv_nsec);
}

grpc::Status Abandoned(const std::string& prefix) {
  return {grpc::StatusCode::ABORTED,
          absl::StrCat("the group meeting under '", prefix,
                       "' was abandoned (a rank failed while it formed); the scheduler forms "
                       "a new one")};
}

}  // namespace

grpc::Status RendezvousService::Set(grpc::ServerContext* context,
                                    const v1::RendezvousSetRequest* request,
                                    v1::RendezvousSetResponse* response) {
  if (grpc::Status s = CheckKey(request->key()); !s.ok()) return s;
  if (request->value().size() > kMaxValueBytes) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            absl::StrCat("value is ", request->value().size(), " bytes; the limit is ",
                         kMaxValueBytes)};
  }
  absl::MutexLock lock(&mu_);
  if (shutdown_) return {grpc::StatusCode::UNAVAILABLE, "rendezvous is shutting down"};
  if (const std::string* abandoned = AbandonedPrefixOf(request->key())) return Abandoned(*abandoned);
  auto it = kv_.find(request->key());
  if (it != kv_.end()) {
    it->second = request->value();
    return grpc::Status::OK;
  }
  if (kv_.size() >= kMaxKeys) {
    return {grpc::StatusCode::RESOURCE_EXHAUSTED,
            absl::StrCat("rendezvous holds ", kv_.size(), " keys already")};
  }
  kv_.emplace(request->key(), request->value());
  return grpc::Status::OK;
}

template <typename Keys>
grpc::Status RendezvousService::AwaitKeys(grpc::ServerContext* context, const Keys& keys) {
  for (const auto& key : keys) {
    if (grpc::Status s = CheckKey(key); !s.ok()) return s;
  }
  const absl::Time deadline = Deadline(context);
  const std::string* abandoned = nullptr;
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (shutdown_) return true;
    for (const auto& key : keys) {
      if ((abandoned = AbandonedPrefixOf(key)) != nullptr) return true;
    }
    for (const auto& key : keys) {
      if (!kv_.contains(key)) return false;
    }
    return true;
  };
  mu_.AssertHeld();
  while (true) {
    const absl::Time wake = std::min(deadline, absl::Now() + kCancelPoll);
    if (mu_.AwaitWithDeadline(absl::Condition(&ready), wake)) break;
    if (context->IsCancelled()) return {grpc::StatusCode::CANCELLED, "client cancelled"};
    if (absl::Now() >= deadline) {
      std::string missing;
      for (const auto& key : keys) {
        if (!kv_.contains(key)) absl::StrAppend(&missing, missing.empty() ? "" : ", ", key);
      }
      return {grpc::StatusCode::DEADLINE_EXCEEDED,
              absl::StrCat("rendezvous keys not set before the deadline: ", missing)};
    }
  }
  if (shutdown_) return {grpc::StatusCode::UNAVAILABLE, "rendezvous is shutting down"};
  if (abandoned != nullptr) return Abandoned(*abandoned);
  return grpc::Status::OK;
}

grpc::Status RendezvousService::Get(grpc::ServerContext* context,
                                    const v1::RendezvousGetRequest* request,
                                    v1::RendezvousGetResponse* response) {
  absl::MutexLock lock(&mu_);
  const std::vector<std::string> keys = {request->key()};
  if (grpc::Status s = AwaitKeys(context, keys); !s.ok()) return s;
  response->set_value(kv_.at(request->key()));
  return grpc::Status::OK;
}

grpc::Status RendezvousService::Wait(grpc::ServerContext* context,
                                     const v1::RendezvousWaitRequest* request,
                                     v1::RendezvousWaitResponse* response) {
  absl::MutexLock lock(&mu_);
  return AwaitKeys(context, request->keys());
}

void RendezvousService::Shutdown() {
  absl::MutexLock lock(&mu_);
  shutdown_ = true;
}

const std::string* RendezvousService::AbandonedPrefixOf(const std::string& key) const {
  for (const std::string& prefix : abandoned_) {
    if (absl::StartsWith(key, prefix)) return &prefix;
  }
  return nullptr;
}

void RendezvousService::Abandon(const std::string& prefix) {
  absl::MutexLock lock(&mu_);
  absl::erase_if(kv_, [&](const auto& kv) { return absl::StartsWith(kv.first, prefix); });
  if (AbandonedPrefixOf(prefix) == nullptr) abandoned_.push_back(prefix);
}

void RendezvousService::EraseWithPrefix(const std::string& prefix) {
  absl::MutexLock lock(&mu_);
  absl::erase_if(kv_, [&](const auto& kv) { return absl::StartsWith(kv.first, prefix); });
}

size_t RendezvousService::size() const {
  absl::MutexLock lock(&mu_);
  return kv_.size();
}

}  // namespace folio
