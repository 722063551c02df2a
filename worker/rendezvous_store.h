#ifndef FOLIO_WORKER_RENDEZVOUS_STORE_H_
#define FOLIO_WORKER_RENDEZVOUS_STORE_H_

// A gloo::rendezvous::Store backed by the scheduler's folio.v1.Rendezvous
// service, so a worker needs nothing but the scheduler's address and its rank
// to join the collective group. Every key is prefixed with `prefix` (unique
// per cluster start), so a restarted cluster never reads a stale address.
//
// Two faces: Set/Get/Wait return absl::Status (for callers of ours, e.g. an
// NCCL unique id exchange); set/get/wait implement Gloo's Store contract and
// throw gloo::IoException on failure, which GlooCommunicator catches at the
// edge. Every call carries a deadline (`timeout`, or the one given) and
// waits for the service to become reachable within it.
//
// Thread-safe.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "folio/v1/worker.grpc.pb.h"
#include "gloo/rendezvous/store.h"

namespace folio {

class RendezvousStore final : public gloo::rendezvous::Store {
 public:
  struct Options {
    std::string address;  // the Rendezvous service, "host:port"
    std::string prefix;   // prepended to every key
    absl::Duration timeout = absl::Seconds(60);  // per call
  };

  static absl::StatusOr<std::unique_ptr<RendezvousStore>> Create(const Options& options);
  // Over an existing channel (tests, or a channel shared with other stubs).
  RendezvousStore(std::shared_ptr<grpc::Channel> channel, const Options& options);
  RendezvousStore(const RendezvousStore&) = delete;
  RendezvousStore& operator=(const RendezvousStore&) = delete;

  absl::Status Set(const std::string& key, const std::string& value);
  absl::StatusOr<std::string> Get(const std::string& key);
  absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout);

  // gloo::rendezvous::Store; throw gloo::IoException on failure.
  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  const std::string& prefix() const { return options_.prefix; }

 private:
  const Options options_;
  const std::unique_ptr<v1::Rendezvous::Stub> stub_;
};

}  // namespace folio

#endif  // FOLIO_WORKER_RENDEZVOUS_STORE_H_
