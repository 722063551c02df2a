#ifndef FOLIO_SCHEDULER_RENDEZVOUS_SERVICE_H_
#define FOLIO_SCHEDULER_RENDEZVOUS_SERVICE_H_

// folio.v1.Rendezvous: the tiny in-memory key-value store the scheduler
// serves so that worker ranks can meet and build their collective group
// (Gloo's store; an NCCL unique id). Keys are opaque; callers prefix them
// per cluster start (InitializeRequest.rendezvous_prefix).
//
// Get and Wait block the calling gRPC thread until the keys are set, the
// call's deadline passes (DEADLINE_EXCEEDED), the client cancels
// (CANCELLED) or Shutdown() is called (UNAVAILABLE). A synchronous service:
// register it on a grpc::ServerBuilder as usual (it can share a server with
// callback services).
//
// Limits: keys up to kMaxKeyBytes, values up to kMaxValueBytes, at most
// kMaxKeys keys (INVALID_ARGUMENT / RESOURCE_EXHAUSTED beyond).
//
// Thread-safe. Must outlive the server it is registered on.

#include <cstddef>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "folio/v1/worker.grpc.pb.h"

namespace folio {

class RendezvousService final : public v1::Rendezvous::Service {
 public:
  static constexpr size_t kMaxKeyBytes = 4096;
  static constexpr size_t kMaxValueBytes = size_t{1} << 20;
  static constexpr size_t kMaxKeys = 1 << 16;

  RendezvousService() = default;
  RendezvousService(const RendezvousService&) = delete;
  RendezvousService& operator=(const RendezvousService&) = delete;

  grpc::Status Set(grpc::ServerContext* context, const v1::RendezvousSetRequest* request,
                   v1::RendezvousSetResponse* response) override;
  grpc::Status Get(grpc::ServerContext* context, const v1::RendezvousGetRequest* request,
                   v1::RendezvousGetResponse* response) override;
  grpc::Status Wait(grpc::ServerContext* context, const v1::RendezvousWaitRequest* request,
                    v1::RendezvousWaitResponse* response) override;

  // Wakes every blocked Get/Wait (they return UNAVAILABLE) and refuses new
  // ones. Call before grpc::Server::Shutdown so that it does not wait for
  // them to time out.
  void Shutdown();

  // Removes every key starting with `prefix` (a finished cluster start).
  void EraseWithPrefix(const std::string& prefix);
  // Gives up the group that meets under `prefix` (a rank failed while it
  // formed, or a newer one replaces it): its keys go, and every Set, Get or
  // Wait of a key under it -- blocked now or later -- answers ABORTED, so
  // the other ranks stop waiting for the lost one.
  void Abandon(const std::string& prefix);
  size_t size() const;

 private:
  // Blocks until every key in `keys` is set; OK, or why not.
  template <typename Keys>
  grpc::Status AwaitKeys(grpc::ServerContext* context, const Keys& keys);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::string> kv_ ABSL_GUARDED_BY(mu_);
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::string> abandoned_ ABSL_GUARDED_BY(mu_);  // prefixes
  // The abandoned prefix `key` starts with, or null.
  const std::string* AbandonedPrefixOf(const std::string& key) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
};

}  // namespace folio

#endif  // FOLIO_SCHEDULER_RENDEZVOUS_SERVICE_H_
