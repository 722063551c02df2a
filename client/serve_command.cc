// `folio serve`: a whole local cluster in one command. Starts one
// folio-worker per tensor-parallel rank and folio-scheduler, found next to
// this binary; forwards flags it does not know to folio-scheduler. Ctrl-C
// (or SIGTERM) stops the scheduler first — it ends every stream and tells
// the workers to exit — then anything still running.

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/commands.h"

namespace folio {
namespace {

constexpr char kUsage[] =
    "usage: folio serve [--model DIR] [--tensor-parallel-size N | --tp N] [--port 50051]\n"
    "                   [--http-port 8000 (OpenAI HTTP API; 0 = off)]\n"
    "                   [--worker-base-port 50061] [--metrics-port 9400 (workers: +1+rank; 0 = off)]\n"
    "                   [--threads T] [--collectives auto|gloo|shm] [folio-scheduler flags...]\n"
    "Runs folio-scheduler and N folio-worker processes on 127.0.0.1 (default model:\n"
    "the demo model). Other flags go to folio-scheduler (folio-scheduler --help), e.g.\n"
    "--api-key-file FILE, --tls-cert FILE --tls-key FILE (docs/operations.md).\n"
    "Each worker computes on T threads: --threads, else OMP_NUM_THREADS when set, else a\n"
    "fair share of this machine's cores, max(1, cores / N), so N workers do not\n"
    "oversubscribe the cores. --collectives goes to every worker (default auto: shared\n"
    "memory between the local ranks). --device cuda (a folio-scheduler flag) runs worker r\n"
    "on cuda:r, its KV cache sized by --gpu-memory-utilization (default 0.9).\n"
    "Without --metrics-port a process whose default metrics port is taken (a second local\n"
    "cluster) serves without metrics; with it, a taken port stops the cluster.\n";

std::string BinaryDir() {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : self.parent_path().string();
}

pid_t Spawn(const std::vector<std::string>& args, const std::vector<std::string>& env) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  // Child: default signal handling; the parent relays Ctrl-C in order.
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  setpgid(0, 0);  // the terminal's Ctrl-C reaches only the parent
  for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execv(argv[0], argv.data());
  std::fprintf(stderr, "folio serve: cannot run %s: %s\n", argv[0], std::strerror(errno));
  _exit(127);
}

// Waits up to `timeout` for `pid`; true when it exited (status in *status).
bool WaitFor(pid_t pid, std::chrono::milliseconds timeout, int* status) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (true) {
    pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid || r < 0) return true;
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void Stop(pid_t pid, std::chrono::milliseconds grace) {
  int status;
  if (waitpid(pid, &status, WNOHANG) != 0) return;  // already gone
  kill(pid, SIGTERM);
  if (!WaitFor(pid, grace, &status)) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
}

}  // namespace

