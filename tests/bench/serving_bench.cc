// folio_bench_serving: what serving over gRPC costs (issue 4, "Benchmarks").
//
// 1. Round trip: this process plays the scheduler's side — it serves the
//    Rendezvous store, starts two folio-worker processes (TP = 2, a real
//    Gloo group over 127.0.0.1) and drives them through RemoteWorkerGroup,
//    the class folio-scheduler uses. It times Execute(plan) (plan to proto,
//    written to both ranks, both results read and converted back) for
//      - an empty plan (only a step id: the workers convert it, run no
//        forward pass and answer), and
//      - a one-sequence one-token decode step built by a real Scheduler;
//        transport overhead = round trip - max over ranks of the
//        worker-reported forward_seconds (which covers the worker's own
//        proto conversion, cache ops, forward pass and all-reduces).
//    p50 / p99 / mean over --iterations after --warmup steps.
//
// 2. Throughput: output tokens/s of the demo model served by folio-scheduler
//    + N folio-worker processes (each --tp value) against the in-process
//    OfflineEngine (`folio run`) on the same prompts (reference.json's,
//    repeated to --num-prompts), greedy, ignore_eos, --max-tokens each, all
//    submitted at once (served: concurrent Generate streams through the
//    gRPC callback client). tokens/s = generated tokens / wall time from the
//    first submit to the last Finished. Runs are interleaved (the order
//    rotates every repetition) and the medians reported. Threads: the
//    offline engine and a TP = 1 worker use --threads kernel threads (0 =
//    all cores); a TP = N worker gets max(1, that / N) through
//    OMP_NUM_THREADS (OPENBLAS_NUM_THREADS=1, OMP_WAIT_POLICY=PASSIVE in
//    every process). Served outputs must equal the offline ones (exit 1).
//    A --tp value may name the workers' collectives: "2:shm", "2:gloo"
//    (FOLIO_WORKER_COLLECTIVES; plain "2" = the workers' default, auto), so
//    one run compares them. Each --stream-interval value serves every --tp
//    configuration once more with folio-scheduler --stream-interval N.
//
//   folio_bench_serving [--mode all|roundtrip|throughput] [--iterations 2000]
//                       [--warmup 200] [--num-prompts 32] [--max-tokens 64]
//                       [--repeats 5] [--tp 1 --tp 2 --tp 2:gloo] [--threads 0]
//                       [--collectives auto|gloo|shm (round trip's workers)]

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/offline_engine.h"
#include "common/flags.h"
#include "common/openmp_env.h"
#include "common/plan_proto.h"
#include "folio/v1/generation.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "kernels/cpu/threads.h"
#include "nlohmann/json.hpp"
#include "scheduler/rendezvous_service.h"
#include "scheduler/scheduler.h"
#include "scheduler/server/remote_worker_group.h"

extern char** environ;

namespace folio {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "folio_bench_serving: %s\n", what.c_str());
  std::exit(1);
}

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// A child process with extra environment variables; stdout piped so that a
// folio-worker's "listening on HOST:PORT" line can be read.
class Child {
 public:
  Child(const std::vector<std::string>& args, const std::map<std::string, std::string>& env) {
    std::vector<std::string> envs;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string kv = *e;
      if (!env.contains(kv.substr(0, kv.find('=')))) envs.push_back(kv);
    }
    for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
    std::vector<char*> argv, envp;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (const std::string& e : envs) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    int fds[2];
    if (pipe(fds) != 0) Die("pipe failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    if (posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), envp.data()) != 0) {
      Die(absl::StrCat("cannot start ", args[0]));
    }
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    out_ = fds[0];
  }
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      if (!WaitExit(std::chrono::seconds(20))) {
        kill(pid_, SIGKILL);
        WaitExit(std::chrono::seconds(5));
      }
    }
    if (out_ >= 0) close(out_);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  // The port of the first stdout line ("... listening on 127.0.0.1:PORT").
  int ReadPort(int seconds) {
    std::string line;
    const auto deadline = Clock::now() + std::chrono::seconds(seconds);
    while (line.find('\n') == std::string::npos) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      pollfd p{out_, POLLIN, 0};
      if (left <= 0 || poll(&p, 1, static_cast<int>(left)) <= 0) return -1;
      char buf[256];
      const ssize_t n = read(out_, buf, sizeof(buf));
      if (n <= 0) return -1;
      line.append(buf, n);
    }
    const size_t colon = line.rfind(':', line.find('\n'));
    return colon == std::string::npos ? -1 : std::atoi(line.c_str() + colon + 1);
  }
  bool WaitExit(std::chrono::seconds timeout) {
    const auto end = Clock::now() + timeout;
    while (pid_ > 0 && Clock::now() < end) {
      int status;
      const pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_ || r < 0) {
        pid_ = -1;
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return pid_ <= 0;
  }
  bool exited() { return WaitExit(std::chrono::seconds(0)); }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
};

