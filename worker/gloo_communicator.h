#ifndef FOLIO_WORKER_GLOO_COMMUNICATOR_H_
#define FOLIO_WORKER_GLOO_COMMUNICATOR_H_

// Collectives over TCP with Gloo, for CPU worker ranks. Create() joins the
// group: every rank publishes its address in the rendezvous store and
// connects to every other (a full mesh), so all world_size ranks must call
// Create() with the same store prefix within `timeout`.
//
// Gloo reports errors by throwing; this class is the edge where they become
// absl::Status. After a failed collective the group should be considered
// broken (a peer died or timed out).
//
// Abort() (from any thread) wakes a collective waiting on a hung peer: it
// signals an error on every pair (tcp::Pair::signalExceptionExternal, the
// path Gloo itself takes when a buffer times out), so the waiting call
// throws at once and returns UNAVAILABLE "... aborted ..."; the group is
// broken from then on. Without it a collective blocked on a peer ends only
// when the peer process dies (its sockets close) or after `timeout`.
//
// Thread-compatible: one thread calls a communicator at a time (Abort()
// excepted).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/communicator.h"

namespace gloo {
class Context;
namespace rendezvous {
class Store;
}  // namespace rendezvous
}  // namespace gloo

namespace folio {

class GlooCommunicator final : public Communicator {
 public:
  struct Options {
    int32_t rank = 0;
    int32_t world_size = 1;
    // Where this rank listens for its peers: an address or host name
    // ("127.0.0.1" for one machine; the pod IP in Kubernetes), or, when
    // `iface` is set, a network interface name instead ("eth0").
    std::string hostname = "127.0.0.1";
    std::string iface;
    // Connecting and every collective fail after this long.
    absl::Duration timeout = absl::Seconds(60);
  };

  // `store` is used only during the call (keys are Gloo's; prefix them with
  // the store's own prefix per cluster start).
  static absl::StatusOr<std::unique_ptr<GlooCommunicator>> Create(const Options& options,
                                                                  gloo::rendezvous::Store& store);
  ~GlooCommunicator() override;
  GlooCommunicator(const GlooCommunicator&) = delete;
  GlooCommunicator& operator=(const GlooCommunicator&) = delete;

  int32_t rank() const override { return options_.rank; }
  int32_t world_size() const override { return options_.world_size; }
  void Abort() override;

 protected:
  absl::Status DoAllReduceSum(float* data, int64_t count) override;
  absl::Status DoGatherToRank0(const float* send, int64_t count, float* recv) override;
  absl::Status DoBarrier() override;

 private:
  GlooCommunicator(const Options& options, std::shared_ptr<gloo::Context> context);
  uint32_t NextTag() { return tag_++; }

  const Options options_;
  const std::shared_ptr<gloo::Context> context_;
  uint32_t tag_ = 0;  // one per collective, the same sequence on every rank
  std::atomic<bool> aborted_{false};
};

}  // namespace folio

#endif  // FOLIO_WORKER_GLOO_COMMUNICATOR_H_