int ServeMain(int argc, char** argv) {
  std::string model;
  int tp = 1;
  int worker_base_port = 50061;
  // The scheduler's; rank r's is this + 1 + r; 0 = none. Passed on only when
  // given: on their default ports the daemons serve without metrics when a
  // port is taken (a second local cluster), on an explicit one they exit.
  int metrics_port = 9400;
  bool metrics_port_given = false;
  int threads = 0;          // per worker; 0 = OMP_NUM_THREADS or a fair share
  std::string collectives;  // passed to every worker when set
  std::vector<std::string> scheduler_args;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "folio serve: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--model") {
      model = value();
    } else if (a == "--tp" || a == "--tensor-parallel-size") {
      tp = std::atoi(value().c_str());
    } else if (a == "--worker-base-port") {
      worker_base_port = std::atoi(value().c_str());
    } else if (a == "--metrics-port") {
      metrics_port = std::atoi(value().c_str());
      metrics_port_given = true;
    } else if (a == "--threads") {
      threads = std::atoi(value().c_str());
      if (threads < 1) {
        std::fprintf(stderr, "folio serve: --threads must be at least 1\n");
        return 2;
      }
    } else if (a == "--collectives") {
      collectives = value();
    } else {
      scheduler_args.push_back(a);
    }
  }
  if (tp < 1 || tp > 64) {
    std::fprintf(stderr, "folio serve: --tensor-parallel-size must be in [1, 64], got %d\n", tp);
    return 2;
  }
  if (model.empty()) {
    model = std::filesystem::exists("models/folio-demo") ? "models/folio-demo" : FOLIO_DEMO_MODEL_DIR;
  }
  const std::string dir = BinaryDir();

  // Ctrl-C and SIGTERM are handled here, in order, not by the children.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGCHLD);
  sigprocmask(SIG_BLOCK, &signals, nullptr);

  // Compute threads per worker: --threads, else the user's OMP_NUM_THREADS,
  // else an equal share of the cores this process may run on (N workers
  // with all cores each would oversubscribe them).
  std::vector<std::string> worker_env;
  const char* omp_env = std::getenv("OMP_NUM_THREADS");
  std::string why;
  if (threads == 0 && omp_env != nullptr && *omp_env != '\0') {
    why = std::string("OMP_NUM_THREADS=") + omp_env + " from the environment";
  } else {
    cpu_set_t set;
    int cores = 0;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) cores = CPU_COUNT(&set);
    if (cores <= 0) cores = static_cast<int>(std::thread::hardware_concurrency());
    cores = std::max(cores, 1);
    if (threads == 0) {
      threads = std::max(1, cores / tp);
      why = absl::StrCat(threads, " each (", cores, " core(s) / ", tp, " worker(s))");
    } else {
      why = absl::StrCat(threads, " each (--threads)");
    }
    worker_env = {absl::StrCat("OMP_NUM_THREADS=", threads),
                  absl::StrCat("OPENBLAS_NUM_THREADS=", threads)};
  }
  std::fprintf(stderr, "folio serve: %d folio-worker(s), compute threads: %s\n", tp, why.c_str());
  std::vector<pid_t> workers;
  for (int r = 0; r < tp; ++r) {
    std::vector<std::string> worker_args = {dir + "/folio-worker", "--rank", std::to_string(r),
                                            "--port", std::to_string(worker_base_port + r)};
    if (metrics_port_given) {
      worker_args.push_back("--metrics-port");
      worker_args.push_back(std::to_string(metrics_port > 0 ? metrics_port + 1 + r : 0));
    }
    if (!collectives.empty()) {
      worker_args.push_back("--collectives");
      worker_args.push_back(collectives);
    }
    workers.push_back(Spawn(worker_args, worker_env));
  }
  std::vector<std::string> args = {dir + "/folio-scheduler", "--model", model,
                                   "--tensor-parallel-size", std::to_string(tp),
                                   "--worker-base-port", std::to_string(worker_base_port)};
  if (metrics_port_given) {
    args.push_back("--metrics-port");
    args.push_back(std::to_string(metrics_port));
  }
  args.insert(args.end(), scheduler_args.begin(), scheduler_args.end());
  pid_t scheduler = Spawn(args, {});

  // Until a signal, or until any process exits on its own.
  int exit_code = 0;
  bool worker_told_to_stop = false;  // a worker exited 0: the scheduler's Shutdown
  while (true) {
    int sig = 0;
    sigwait(&signals, &sig);
    if (sig != SIGCHLD) {
      std::fprintf(stderr, "folio serve: stopping\n");
      break;
    }
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) continue;
    const std::string who = pid == scheduler ? "folio-scheduler" : "a folio-worker";
    std::fprintf(stderr, "folio serve: %s exited (%s %d); stopping the cluster\n", who.c_str(),
                 WIFEXITED(status) ? "status" : "signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    exit_code = 1;
    worker_told_to_stop = pid != scheduler && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (pid == scheduler) scheduler = -1;
    for (pid_t& w : workers) {
      if (w == pid) w = -1;
    }
    break;
  }
  // A worker that exits cleanly first was told to by the scheduler, which is
  // about to say why (a model the workers cannot load): let it finish.
  if (worker_told_to_stop && scheduler > 0) {
    int status = 0;
    if (WaitFor(scheduler, std::chrono::seconds(5), &status)) scheduler = -1;
  }
  if (scheduler > 0) Stop(scheduler, std::chrono::seconds(15));
  for (pid_t w : workers) {
    if (w > 0) Stop(w, std::chrono::seconds(10));
  }
  return exit_code;
}

}  // namespace folio
