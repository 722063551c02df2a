// folio_bench_collectives: the latency of one collective between worker
// ranks on this host, shared memory (ShmCommunicator) against Gloo over
// 127.0.0.1 (GlooCommunicator), both groups alive in the same processes.
//
// Ranks are processes (rank 0 is this one, ranks 1..world-1 are forked
// before any thread starts) meeting through a gloo FileStore in a temp dir.
// For every round the backends take turns (the order alternating), and for
// each backend every size: --warmup calls, then --iterations calls of
// AllReduceSum on `size` floats, each timed on rank 0 (the ranks run in
// lock step, so one call is one collective's latency). Also one GatherToRank0
// and one Barrier series per backend. Prints p50 / p99 / mean per backend and
// size over all rounds, and the load average before and after.
//
//   folio_bench_collectives [--world 2] [--size 256 --size 4096]
//                           [--iterations 5000] [--warmup 500] [--rounds 4]
//                           [--spin-us 50]

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/flags.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/rendezvous/prefix_store.h"
#include "worker/gloo_communicator.h"
#include "worker/shm_communicator.h"

namespace folio {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "folio_bench_collectives: %s\n", what.c_str());
  std::exit(1);
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return absl::StrCat(a, " ", b, " ", c);
}

struct Settings {
  int64_t world = 2;
  std::vector<std::string> sizes;
  int64_t iterations = 5000;
  int64_t warmup = 500;
  int64_t rounds = 4;
  int64_t spin_us = 50;
};

struct Series {
  std::vector<double> us;
  void Add(double v) { us.push_back(v); }
  double At(double q) const {
    std::vector<double> v = us;
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<size_t>(q * double(v.size())))];
  }
  double Mean() const {
    double s = 0;
    for (double x : us) s += x;
    return us.empty() ? 0 : s / double(us.size());
  }
};

// One rank's whole run; rank 0 fills `results` (key: "backend op size").
int RunRank(const Settings& s, const std::vector<int64_t>& sizes, int rank,
            const std::string& dir, std::map<std::string, Series>* results) {
  gloo::rendezvous::FileStore file_store(dir);
  gloo::rendezvous::PrefixStore gloo_store("gloo", file_store);
  gloo::rendezvous::PrefixStore shm_store("shm", file_store);
  GlooCommunicator::Options go;
  go.rank = rank;
  go.world_size = static_cast<int32_t>(s.world);
  go.hostname = "127.0.0.1";
  go.timeout = absl::Seconds(60);
  absl::StatusOr<std::unique_ptr<GlooCommunicator>> gloo = GlooCommunicator::Create(go, gloo_store);
  if (!gloo.ok()) Die(absl::StrCat("rank ", rank, ": ", gloo.status().ToString()));
  ShmCommunicator::Options so;
  so.rank = rank;
  so.world_size = static_cast<int32_t>(s.world);
  so.timeout = absl::Seconds(60);
  so.spin = absl::Microseconds(s.spin_us);
  absl::StatusOr<std::unique_ptr<ShmCommunicator>> shm = ShmCommunicator::Create(so, shm_store);
  if (!shm.ok()) Die(absl::StrCat("rank ", rank, ": ", shm.status().ToString()));
  Communicator* backends[2] = {gloo->get(), shm->get()};
  const char* names[2] = {"gloo", "shm"};
  const int64_t max_size = *std::max_element(sizes.begin(), sizes.end());
  std::vector<float> data(static_cast<size_t>(max_size));
  std::vector<float> recv(static_cast<size_t>(max_size * s.world));
  for (int64_t round = 0; round < s.rounds; ++round) {
    for (int k = 0; k < 2; ++k) {
      const int b = static_cast<int>((round + k) % 2);
      Communicator& comm = *backends[b];
      auto time = [&](const std::string& key, auto&& op) {
        for (int64_t i = 0; i < s.warmup + s.iterations; ++i) {
          const auto t0 = Clock::now();
          if (absl::Status st = op(); !st.ok()) Die(absl::StrCat(key, ": ", st.ToString()));
          const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
          if (rank == 0 && i >= s.warmup) (*results)[key].Add(us);
        }
      };
      for (int64_t n : sizes) {
        std::fill(data.begin(), data.begin() + n, 1.0f);
        time(absl::StrCat(names[b], " all-reduce ", n),
             [&] { return comm.AllReduceSum(data.data(), n); });
      }
      time(absl::StrCat(names[b], " gather ", sizes[0]),
           [&] { return comm.GatherToRank0(data.data(), sizes[0], recv.data()); });
      time(absl::StrCat(names[b], " barrier ", 0), [&] { return comm.Barrier(); });
    }
  }
  return 0;
}