std::map<std::string, std::string> WorkerEnv(int threads, const std::string& collectives) {
  std::map<std::string, std::string> env = {{"OMP_NUM_THREADS", std::to_string(threads)},
                                            {"OPENBLAS_NUM_THREADS", "1"},
                                            {"OMP_WAIT_POLICY", "PASSIVE"}};
  if (!collectives.empty()) env["FOLIO_WORKER_COLLECTIVES"] = collectives;
  return env;
}

std::unique_ptr<Child> StartWorker(const std::string& bin, int rank, int threads, int* port,
                                   const std::string& collectives = "") {
  auto child = std::make_unique<Child>(
      std::vector<std::string>{bin, "--host", "127.0.0.1", "--port", "0", "--rank",
                               std::to_string(rank), "--metrics-port", "0"},
      WorkerEnv(threads, collectives));
  *port = child->ReadPort(60);
  if (*port <= 0) Die(absl::StrCat("folio-worker rank ", rank, " did not report its port"));
  return child;
}

struct Percentiles {
  double p50 = 0, p99 = 0, mean = 0;
};
Percentiles Summarize(std::vector<double> v) {
  Percentiles p;
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
  };
  p.p50 = at(0.50);
  p.p99 = at(0.99);
  double sum = 0;
  for (double x : v) sum += x;
  p.mean = sum / static_cast<double>(v.size());
  return p;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return 0;
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Settings {
  std::string mode = "all";
  std::string model = std::string(FOLIO_SOURCE_DIR) + "/models/folio-demo";
  std::string bin_dir = FOLIO_BIN_DIR;
  int64_t iterations = 2000;
  int64_t warmup = 200;
  int64_t num_prompts = 32;
  int64_t max_tokens = 64;
  int64_t repeats = 5;
  int64_t threads = 0;  // 0 = all cores
  std::vector<std::string> tp;
  std::string collectives;  // round trip's workers; empty = their default
  std::vector<std::string> stream_intervals;  // throughput: empty = {"1"}
};

// ---------------------------------------------------------------------------
// 1. Round trip.

