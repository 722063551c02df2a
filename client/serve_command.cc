// `folio serve`: a whole local cluster in one command. Starts one
// folio-worker per tensor-parallel rank and folio-scheduler, found next to
// this binary; forwards flags it does not know to folio-scheduler. A worker
// that crashes is started again after a backoff (the scheduler requeues its
// requests and reconnects); one that crashes too often stops the cluster.
// Ctrl-C stops the scheduler first — it ends every stream and tells the
// workers to exit — then anything still running. SIGTERM lets the scheduler
// drain its requests first (--drain-timeout-s); a second signal cuts it short.

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/commands.h"

namespace folio {
namespace {

constexpr char kServeUsage[] =
    "usage: folio serve [--model DIR] [--tensor-parallel-size N | --tp N] [--port 50051]\n"
    "                   [--http-port 8000 (OpenAI HTTP API; 0 = off)]\n"
    "                   [--worker-base-port 50061] [--metrics-port 9400 (workers: +1+rank; 0 = off)]\n"
    "                   [--threads T] [--collectives auto|gloo|shm]\n"
    "                   [--max-worker-restarts 5] [--worker-restart-window-s 60]\n"
    "                   [folio-scheduler flags...]\n"
    "Runs folio-scheduler and N folio-worker processes on 127.0.0.1 (default model:\n"
    "the demo model). Other flags go to folio-scheduler (folio-scheduler --help), e.g.\n"
    "--api-key-file FILE, --tls-cert FILE --tls-key FILE, --kv-cache-mb N,\n"
    "--kv-cache-dtype auto|int8|fp8 (docs/operations.md).\n"
    "Each worker computes on T threads: --threads, else OMP_NUM_THREADS when set, else a\n"
    "fair share of this machine's cores, max(1, cores / N), so N workers do not\n"
    "oversubscribe the cores. --collectives goes to every worker (default auto: shared\n"
    "memory between the local ranks). --device cuda (a folio-scheduler flag) runs worker r\n"
    "on cuda:r, its KV cache sized by --gpu-memory-utilization (default 0.9).\n"
    "Without --metrics-port a process whose default metrics port is taken (a second local\n"
    "cluster) serves without metrics; with it, a taken port stops the cluster.\n"
    "A worker killed by a signal or exiting non-zero is started again with the same\n"
    "flags after a backoff (0.5 s, doubling per crash in a row, at most 10 s; back to\n"
    "0.5 s once it stayed up 60 s); the scheduler requeues its requests and reconnects.\n"
    "A rank that crashes more than --max-worker-restarts times within\n"
    "--worker-restart-window-s seconds stops the cluster (0 = stop at the first crash).\n"
    "A worker exiting 0 (told to by the scheduler) or the scheduler exiting stops it too.\n";

using Clock = std::chrono::steady_clock;

// Backoff before restarting a rank: kFirstBackoff after its first crash in a
// row, doubling per further one, at most kMaxBackoff. A worker that stayed up
// kStableUptime starts again from kFirstBackoff.
constexpr std::chrono::milliseconds kFirstBackoff(500);
constexpr std::chrono::milliseconds kMaxBackoff(10000);
constexpr std::chrono::seconds kStableUptime(60);

// --max-worker-restarts, --worker-restart-window-s (at most kMaxRestartWindowS,
// well inside steady_clock's range).
constexpr double kMaxRestartWindowS = 1e6;
struct RestartPolicy {
  int max_restarts = 5;  // per rank within `window_s`; 0 = stop at the first crash
  double window_s = 60;
};

// One folio-worker rank: how to start it, and its crash history.
struct Worker {
  int rank = 0;
  std::vector<std::string> args;      // argv, args[0] the binary
  pid_t pid = -1;                     // -1: not running
  Clock::time_point started;          // of the current (or last) process
  std::deque<Clock::time_point> crashes;  // those within the restart window
  int crashes_in_a_row = 0;           // sets the backoff
  std::optional<Clock::time_point> restart_at;  // set while a restart is pending
};

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

// Sends `sig`, then SIGKILL after `grace`. A SIGINT or SIGTERM that reaches
// this process meanwhile (`signals`, blocked) is passed on as SIGINT: the
// user's second Ctrl-C cuts a scheduler's drain short.
void Stop(pid_t pid, int sig, std::chrono::milliseconds grace, const sigset_t* signals = nullptr) {
  int status;
  if (waitpid(pid, &status, WNOHANG) != 0) return;  // already gone
  kill(pid, sig);
  const auto end = std::chrono::steady_clock::now() + grace;
  while (!WaitFor(pid, std::chrono::milliseconds(20), &status)) {
    if (std::chrono::steady_clock::now() >= end) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return;
    }
    const timespec poll = {0, 0};
    if (signals != nullptr) {
      const int got = sigtimedwait(signals, nullptr, &poll);
      if (got == SIGINT || got == SIGTERM) kill(pid, SIGINT);
    }
  }
}

// The scheduler's --drain-timeout-s among the flags passed on to it
// (its default, 30, when absent or unreadable: the scheduler refuses those).
std::chrono::milliseconds DrainTimeout(const std::vector<std::string>& scheduler_args) {
  double seconds = 30;
  for (size_t i = 0; i < scheduler_args.size(); ++i) {
    const std::string& a = scheduler_args[i];
    std::string value;
    if (a == "--drain-timeout-s" && i + 1 < scheduler_args.size()) value = scheduler_args[i + 1];
    if (a.rfind("--drain-timeout-s=", 0) == 0) value = a.substr(std::strlen("--drain-timeout-s="));
    double parsed = 0;
    if (!value.empty() && absl::SimpleAtod(value, &parsed) && parsed >= 0 && parsed <= 86400) {
      seconds = parsed;
    }
  }
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

// "exited with status 1", "was killed by signal 9".
std::string DescribeExit(int status) {
  if (WIFSIGNALED(status)) return absl::StrCat("was killed by signal ", WTERMSIG(status));
  return absl::StrCat("exited with status ", WEXITSTATUS(status));
}

// Seconds as a user reads them: "0.5 s", "10 s".
std::string Seconds(std::chrono::milliseconds d) { return absl::StrCat(d.count() / 1000.0, " s"); }

std::chrono::milliseconds Backoff(int crashes_in_a_row) {
  std::chrono::milliseconds backoff = kFirstBackoff;
  for (int i = 1; i < crashes_in_a_row && backoff < kMaxBackoff; ++i) backoff *= 2;
  return std::min(backoff, kMaxBackoff);
}

void StartWorker(Worker& w, const std::vector<std::string>& env) {
  w.pid = Spawn(w.args, env);
  w.started = Clock::now();
  w.restart_at.reset();
}

// Records that `w` (already reaped) crashed with `status` and schedules its
// restart; false (after saying why) when the policy says to stop the cluster.
bool ScheduleRestart(Worker& w, int status, const RestartPolicy& policy, Clock::time_point now) {
  const pid_t pid = w.pid;
  w.pid = -1;
  const std::string what = DescribeExit(status);
  if (policy.max_restarts == 0) {
    std::fprintf(stderr, "folio serve: folio-worker rank %d (pid %d) %s; stopping the cluster "
                 "(--max-worker-restarts 0)\n", w.rank, pid, what.c_str());
    return false;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {  // Spawn's exec failed: it will again
    std::fprintf(stderr, "folio serve: folio-worker rank %d cannot be run; stopping the cluster\n",
                 w.rank);
    return false;
  }
  const auto window = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(policy.window_s));
  w.crashes.push_back(now);
  while (now - w.crashes.front() > window) w.crashes.pop_front();
  const int crashes = static_cast<int>(w.crashes.size());
  if (crashes > policy.max_restarts) {
    std::fprintf(stderr, "folio serve: folio-worker rank %d crashed %d times within %s s "
                 "(last: pid %d %s), more than --max-worker-restarts %d; stopping the cluster\n",
                 w.rank, crashes, absl::StrCat(policy.window_s).c_str(), pid, what.c_str(),
                 policy.max_restarts);
    return false;
  }
  if (now - w.started >= kStableUptime) w.crashes_in_a_row = 0;
  const std::chrono::milliseconds backoff = Backoff(++w.crashes_in_a_row);
  w.restart_at = now + backoff;
  std::fprintf(stderr, "folio serve: folio-worker rank %d (pid %d) %s; restarting it in %s "
               "(restart %d of %d allowed within %s s)\n", w.rank, pid, what.c_str(),
               Seconds(backoff).c_str(), crashes, policy.max_restarts,
               absl::StrCat(policy.window_s).c_str());
  return true;
}

// Starts every worker whose backoff has passed.
void RestartDue(std::vector<Worker>& workers, const std::vector<std::string>& env) {
  const Clock::time_point now = Clock::now();
  for (Worker& w : workers) {
    if (w.restart_at && *w.restart_at <= now) StartWorker(w, env);
  }
}

// The time left until the next pending restart; none when there is none.
std::optional<timespec> TimeToNextRestart(const std::vector<Worker>& workers) {
  std::optional<Clock::time_point> next;
  for (const Worker& w : workers) {
    if (w.restart_at && (!next || *w.restart_at < *next)) next = w.restart_at;
  }
  if (!next) return std::nullopt;
  const auto left = std::max(Clock::duration::zero(), *next - Clock::now());
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
  return timespec{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
}

// Why Supervise returned.
enum class Ending {
  kSignal,            // Ctrl-C or SIGTERM
  kSchedulerExited,
  kWorkerToldToStop,  // a worker exited 0: the scheduler's Shutdown
  kWorkerGaveUp,      // a rank crashed more often than the policy allows
};

// Handles one reaped child; an Ending when the cluster must stop.
std::optional<Ending> OnExit(pid_t pid, int status, pid_t& scheduler, std::vector<Worker>& workers,
                             const RestartPolicy& policy) {
  if (pid == scheduler) {
    std::fprintf(stderr, "folio serve: folio-scheduler %s; stopping the cluster\n",
                 DescribeExit(status).c_str());
    scheduler = -1;
    return Ending::kSchedulerExited;
  }
  for (Worker& w : workers) {
    if (w.pid != pid) continue;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      std::fprintf(stderr, "folio serve: folio-worker rank %d exited (status 0); stopping the "
                   "cluster\n", w.rank);
      w.pid = -1;
      return Ending::kWorkerToldToStop;
    }
    if (!ScheduleRestart(w, status, policy, Clock::now())) return Ending::kWorkerGaveUp;
    return std::nullopt;
  }
  return std::nullopt;  // not ours
}

// Until a signal, or until a child's exit stops the cluster; restarts
// crashed workers meanwhile. `signals` are blocked and waited for here only,
// so a pending restart never delays Ctrl-C.
Ending Supervise(const sigset_t& signals, pid_t& scheduler, std::vector<Worker>& workers,
                 const std::vector<std::string>& worker_env, const RestartPolicy& policy,
                 int* stop_signal) {
  while (true) {
    RestartDue(workers, worker_env);
    const std::optional<timespec> wait = TimeToNextRestart(workers);
    const int sig = wait ? sigtimedwait(&signals, nullptr, &*wait) : sigwaitinfo(&signals, nullptr);
    if (sig < 0) continue;  // EAGAIN: a restart is due; EINTR
    if (sig != SIGCHLD) {
      std::fprintf(stderr, "folio serve: stopping%s\n",
                   sig == SIGTERM ? " (SIGTERM: the scheduler drains its requests first)" : "");
      *stop_signal = sig;
      return Ending::kSignal;
    }
    // One SIGCHLD may stand for several exits.
    int status = 0;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
      if (std::optional<Ending> end = OnExit(pid, status, scheduler, workers, policy)) return *end;
    }
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
  RestartPolicy policy;
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
      std::fputs(kServeUsage, stdout);
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
    } else if (a == "--max-worker-restarts") {
      const std::string v = value();
      if (!absl::SimpleAtoi(v, &policy.max_restarts) || policy.max_restarts < 0) {
        std::fprintf(stderr, "folio serve: --max-worker-restarts '%s': expected a whole number "
                     ">= 0 (0 = stop the cluster at a worker's first crash)\n", v.c_str());
        return 2;
      }
    } else if (a == "--worker-restart-window-s") {
      const std::string v = value();
      if (!absl::SimpleAtod(v, &policy.window_s) || !(policy.window_s > 0) ||
          policy.window_s > kMaxRestartWindowS) {
        std::fprintf(stderr, "folio serve: --worker-restart-window-s '%s': expected seconds in "
                     "(0, %.0f]\n", v.c_str(), kMaxRestartWindowS);
        return 2;
      }
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
  std::vector<Worker> workers(tp);
  for (int r = 0; r < tp; ++r) {
    Worker& w = workers[r];
    w.rank = r;
    w.args = {dir + "/folio-worker", "--rank", std::to_string(r), "--port",
              std::to_string(worker_base_port + r)};
    if (metrics_port_given) {
      w.args.push_back("--metrics-port");
      w.args.push_back(std::to_string(metrics_port > 0 ? metrics_port + 1 + r : 0));
    }
    if (!collectives.empty()) {
      w.args.push_back("--collectives");
      w.args.push_back(collectives);
    }
    StartWorker(w, worker_env);
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

  int stop_signal = SIGINT;
  const Ending ending = Supervise(signals, scheduler, workers, worker_env, policy, &stop_signal);
  // A worker that exits cleanly first was told to by the scheduler, which is
  // about to say why (a model the workers cannot load): let it finish.
  if (ending == Ending::kWorkerToldToStop && scheduler > 0) {
    int status = 0;
    if (WaitFor(scheduler, std::chrono::seconds(5), &status)) scheduler = -1;
  }
  // SIGTERM is passed on (the scheduler drains, then stops the workers);
  // anything else stops it at once.
  if (scheduler > 0) {
    const bool drain = ending == Ending::kSignal && stop_signal == SIGTERM;
    Stop(scheduler, drain ? SIGTERM : SIGINT,
         std::chrono::seconds(15) + (drain ? DrainTimeout(scheduler_args) : std::chrono::milliseconds(0)),
         &signals);
  }
  for (const Worker& w : workers) {
    if (w.pid > 0) Stop(w.pid, SIGTERM, std::chrono::seconds(10));
  }
  return ending == Ending::kSignal ? 0 : 1;
}

}  // namespace folio