int Main(int argc, char** argv) {
  Settings s;
  FlagSet flags;
  flags.Int("world", &s.world, "ranks (processes)");
  flags.Strings("size", &s.sizes, "floats per all-reduce (repeatable; default 256 and 4096)");
  flags.Int("iterations", &s.iterations, "timed calls per backend, size and round");
  flags.Int("warmup", &s.warmup, "untimed calls before them");
  flags.Int("rounds", &s.rounds, "rounds; the backends alternate within each");
  flags.Int("spin-us", &s.spin_us, "ShmCommunicator::Options::spin, microseconds");
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      std::printf("usage: folio_bench_collectives [flags]\n%s", flags.Help().c_str());
      return 0;
    }
  }
  if (absl::Status st = flags.Parse(argc, argv); !st.ok()) Die(std::string(st.message()));
  if (s.world < 2 || s.world > ShmCommunicator::kMaxRanks) Die("--world must be in [2, 64]");
  std::vector<int64_t> sizes;
  for (const std::string& t : s.sizes) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(t, &v) || v < 1) Die("--size: not a positive integer: " + t);
    sizes.push_back(v);
  }
  if (sizes.empty()) sizes = {256, 4096};
  const std::string dir = absl::StrCat(std::filesystem::temp_directory_path().string(),
                                       "/folio_bench_collectives_", getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string load_before = LoadAverage();
  std::vector<pid_t> children;
  for (int r = 1; r < s.world; ++r) {
    const pid_t pid = fork();
    if (pid < 0) Die("fork failed");
    if (pid == 0) _exit(RunRank(s, sizes, r, dir, nullptr));
    children.push_back(pid);
  }
  std::map<std::string, Series> results;
  RunRank(s, sizes, 0, dir, &results);
  bool ok = true;
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  std::filesystem::remove_all(dir);
  if (!ok) Die("a rank failed");
  std::printf("collectives between %lld processes on this host: Gloo over 127.0.0.1 vs shared "
              "memory (spin %lld us); %lld rounds x %lld calls after %lld warm-up, backends "
              "alternating; load average before %s, after %s\n",
              static_cast<long long>(s.world), static_cast<long long>(s.spin_us),
              static_cast<long long>(s.rounds), static_cast<long long>(s.iterations),
              static_cast<long long>(s.warmup), load_before.c_str(), LoadAverage().c_str());
  std::printf("  %-26s %10s %10s %10s\n", "", "p50 us", "p99 us", "mean us");
  for (const auto& [key, series] : results) {
    std::printf("  %-26s %10.1f %10.1f %10.1f\n", key.c_str(), series.At(0.5), series.At(0.99),
                series.Mean());
  }
  for (int64_t n : sizes) {
    const auto& g = results[absl::StrCat("gloo all-reduce ", n)];
    const auto& m = results[absl::StrCat("shm all-reduce ", n)];
    std::printf("  all-reduce of %lld floats: p50 gloo / shm = %.1fx\n", static_cast<long long>(n),
                m.At(0.5) > 0 ? g.At(0.5) / m.At(0.5) : 0.0);
  }
  return 0;
}

}  // namespace
}  // namespace folio

int main(int argc, char** argv) { return folio::Main(argc, argv); }
