#ifndef FOLIO_TESTS_INTEGRATION_CLUSTER_HARNESS_H_
#define FOLIO_TESTS_INTEGRATION_CLUSTER_HARNESS_H_

// A real local cluster for the integration tests: folio-worker processes and
// a folio-scheduler on free 127.0.0.1 ports, started and stopped by the
// test. Stop() returns the scheduler's exit status, which is non-zero when
// it found KV blocks leaked after the last request.

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "folio/v1/generation.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

namespace folio::testing_util {

// A port nothing listens on right now (bound then released).
inline int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

class Cluster {
 public:
  struct Options {
    int tensor_parallel_size = 1;
    std::vector<std::string> scheduler_flags;  // extra flags
    std::vector<std::string> worker_flags;     // extra flags of every rank
    std::string model_dir = std::string(FOLIO_SOURCE_DIR) + "/models/folio-demo";
  };

  // Starts every process and waits (with a deadline) until the scheduler
  // serves; an empty string on success, else what went wrong.
  std::string Start(const Options& options) {
    const int tp = options.tensor_parallel_size;
    std::vector<std::string> addresses;
    for (int r = 0; r < tp; ++r) {
      const int port = FreePort();
      addresses.push_back(absl::StrCat("127.0.0.1:", port));
      std::vector<std::string> args = {std::string(FOLIO_BIN_DIR) + "/folio-worker", "--rank",
                                       std::to_string(r), "--port", std::to_string(port),
                                       "--metrics-port", "0"};
      args.insert(args.end(), options.worker_flags.begin(), options.worker_flags.end());
      worker_args_.push_back(args);
      workers_.push_back(Spawn(args, kWorkerEnv));
    }
    port_ = FreePort();
    std::vector<std::string> args = {std::string(FOLIO_BIN_DIR) + "/folio-scheduler",
                                     "--model", options.model_dir,
                                     "--port", std::to_string(port_),
                                     "--workers", absl::StrJoin(addresses, ","),
                                     "--metrics-port", "0", "--http-port", "0"};
    args.insert(args.end(), options.scheduler_flags.begin(), options.scheduler_flags.end());
    scheduler_ = Spawn(args, {});
    grpc::ChannelArguments channel_args;  // retry quickly while the server starts
    channel_args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
    channel_args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 50);
    channel_args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
    channel_ = grpc::CreateCustomChannel(address(), grpc::InsecureChannelCredentials(), channel_args);
    stub_ = v1::Generation::NewStub(channel_);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < deadline) {
      int status;
      if (waitpid(scheduler_, &status, WNOHANG) == scheduler_) {
        scheduler_ = -1;
        return "folio-scheduler exited during start-up";
      }
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
      v1::ModelInfo info;
      if (stub_->GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info).ok()) {
        info_ = info;
        return "";
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return "folio-scheduler did not become ready within 120 s";
  }

  ~Cluster() {
    if (scheduler_ > 0) Kill(scheduler_);
    for (pid_t w : workers_) Kill(w);
  }

  // SIGINT to the scheduler (it ends every stream at once, checks that
  // every KV block is back and stops the workers; SIGTERM would drain
  // first). Returns its exit status, or -1.
  int Stop() {
    if (scheduler_ <= 0) return -1;
    stub_.reset();
    kill(scheduler_, SIGINT);
    int status = 0;
    const bool exited = WaitExit(scheduler_, std::chrono::seconds(30), &status);
    scheduler_ = -1;
    for (pid_t& w : workers_) {
      int ws;
      if (w > 0 && !WaitExit(w, std::chrono::seconds(15), &ws)) Kill(w);
      w = -1;
    }
    if (!exited) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  // SIGKILLs worker rank r (a crashed GPU process, an OOM kill).
  void KillWorker(int r) {
    Kill(workers_[r]);
    workers_[r] = -1;
  }
  // Starts rank r again, as `folio serve` or Kubernetes would.
  void RestartWorker(int r) {
    if (workers_[r] > 0) Kill(workers_[r]);
    workers_[r] = Spawn(worker_args_[r], kWorkerEnv);
  }
  // SIGSTOP / SIGCONT of rank r: a hung process.
  void PauseWorker(int r) { kill(workers_[r], SIGSTOP); }
  pid_t worker_pid(int r) const { return workers_[r]; }

  // The scheduler's grpc.health.v1 status of `service` ("" = readiness):
  // true for SERVING, false for anything else or no answer within 2 s.
  bool Serving(const std::string& service = "") {
    // The request holds the service name as field 1 (empty: no bytes);
    // SERVING comes back as field 1 = 1.
    std::string request_bytes;
    if (!service.empty()) {
      request_bytes = std::string(1, '\x0a') + static_cast<char>(service.size()) + service;
    }
    grpc::Slice slice(request_bytes);
    grpc::ByteBuffer request(&slice, 1), response;
    grpc::GenericStub generic(channel_);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    std::promise<grpc::Status> done;
    generic.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request,
                      &response, [&](grpc::Status st) { done.set_value(std::move(st)); });
    if (!done.get_future().get().ok()) return false;
    std::vector<grpc::Slice> slices;
    if (!response.Dump(&slices).ok()) return false;
    std::string body;
    for (const grpc::Slice& s : slices) body.append(reinterpret_cast<const char*>(s.begin()), s.size());
    return body == std::string("\x08\x01", 2);
  }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  v1::Generation::Stub& stub() { return *stub_; }
  const v1::ModelInfo& info() const { return info_; }

 private:
  static pid_t Spawn(const std::vector<std::string>& args, const std::vector<std::string>& env) {
    pid_t pid = fork();
    if (pid != 0) return pid;
    for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  static bool WaitExit(pid_t pid, std::chrono::seconds timeout, int* status) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      const pid_t r = waitpid(pid, status, WNOHANG);
      if (r == pid || r < 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  static void Kill(pid_t pid) {
    if (pid <= 0) return;
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
  }

  // One kernel thread per worker: the tests share two cores.
  inline static const std::vector<std::string> kWorkerEnv = {
      "OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1", "OMP_WAIT_POLICY=PASSIVE"};

  pid_t scheduler_ = -1;
  std::vector<pid_t> workers_;
  std::vector<std::vector<std::string>> worker_args_;
  int port_ = 0;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Generation::Stub> stub_;
  v1::ModelInfo info_;
};

}  // namespace folio::testing_util

#endif  // FOLIO_TESTS_INTEGRATION_CLUSTER_HARNESS_H_