void RoundTrip(const Settings& s) {
  RendezvousService rendezvous;
  grpc::ServerBuilder builder;
  int rv_port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &rv_port);
  builder.RegisterService(&rendezvous);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || rv_port == 0) Die("cannot serve the rendezvous store");

  constexpr int kWorld = 2;
  const int threads = std::max(1, (s.threads > 0 ? static_cast<int>(s.threads)
                                                 : kernels::cpu::DefaultKernelThreads()) / kWorld);
  std::vector<std::unique_ptr<Child>> workers;
  RemoteWorkerGroup::Options wo;
  for (int r = 0; r < kWorld; ++r) {
    int port = 0;
    workers.push_back(StartWorker(s.bin_dir + "/folio-worker", r, threads, &port, s.collectives));
    wo.addresses.push_back(absl::StrCat("127.0.0.1:", port));
  }
  wo.initialize.set_model_path(s.model);
  wo.initialize.set_device("cpu");
  wo.initialize.set_block_size(16);
  wo.initialize.set_kv_cache_bytes(uint64_t{32} << 20);
  wo.initialize.set_max_model_len(512);
  wo.initialize.set_rendezvous_address(absl::StrCat("127.0.0.1:", rv_port));
  wo.initialize.set_rendezvous_prefix(absl::StrCat("bench-", getpid(), "/"));
  wo.step_timeout = absl::Seconds(60);
  absl::StatusOr<std::unique_ptr<RemoteWorkerGroup>> group = RemoteWorkerGroup::Connect(wo);
  if (!group.ok()) Die(std::string(group.status().message()));

  std::printf("round trip: plan -> %d folio-worker processes (TP=%d, collectives %s, "
              "%d kernel thread(s) each) -> results, through RemoteWorkerGroup::Execute; "
              "%lld iterations after %lld warm-up\n",
              kWorld, kWorld, s.collectives.empty() ? "auto" : s.collectives.c_str(), threads, static_cast<long long>(s.iterations),
              static_cast<long long>(s.warmup));

  // Empty plans: nothing scheduled, only a step id.
  uint64_t step_id = 1u << 30;
  std::vector<double> rtt, worker;
  for (int64_t i = 0; i < s.warmup + s.iterations; ++i) {
    StepPlan plan;
    plan.step_id = step_id++;
    const auto t0 = Clock::now();
    absl::StatusOr<StepResult> r = (*group)->Execute(plan);
    const auto t1 = Clock::now();
    if (!r.ok()) Die(absl::StrCat("empty step: ", r.status().message()));
    if (i < s.warmup) continue;
    rtt.push_back(Seconds(t0, t1) * 1e6);
    const auto& f = (*group)->last_forward_seconds();
    worker.push_back(*std::max_element(f.begin(), f.end()) * 1e6);
  }
  Percentiles e = Summarize(rtt), ew = Summarize(worker);
  std::printf("  empty plan:      round trip p50 %7.1f us  p99 %7.1f us  mean %7.1f us "
              "(worker-side p50 %.1f us)\n",
              e.p50, e.p99, e.mean, ew.p50);

  // 1-sequence 1-token decode steps from a real Scheduler.
  SchedulerConfig sc;
  sc.block_size = 16;
  sc.num_device_blocks = (*group)->num_device_blocks();
  sc.num_host_blocks = 0;
  sc.max_model_len = 512;
  sc.check_invariants = false;
  absl::StatusOr<std::unique_ptr<Scheduler>> scheduler = Scheduler::Create(sc);
  if (!scheduler.ok()) Die(std::string(scheduler.status().message()));
  RequestId next_id = 0;
  auto add_request = [&] {
    RequestSpec spec;
    spec.id = next_id++;
    spec.prompt = {2046};
    spec.sampling.temperature = 0;
    spec.sampling.ignore_eos = true;
    spec.sampling.max_tokens = 400;
    if (absl::Status st = (*scheduler)->AddRequest(std::move(spec)); !st.ok()) {
      Die(std::string(st.message()));
    }
  };
  rtt.clear();
  worker.clear();
  std::vector<double> overhead, allreduce;
  int64_t recorded = 0, seen = 0;
  while (recorded < s.iterations) {
    if (!(*scheduler)->HasUnfinishedRequests()) add_request();
    StepPlan plan = (*scheduler)->Schedule();
    const bool decode = plan.new_sequences.empty() && plan.scheduled.size() == 1 &&
                        plan.num_scheduled_tokens == 1;
    const auto t0 = Clock::now();
    absl::StatusOr<StepResult> r = (*group)->Execute(plan);
    const auto t1 = Clock::now();
    if (!r.ok()) Die(absl::StrCat("decode step: ", r.status().message()));
    absl::StatusOr<std::vector<RequestOutput>> out = (*scheduler)->Update(*r);
    if (!out.ok()) Die(std::string(out.status().message()));
    if (!decode || seen++ < s.warmup) continue;
    const auto& f = (*group)->last_forward_seconds();
    const double fw = *std::max_element(f.begin(), f.end()) * 1e6;
    rtt.push_back(Seconds(t0, t1) * 1e6);
    worker.push_back(fw);
    overhead.push_back(Seconds(t0, t1) * 1e6 - fw);
    const auto& a = (*group)->last_allreduce_seconds();
    allreduce.push_back(*std::max_element(a.begin(), a.end()) * 1e6);
    ++recorded;
  }
  Percentiles d = Summarize(rtt), dw = Summarize(worker), dover = Summarize(overhead),
              dar = Summarize(allreduce);
  std::printf("  1-token decode:  round trip p50 %7.1f us  p99 %7.1f us  mean %7.1f us\n", d.p50,
              d.p99, d.mean);
  std::printf("                   worker forward_seconds (max over ranks) p50 %7.1f us  p99 %7.1f us\n",
              dw.p50, dw.p99);
  std::printf("                   of which collectives (max over ranks) p50 %7.1f us  p99 %7.1f us\n",
              dar.p50, dar.p99);
  std::printf("                   transport = round trip - forward: p50 %7.1f us  p99 %7.1f us\n",
              dover.p50, dover.p99);
  std::printf("  target: p50 <= 200 us (empty plan %s, decode transport %s)\n",
              e.p50 <= 200 ? "met" : "MISSED", dover.p50 <= 200 ? "met" : "MISSED");
  std::fflush(stdout);

  (*group)->Shutdown();
  for (auto& w : workers) w->WaitExit(std::chrono::seconds(15));
  rendezvous.Shutdown();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

