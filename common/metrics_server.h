#ifndef FOLIO_COMMON_METRICS_SERVER_H_
#define FOLIO_COMMON_METRICS_SERVER_H_

// The Prometheus endpoint of folio-scheduler and folio-worker: GET /metrics
// over HTTP (prometheus-cpp's pull Exposer, civetweb inside), in the text
// exposition format, serving one registry.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace prometheus {
class Exposer;
class Registry;
}  // namespace prometheus

namespace folio {

// Serves a registry until destroyed. Scrapes run on the server's own
// threads; they read the registry's metrics, which are atomics (histograms
// take their own short mutex), so the code that updates them never waits.
class MetricsServer {
 public:
  // Listens on host:port (port 0 = any free port; port() tells which).
  // UNAVAILABLE when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      const std::string& host, int port, std::shared_ptr<prometheus::Registry> registry);
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  ~MetricsServer();

  int port() const { return port_; }

 private:
  MetricsServer(std::unique_ptr<prometheus::Exposer> exposer,
                std::shared_ptr<prometheus::Registry> registry, int port);

  std::unique_ptr<prometheus::Exposer> exposer_;
  std::shared_ptr<prometheus::Registry> registry_;  // the exposer holds a weak_ptr
  int port_;
};

// Histogram observations gathered on one thread and published to a
// prometheus::Histogram in one go (Flush): Observe costs two comparisons
// when the value falls in the same bucket as the last one (a decode batch's
// inter-token latencies do), else a binary search, plus two additions; no
// atomics, no lock. Hot loops observe per request and publish per step.
// Thread-compatible.
class LocalHistogram {
 public:
  // `bounds` must be the bucket boundaries the target histogram was made with.
  explicit LocalHistogram(const std::vector<double>& bounds);

  void Observe(double value) {
    // Bucket i counts values in (bounds_[i-1], bounds_[i]]; the last, the rest.
    size_t i = last_;
    if ((i > 0 && !(value > bounds_[i - 1])) || (i < bounds_.size() && !(value <= bounds_[i]))) {
      i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) -
                              bounds_.begin());
      last_ = i;
    }
    counts_[i] += 1.0;
    sum_ += value;
    ++num_;
  }
  // Adds what was observed since the last Flush to `target`; no-op when
  // nothing was.
  template <typename Histogram>
  void Flush(Histogram& target) {
    if (num_ == 0) return;
    target.ObserveMultiple(counts_, sum_);
    std::fill(counts_.begin(), counts_.end(), 0.0);
    sum_ = 0.0;
    num_ = 0;
  }

 private:
  std::vector<double> bounds_;
  std::vector<double> counts_;  // bounds_.size() + 1 (+Inf)
  double sum_ = 0.0;
  int64_t num_ = 0;
  size_t last_ = 0;  // bucket of the last observation
};

}  // namespace folio

#endif  // FOLIO_COMMON_METRICS_SERVER_H_
