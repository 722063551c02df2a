#include "common/metrics_server.h"

#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include <algorithm>
#include <exception>

#include "absl/strings/str_cat.h"

namespace folio {

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& host, int port, std::shared_ptr<prometheus::Registry> registry) {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("metrics port ", port, " is not in [0, 65535]"));
  }
  const std::string address =
      absl::StrCat(host.find(':') != std::string::npos ? absl::StrCat("[", host, "]") : host, ":",
                   port);
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    // Two threads: a scrape is cheap, and a second one (or a health probe)
    // need not wait for it.
    exposer = std::make_unique<prometheus::Exposer>(address, 2);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", address, ": ", e.what()));
  }
  exposer->RegisterCollectable(registry);
  const std::vector<int> ports = exposer->GetListeningPorts();
  const int bound = ports.empty() ? port : ports.front();
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(exposer), std::move(registry), bound));
}

MetricsServer::MetricsServer(std::unique_ptr<prometheus::Exposer> exposer,
                             std::shared_ptr<prometheus::Registry> registry, int port)
    : exposer_(std::move(exposer)), registry_(std::move(registry)), port_(port) {}

MetricsServer::~MetricsServer() = default;

LocalHistogram::LocalHistogram(const std::vector<double>& bounds)
    : bounds_(bounds), counts_(bounds.size() + 1, 0.0) {}


}  // namespace folio