// ---------------------------------------------------------------------------
// 2. Throughput.

std::vector<std::vector<TokenId>> LoadPrompts(const Settings& s) {
  std::ifstream in(s.model + "/reference.json");
  if (!in) Die("cannot read " + s.model + "/reference.json");
  nlohmann::json j = nlohmann::json::parse(in);
  std::vector<std::vector<TokenId>> cases;
  for (const auto& c : j["cases"]) cases.push_back(c["prompt_token_ids"].get<std::vector<TokenId>>());
  if (cases.empty()) Die("reference.json has no cases");
  std::vector<std::vector<TokenId>> prompts;
  for (int64_t i = 0; i < s.num_prompts; ++i) prompts.push_back(cases[i % cases.size()]);
  return prompts;
}

struct RunResult {
  double seconds = 0;
  int64_t tokens = 0;
  std::vector<std::vector<TokenId>> outputs;
  double tokens_per_second() const { return seconds > 0 ? static_cast<double>(tokens) / seconds : 0; }
};

RunResult RunOffline(OfflineEngine& engine, const std::vector<std::vector<TokenId>>& prompts,
                     int32_t max_tokens) {
  std::vector<OfflineEngine::Request> requests(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    requests[i].prompt_token_ids = prompts[i];
    requests[i].sampling.temperature = 0;
    requests[i].sampling.ignore_eos = true;
    requests[i].sampling.max_tokens = max_tokens;
  }
  RunResult run;
  const auto t0 = Clock::now();
  absl::StatusOr<std::vector<OfflineEngine::Result>> results = engine.Generate(requests);
  run.seconds = Seconds(t0, Clock::now());
  if (!results.ok()) Die(absl::StrCat("folio run: ", results.status().message()));
  for (const OfflineEngine::Result& r : *results) {
    if (!r.error.empty() || r.sequences.size() != 1) Die("folio run: a request failed: " + r.error);
    run.tokens += static_cast<int64_t>(r.sequences[0].token_ids.size());
    run.outputs.push_back(r.sequences[0].token_ids);
  }
  return run;
}

