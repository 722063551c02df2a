// folio-worker: one tensor-parallel rank serving folio.v1.Worker (and the
// standard grpc.health.v1.Health) until Shutdown, SIGINT or SIGTERM.
//
//   folio-worker [--host 127.0.0.1] [--port 50061+rank] [--rank 0]
//                [--collective-host 127.0.0.1 | --collective-iface eth0]
//                [--collective-timeout-s 120] [--collectives auto|gloo|shm]
//                [--seed 0] [--grace-s 10]
//                [--metrics-host HOST] [--metrics-port 9401+rank]
//
// Environment (for containers; flags win): FOLIO_WORKER_HOST,
// FOLIO_WORKER_PORT, FOLIO_WORKER_RANK, FOLIO_WORKER_COLLECTIVE_HOST,
// FOLIO_WORKER_COLLECTIVE_IFACE, FOLIO_WORKER_COLLECTIVES,
// FOLIO_WORKER_METRICS_HOST, FOLIO_WORKER_METRICS_PORT.
// --collectives: auto (default) = shared memory when every rank runs on this
// host (same host name, boot id and namespaces, compared through the
// rendezvous store), else Gloo over TCP; the choice is logged. Everything
// else (model, world size, memory budget, the scheduler's rendezvous
// address) arrives in Initialize.
// The device (cpu, cuda, cuda:N) also arrives in Initialize; builds without
// CUDA refuse cuda with FAILED_PRECONDITION.
// Prometheus metrics (worker_metrics.h) are served at
// http://METRICS_HOST:METRICS_PORT/metrics (default --host, 9401+rank); port
// 0 turns them off.

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "common/openmp_env.h"
#include "absl/strings/numbers.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/metrics_server.h"
#include "prometheus/registry.h"
#include "worker/worker_metrics.h"
#include "worker/worker_loader.h"
#include "worker/worker_service.h"

namespace {

int g_signal_pipe[2] = {-1, -1};

void OnSignal(int sig) {
  const unsigned char byte = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t n = write(g_signal_pipe[1], &byte, 1);
}

const char kUsage[] =
    "usage: folio-worker [--host ADDR] [--port N] [--rank R] [--collective-host ADDR]\n"
    "                    [--collective-iface IFACE] [--collective-timeout-s S]\n"
    "                    [--collectives auto|gloo|shm] [--seed N]\n"
    "                    [--grace-s S] [--metrics-host ADDR] [--metrics-port M]\n"
    "Serves folio.v1.Worker on ADDR:N (default 127.0.0.1:50061+R) and Prometheus metrics\n"
    "on METRICS_HOST:M/metrics (default ADDR:9401+R; M = 0 turns them off).\n"
    "--collectives: auto (default) = shared memory when every rank is on this host, else\n"
    "Gloo over TCP (COLLECTIVE_HOST/IFACE); gloo or shm force one (all ranks must agree).\n"
    "Environment: FOLIO_WORKER_HOST, FOLIO_WORKER_PORT, FOLIO_WORKER_RANK,\n"
    "FOLIO_WORKER_COLLECTIVE_HOST, FOLIO_WORKER_COLLECTIVE_IFACE, FOLIO_WORKER_COLLECTIVES,\n"
    "FOLIO_WORKER_METRICS_HOST, FOLIO_WORKER_METRICS_PORT (flags win).\n";

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "folio-worker: %s\n%s", message.c_str(), kUsage);
  std::exit(2);
}