// folio-scheduler + tp folio-worker processes on free ports.
class Cluster {
 public:
  Cluster(const Settings& s, int tp, int threads_per_worker, const std::string& collectives,
          int stream_interval = 1) {
    std::vector<std::string> addresses;
    for (int r = 0; r < tp; ++r) {
      int port = 0;
      workers_.push_back(
          StartWorker(s.bin_dir + "/folio-worker", r, threads_per_worker, &port, collectives));
      addresses.push_back(absl::StrCat("127.0.0.1:", port));
    }
    const int port = FreePort();
    scheduler_ = std::make_unique<Child>(
        std::vector<std::string>{s.bin_dir + "/folio-scheduler", "--model", s.model, "--port",
                                 std::to_string(port), "--workers", absl::StrJoin(addresses, ","),
                                 "--metrics-port", "0", "--stream-interval",
                                 std::to_string(stream_interval)},
        std::map<std::string, std::string>{});
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 50);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
    stub_ = v1::Generation::NewStub(grpc::CreateCustomChannel(
        absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials(), args));
    const auto deadline = Clock::now() + std::chrono::seconds(120);
    while (Clock::now() < deadline) {
      if (scheduler_->exited()) Die("folio-scheduler exited during start-up");
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
      v1::ModelInfo info;
      if (stub_->GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info).ok()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    Die("folio-scheduler did not become ready within 120 s");
  }
  ~Cluster() {
    scheduler_.reset();  // SIGTERM: ends streams, stops the workers
    for (auto& w : workers_) w->WaitExit(std::chrono::seconds(15));
  }

  RunResult Run(const std::vector<std::vector<TokenId>>& prompts, int32_t max_tokens);
  const std::vector<std::unique_ptr<Child>>& workers() const { return workers_; }
  pid_t scheduler_pid() const { return scheduler_->pid(); }

 private:
  std::vector<std::unique_ptr<Child>> workers_;
  std::unique_ptr<Child> scheduler_;
  std::unique_ptr<v1::Generation::Stub> stub_;
};

// All streams of one run; each stream a callback reactor.
struct RunState {
  std::mutex mu;
  std::condition_variable cv;
  int64_t open = 0;
  Clock::time_point last_finished;
  std::string error;
};

class Stream final : public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  Stream(RunState* state, v1::Generation::Stub* stub, const v1::GenerateRequest& request)
      : state_(state) {
    stub->async()->Generate(&ctx_, &request, this);
    StartRead(&response_);
    StartCall();
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;  // OnDone follows
    if (response_.has_chunk()) {
      for (const v1::SequenceDelta& d : response_.chunk().deltas()) {
        tokens_.insert(tokens_.end(), d.token_ids().begin(), d.token_ids().end());
      }
    } else if (response_.has_finished()) {
      finished_at_ = Clock::now();
      completion_tokens_ = response_.finished().usage().completion_tokens();
      for (const auto& f : response_.finished().sequences()) {
        if (f.reason() == v1::FINISH_REASON_ERROR) error_ = f.error_message();
      }
      finished_ = true;
    }
    StartRead(&response_);
  }
  void OnDone(const grpc::Status& status) override {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (!status.ok()) {
      state_->error = "Generate: " + status.error_message();
    } else if (!finished_) {
      state_->error = "a stream ended without Finished";
    } else if (!error_.empty()) {
      state_->error = error_;
    }
    if (finished_ && finished_at_ > state_->last_finished) state_->last_finished = finished_at_;
    if (--state_->open == 0) state_->cv.notify_all();
  }
  const std::vector<TokenId>& tokens() const { return tokens_; }
  uint32_t completion_tokens() const { return completion_tokens_; }

 private:
  RunState* state_;
  grpc::ClientContext ctx_;
  v1::GenerateResponse response_;
  std::vector<TokenId> tokens_;
  uint32_t completion_tokens_ = 0;
  bool finished_ = false;
  Clock::time_point finished_at_;
  std::string error_;
};

RunResult Cluster::Run(const std::vector<std::vector<TokenId>>& prompts, int32_t max_tokens) {
  std::vector<v1::GenerateRequest> requests(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    requests[i].mutable_token_ids()->mutable_ids()->Add(prompts[i].begin(), prompts[i].end());
    v1::SamplingParams* p = requests[i].mutable_sampling_params();
    p->set_temperature(0);
    p->set_ignore_eos(true);
    p->set_max_tokens(static_cast<uint32_t>(max_tokens));
  }
  RunState state;
  state.open = static_cast<int64_t>(prompts.size());
  std::vector<std::unique_ptr<Stream>> streams;
  streams.reserve(prompts.size());
  const auto t0 = Clock::now();
  for (const v1::GenerateRequest& r : requests) {
    streams.push_back(std::make_unique<Stream>(&state, stub_.get(), r));
  }
  {
    std::unique_lock<std::mutex> lock(state.mu);
    state.cv.wait(lock, [&] { return state.open == 0; });
  }
  if (!state.error.empty()) Die(state.error);
  RunResult run;
  run.seconds = Seconds(t0, state.last_finished);
  for (const auto& st : streams) {
    if (st->tokens().size() != st->completion_tokens()) {
      Die(absl::StrCat("streamed ", st->tokens().size(), " tokens but usage says ",
                       st->completion_tokens()));
    }
    run.tokens += static_cast<int64_t>(st->tokens().size());
    run.outputs.push_back(st->tokens());
  }
  return run;
}

// One served configuration of the throughput mode: a cluster of `tp`
// workers with these collectives, streaming at this interval.
struct ServedConfig {
  int tp = 1;
  std::string collectives;  // empty: the workers' default
  int stream_interval = 1;
  std::string label;  // "TP=2/gloo si=4"
};

// --tp N[:collectives] (default 1 and 2) crossed with --stream-interval N
// (default 1): every TP configuration once per stream interval.
std::vector<ServedConfig> ParseServedConfigs(const Settings& s) {
  std::vector<ServedConfig> tps;
  for (const std::string& t : s.tp) {
    const size_t colon = t.find(':');
    ServedConfig c;
    if (!absl::SimpleAtoi(t.substr(0, colon), &c.tp) || c.tp < 1) {
      Die("--tp: not a positive integer (optionally :auto|:gloo|:shm): " + t);
    }
    if (colon != std::string::npos) c.collectives = t.substr(colon + 1);
    c.label = absl::StrCat("TP=", c.tp, c.collectives.empty() ? "" : "/" + c.collectives);
    tps.push_back(c);
  }
  if (tps.empty()) {
    for (int tp : {1, 2}) {
      ServedConfig c;
      c.tp = tp;
      c.label = absl::StrCat("TP=", tp);
      tps.push_back(c);
    }
  }
  std::vector<int> intervals;
  for (const std::string& v : s.stream_intervals) {
    int n = 0;
    if (!absl::SimpleAtoi(v, &n) || n < 1) Die("--stream-interval: not a positive integer: " + v);
    intervals.push_back(n);
  }
  if (intervals.empty()) intervals = {1};
  std::vector<ServedConfig> configs;
  for (int n : intervals) {
    for (ServedConfig c : tps) {
      c.stream_interval = n;
      if (intervals.size() > 1 || n > 1) absl::StrAppend(&c.label, " si=", n);
      configs.push_back(c);
    }
  }
  return configs;
}