std::string Env(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

template <typename T>
T Number(const std::string& flag, const std::string& text) {
  T value{};
  if constexpr (std::is_floating_point_v<T>) {
    if (!absl::SimpleAtod(text, &value)) Die(flag + ": not a number: " + text);
  } else {
    if (!absl::SimpleAtoi(text, &value)) Die(flag + ": not an integer: " + text);
  }
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  folio::UsePassiveOpenMpWaitByDefault(argv);
  std::string host = Env("FOLIO_WORKER_HOST", "127.0.0.1");
  std::string port_text = Env("FOLIO_WORKER_PORT", "");
  std::string rank_text = Env("FOLIO_WORKER_RANK", "0");
  std::string metrics_host = Env("FOLIO_WORKER_METRICS_HOST", "");
  std::string metrics_port_text = Env("FOLIO_WORKER_METRICS_PORT", "");
  folio::WorkerService::Options options;
  options.collective_host = Env("FOLIO_WORKER_COLLECTIVE_HOST", options.collective_host);
  options.collective_iface = Env("FOLIO_WORKER_COLLECTIVE_IFACE", "");
#if defined(FOLIO_HAVE_CUDA_WORKER)
  options.cuda_loader = folio::LoadCudaWorker;  // InitializeRequest.device "cuda[:N]"
#endif
  std::string collectives = Env("FOLIO_WORKER_COLLECTIVES", "auto");
  double grace_s = 10.0;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (i + 1 >= argc) Die(flag + " needs a value (or is unknown)");
    const std::string value = argv[++i];
    if (flag == "--host") host = value;
    else if (flag == "--port") port_text = value;
    else if (flag == "--rank") rank_text = value;
    else if (flag == "--collective-host") options.collective_host = value;
    else if (flag == "--collective-iface") options.collective_iface = value;
    else if (flag == "--collectives") collectives = value;
    else if (flag == "--collective-timeout-s") {
      options.collective_timeout = absl::Seconds(Number<double>(flag, value));
    } else if (flag == "--seed") options.seed = Number<uint64_t>(flag, value);
    else if (flag == "--grace-s") grace_s = Number<double>(flag, value);
    else if (flag == "--metrics-host") metrics_host = value;
    else if (flag == "--metrics-port") metrics_port_text = value;
    else Die("unknown flag " + flag);
  }
  if (collectives == "auto") {
    options.collectives = folio::WorkerService::Options::Collectives::kAuto;
  } else if (collectives == "gloo") {
    options.collectives = folio::WorkerService::Options::Collectives::kGloo;
  } else if (collectives == "shm") {
    options.collectives = folio::WorkerService::Options::Collectives::kShm;
  } else {
    Die("--collectives must be auto, gloo or shm, got " + collectives);
  }
  const int rank = Number<int>("--rank", rank_text);
  if (rank < 0) Die("--rank must be non-negative");
  const int port = port_text.empty() ? 50061 + rank : Number<int>("--port", port_text);
  if (port < 0 || port > 65535) Die("--port must be in [0, 65535]");
  const int metrics_port =
      metrics_port_text.empty() ? 9401 + rank : Number<int>("--metrics-port", metrics_port_text);
  if (metrics_port < 0 || metrics_port > 65535) Die("--metrics-port must be in [0, 65535]");
  if (metrics_host.empty()) metrics_host = host;

  // SIGINT/SIGTERM: the handler only writes the signal number to a pipe (any
  // thread may take it: libraries may start threads before main); a watcher
  // thread reads it and shuts down.
  if (pipe(g_signal_pipe) != 0) {
    std::perror("folio-worker: pipe");
    return 1;
  }
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  absl::Notification stop;
  options.on_shutdown = [&stop] {
    if (!stop.HasBeenNotified()) stop.Notify();
  };
  // Metrics first: a clash on a port given explicitly fails at once, before
  // the model loads; on the default port it only costs the metrics (several
  // local clusters, or tests, may run side by side).
  auto registry = std::make_shared<prometheus::Registry>();
  folio::WorkerMetrics metrics(*registry);
  std::unique_ptr<folio::MetricsServer> metrics_server;
  if (metrics_port > 0) {
    absl::StatusOr<std::unique_ptr<folio::MetricsServer>> started =
        folio::MetricsServer::Start(metrics_host, metrics_port, registry);
    if (started.ok()) {
      metrics_server = std::move(*started);
      options.metrics = &metrics;
    } else if (!metrics_port_text.empty()) {
      std::fprintf(stderr, "folio-worker: %s\n", std::string(started.status().message()).c_str());
      return 1;
    } else {
      std::fprintf(stderr, "folio-worker: warning: %s; serving without metrics\n",
                   std::string(started.status().message()).c_str());
    }
  }
  folio::WorkerService service(options);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int bound_port = 0;
  const std::string address = (host.find(':') != std::string::npos ? "[" + host + "]" : host) +
                              ":" + std::to_string(port);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &bound_port);
  builder.SetMaxReceiveMessageSize(folio::kMaxWorkerMessageBytes);
  builder.SetMaxSendMessageSize(folio::kMaxWorkerMessageBytes);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) {
    std::fprintf(stderr, "folio-worker: cannot listen on %s\n", address.c_str());
    return 1;
  }
  // Tests and `folio serve` read this line to learn the port (with --port 0).
  std::printf("folio-worker rank %d listening on %s:%d\n", rank, host.c_str(), bound_port);
  if (metrics_server != nullptr) {
    std::printf("folio-worker rank %d metrics on http://%s:%d/metrics\n", rank,
                metrics_host.c_str(), metrics_server->port());
  }
  std::fflush(stdout);

  // Byte 0 on the pipe is no signal: main's own wake-up at exit.
  std::thread watcher([&service, grace_s] {
    unsigned char sig = 0;
    ssize_t n;
    do {
      n = read(g_signal_pipe[0], &sig, 1);
    } while (n < 0 && errno == EINTR);
    if (n == 1 && sig != 0) {
      std::fprintf(stderr, "folio-worker: %s, shutting down\n", strsignal(sig));
      service.Close(absl::Seconds(grace_s));  // notifies `stop`
    }
  });

  stop.WaitForNotification();
  server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(grace_s)));
  server->Wait();
  // The watcher must be done before `service` goes: a SIGTERM after the
  // shutdown (folio serve stopping the cluster) reached a destroyed one.
  const unsigned char wake = 0;
  [[maybe_unused]] ssize_t woke = write(g_signal_pipe[1], &wake, 1);
  watcher.join();
  std::fprintf(stderr, "folio-worker rank %d: stopped\n", rank);
  return 0;
}