void Throughput(const Settings& s) {
  const std::vector<std::vector<TokenId>> prompts = LoadPrompts(s);
  const int32_t max_tokens = static_cast<int32_t>(s.max_tokens);
  const int cores = s.threads > 0 ? static_cast<int>(s.threads) : kernels::cpu::DefaultKernelThreads();
  const std::vector<ServedConfig> configs = ParseServedConfigs(s);

  OfflineEngine::Options oo;
  oo.model_dir = s.model;
  oo.num_threads = static_cast<int32_t>(s.threads);
  absl::StatusOr<std::unique_ptr<OfflineEngine>> offline = OfflineEngine::Create(oo);
  if (!offline.ok()) Die(std::string(offline.status().message()));
  std::vector<std::unique_ptr<Cluster>> clusters;
  for (const ServedConfig& c : configs) {
    clusters.push_back(std::make_unique<Cluster>(s, c.tp, std::max(1, cores / c.tp),
                                                 c.collectives, c.stream_interval));
  }

  std::printf("throughput: %zu prompts (reference.json, repeated), greedy, ignore_eos, "
              "max_tokens %d, all submitted at once; %lld interleaved repetitions after one "
              "warm-up; offline engine %d kernel thread(s)",
              prompts.size(), max_tokens, static_cast<long long>(s.repeats), cores);
  for (const ServedConfig& c : configs) {
    std::printf(", %s worker(s) %d thread(s) each", c.label.c_str(), std::max(1, cores / c.tp));
  }
  std::printf("\n");
  std::fflush(stdout);

  // Slot 0 = offline, slot 1 + i = clusters[i].
  const size_t slots = 1 + clusters.size();
  std::vector<std::vector<double>> tps_runs(slots);
  std::vector<std::vector<TokenId>> reference;
  auto run_slot = [&](size_t slot) {
    return slot == 0 ? RunOffline(**offline, prompts, max_tokens)
                     : clusters[slot - 1]->Run(prompts, max_tokens);
  };
  reference = run_slot(0).outputs;  // warm-up, and the outputs all must match
  for (size_t slot = 1; slot < slots; ++slot) run_slot(slot);
  for (int64_t rep = 0; rep < s.repeats; ++rep) {
    for (size_t k = 0; k < slots; ++k) {
      const size_t slot = (static_cast<size_t>(rep) + k) % slots;
      RunResult r = run_slot(slot);
      if (r.outputs != reference) {
        Die(absl::StrCat(slot == 0 ? std::string("folio run") : configs[slot - 1].label,
                         ": outputs differ from the first offline run"));
      }
      tps_runs[slot].push_back(r.tokens_per_second());
      std::printf("  rep %lld %-14s %6lld tokens in %7.3f s = %8.1f tokens/s\n",
                  static_cast<long long>(rep),
                  slot == 0 ? "offline" : configs[slot - 1].label.c_str(),
                  static_cast<long long>(r.tokens), r.seconds, r.tokens_per_second());
      std::fflush(stdout);
    }
  }
  const double offline_tps = Median(tps_runs[0]);
  std::printf("  median: offline (folio run) %.1f tokens/s\n", offline_tps);
  for (size_t i = 0; i < clusters.size(); ++i) {
    const double served = Median(tps_runs[1 + i]);
    const double overhead = offline_tps > 0 ? 1.0 - served / offline_tps : 0;
    std::printf("  median: served %s %.1f tokens/s, overhead %.1f%% (target <= 10%%: %s)\n",
                configs[i].label.c_str(), served, 100.0 * overhead, overhead <= 0.10 ? "met" : "MISSED");
  }
  std::fflush(stdout);
}

int Main(int argc, char** argv) {
  UsePassiveOpenMpWaitByDefault(argv);
  Settings s;
  FlagSet flags;
  flags.String("mode", &s.mode, "all | roundtrip | throughput");
  flags.String("model", &s.model, "model directory (with reference.json)");
  flags.String("bin-dir", &s.bin_dir, "directory of folio-worker and folio-scheduler");
  flags.Int("iterations", &s.iterations, "round-trip steps measured (per kind)");
  flags.Int("warmup", &s.warmup, "round-trip steps before measuring");
  flags.Int("num-prompts", &s.num_prompts, "throughput: requests per run");
  flags.Int("max-tokens", &s.max_tokens, "throughput: tokens generated per request");
  flags.Int("repeats", &s.repeats, "throughput: measured runs of each configuration");
  flags.Int("threads", &s.threads, "kernel threads of the offline engine / a TP=1 worker; 0 = all cores");
  flags.Strings("tp", &s.tp,
                "throughput: tensor-parallel sizes to serve, N or N:auto|gloo|shm (repeatable; "
                "default 1 and 2)");
  flags.String("collectives", &s.collectives, "round trip: the workers' collectives (auto|gloo|shm)");
  flags.Strings("stream-interval", &s.stream_intervals,
                "throughput: folio-scheduler --stream-interval of the served runs (repeatable: "
                "every --tp configuration once per value; default 1)");
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      std::printf("usage: folio_bench_serving [flags]\n%s", flags.Help().c_str());
      return 0;
    }
  }
  if (absl::Status st = flags.Parse(argc, argv); !st.ok()) Die(std::string(st.message()));
  signal(SIGPIPE, SIG_IGN);
  if (s.mode == "all" || s.mode == "roundtrip") RoundTrip(s);
  if (s.mode == "all" || s.mode == "throughput") Throughput(s);
  return 0;
}

}  // namespace
}  // namespace folio

int main(int argc, char** argv) { return folio::Main(argc, argv); }
