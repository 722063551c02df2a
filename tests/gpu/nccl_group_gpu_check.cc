// GPU check: NcclGroup (worker/nccl_group.h), the NCCL core of the CUDA
// workers' NcclCommunicator. Standalone: CUDA runtime + NCCL + std, so it
// builds in kernels-only mode. The unique id is exchanged in-process (made
// once, handed to every rank's thread) instead of through the gRPC
// rendezvous store, which is the only part of NcclCommunicator not run here.
//
// Cases: one rank on device 0 (all-reduce, gather, barrier, argument errors,
// and a 2-rank group whose second rank never joins, which must time out
// rather than hang); with 2+ GPUs, 2 ranks on threads (and all GPUs, up to
// 8, when more than 2) checking exact sums, rank-ordered gathers and
// barriers, and a rank that skips a collective (DEADLINE_EXCEEDED, then
// FAILED_PRECONDITION). Values are small integers, so sums are exact.
//
// Prints one PASS/FAIL line per case, then a summary.
// Exit: 0 all passed, 1 any failure, 77 no CUDA device (ctest: skipped).
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/gpu/gpu_check_util.h"
#include "worker/nccl_group.h"

namespace folio {
namespace {

using Code = NcclGroup::Status::Code;
using std::chrono::milliseconds;

// "PASS <name>" or "FAIL <name>: <failure>".
constexpr auto& Report = gpu_check::ReportFailure;

const char* CodeName(Code c) {
  switch (c) {
    case Code::kOk: return "OK";
    case Code::kInvalidArgument: return "INVALID_ARGUMENT";
    case Code::kFailedPrecondition: return "FAILED_PRECONDITION";
    case Code::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case Code::kUnavailable: return "UNAVAILABLE";
    case Code::kInternal: return "INTERNAL";
  }
  return "?";
}

std::string Describe(const NcclGroup::Status& s) {
  return std::string(CodeName(s.code)) + (s.message.empty() ? "" : ": " + s.message);
}

// Collects the failures of one case from any thread; empty = passed.
class Failures {
 public:
  void Add(const std::string& f) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!text_.empty()) text_ += "; ";
    text_ += f;
  }
  // Adds a failure unless `s` has code `want`; returns whether it had.
  bool Expect(const std::string& what, const NcclGroup::Status& s, Code want) {
    if (s.code == want) return true;
    Add(what + ": want " + CodeName(want) + ", got " + Describe(s));
    return false;
  }
  std::string text() const {
    std::lock_guard<std::mutex> lock(mu_);
    return text_;
  }

 private:
  mutable std::mutex mu_;
  std::string text_;
};

// Device buffer of floats, freed on scope exit.
class DeviceFloats {
 public:
  DeviceFloats(int device, size_t n) : n_(n) {
    cudaSetDevice(device);
    if (cudaMalloc(reinterpret_cast<void**>(&p_), std::max<size_t>(n, 1) * sizeof(float)) !=
        cudaSuccess) {
      p_ = nullptr;
    }
  }
  ~DeviceFloats() {
    if (p_ != nullptr) cudaFree(p_);
  }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;

  float* get() const { return p_; }
  bool Upload(const std::vector<float>& v) {
    return cudaMemcpy(p_, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice) ==
           cudaSuccess;
  }
  bool Download(std::vector<float>* v) const {
    v->resize(n_);
    return cudaMemcpy(v->data(), p_, n_ * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess;
  }

 private:
  float* p_ = nullptr;
  size_t n_;
};

// Rank r's all-reduce input and the exact sum over `world` ranks.
float ReduceInput(int32_t r, size_t i) { return float((r + 1) * 1000) + float(i % 997); }
float ReduceSum(int32_t world, size_t i) {
  float s = 0;
  for (int32_t r = 0; r < world; ++r) s += ReduceInput(r, i);
  return s;
}
// Rank r's gather input (distinct per rank and element, exact in float).
float GatherInput(int32_t r, size_t i) { return float(r * 100000) + float(i); }

// First mismatch between `got` and `want(i)`, or "".
template <typename F>
std::string Compare(const std::vector<float>& got, F want) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want(i)) {
      return "element " + std::to_string(i) + ": got " + std::to_string(got[i]) + ", want " +
             std::to_string(want(i));
    }
  }
  return "";
}

// One rank's side of the collectives case: all-reduce of `n` elements,
// gather of `gather_n`, three barriers.
void RunRank(int32_t rank, int32_t world, const std::string& id, size_t n, size_t gather_n,
             Failures* failures) {
  const std::string who = "rank " + std::to_string(rank);
  NcclGroup::Options opts;
  opts.rank = rank;
  opts.world_size = world;
  opts.device = rank;
  opts.timeout = milliseconds(30000);
  std::unique_ptr<NcclGroup> group;
  if (!failures->Expect(who + " Create", NcclGroup::Create(opts, id, &group), Code::kOk)) return;

  DeviceFloats data(rank, n), send(rank, gather_n), recv(rank, gather_n * world);
  if (data.get() == nullptr || send.get() == nullptr || recv.get() == nullptr) {
    failures->Add(who + ": cudaMalloc failed");
    return;
  }
  std::vector<float> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = ReduceInput(rank, i);
  std::vector<float> gather_host(gather_n);
  for (size_t i = 0; i < gather_n; ++i) gather_host[i] = GatherInput(rank, i);
  if (!data.Upload(host) || !send.Upload(gather_host)) {
    failures->Add(who + ": upload failed");
    return;
  }

  if (failures->Expect(who + " AllReduceSum", group->AllReduceSum(data.get(), int64_t(n)),
                       Code::kOk)) {
    std::vector<float> got;
    if (!data.Download(&got)) {
      failures->Add(who + ": download failed");
    } else if (std::string d = Compare(got, [&](size_t i) { return ReduceSum(world, i); });
               !d.empty()) {
      failures->Add(who + " all-reduce " + d);
    }
  }
  if (failures->Expect(who + " GatherToRank0",
                       group->GatherToRank0(send.get(), int64_t(gather_n),
                                            rank == 0 ? recv.get() : nullptr),
                       Code::kOk) &&
      rank == 0) {
    std::vector<float> got;
    if (!recv.Download(&got)) {
      failures->Add(who + ": download failed");
    } else if (std::string d = Compare(got, [&](size_t i) {
                 return GatherInput(int32_t(i / gather_n), i % gather_n);
               });
               !d.empty()) {
      failures->Add("gather " + d);
    }
  }
  for (int b = 0; b < 3; ++b) {
    failures->Expect(who + " Barrier", group->Barrier(), Code::kOk);
  }
}

void CheckOneRank() {
  const std::string name = "one rank (device 0)";
  Failures f;
  std::string id;
  if (!f.Expect("NewUniqueId", NcclGroup::NewUniqueId(&id), Code::kOk)) {
    Report(name, f.text());
    return;
  }
  {
    // Argument checks before any NCCL call.
    std::unique_ptr<NcclGroup> g;
    NcclGroup::Options bad;
    bad.rank = 1;
    bad.world_size = 1;
    f.Expect("rank >= world_size", NcclGroup::Create(bad, id, &g), Code::kInvalidArgument);
    f.Expect("short unique id", NcclGroup::Create(NcclGroup::Options{}, "abc", &g),
             Code::kInvalidArgument);
  }
  RunRank(0, 1, id, 4099, 1000, &f);

  // Misuse comes back as INVALID_ARGUMENT and leaves the group usable.
  std::string id2;
  std::unique_ptr<NcclGroup> group;
  if (f.Expect("NewUniqueId", NcclGroup::NewUniqueId(&id2), Code::kOk) &&
      f.Expect("Create", NcclGroup::Create(NcclGroup::Options{}, id2, &group), Code::kOk)) {
    std::vector<float> host(16, 1.0f);
    f.Expect("host pointer", group->AllReduceSum(host.data(), 16), Code::kInvalidArgument);
    f.Expect("null pointer", group->AllReduceSum(nullptr, 16), Code::kInvalidArgument);
    DeviceFloats d(0, 16);
    f.Expect("negative count", group->AllReduceSum(d.get(), -1), Code::kInvalidArgument);
    f.Expect("zero count", group->AllReduceSum(d.get(), 0), Code::kOk);
    f.Expect("gather to host", group->GatherToRank0(d.get(), 16, host.data()),
             Code::kInvalidArgument);
    f.Expect("still usable", group->AllReduceSum(d.get(), 16), Code::kOk);
    // A large all-reduce (64 MiB) through the same path.
    const size_t big = size_t{1} << 24;
    DeviceFloats large(0, big);
    std::vector<float> in(big);
    for (size_t i = 0; i < big; ++i) in[i] = ReduceInput(0, i);
    if (large.get() == nullptr || !large.Upload(in)) {
      f.Add("large buffer: cudaMalloc/upload failed");
    } else if (f.Expect("large AllReduceSum", group->AllReduceSum(large.get(), int64_t(big)),
                        Code::kOk)) {
      std::vector<float> got;
      if (!large.Download(&got)) {
        f.Add("large: download failed");
      } else if (std::string d = Compare(got, [&](size_t i) { return in[i]; }); !d.empty()) {
        f.Add("large all-reduce " + d);
      }
    }
    // RequestAbort (what a worker does when the scheduler rebuilds the
    // group): the next collective fails UNAVAILABLE, later ones
    // FAILED_PRECONDITION, and the destructor does not wait on the peers.
    group->RequestAbort();
    f.Expect("after RequestAbort", group->AllReduceSum(d.get(), 16), Code::kUnavailable);
    f.Expect("aborted stays broken", group->Barrier(), Code::kFailedPrecondition);
  }
  Report(name, f.text());
}

// A 2-rank group whose rank 1 never calls Create: rank 0 must give up with
// DEADLINE_EXCEEDED near its timeout instead of hanging.
void CheckJoinTimeout() {
  const std::string name = "join timeout (rank 1 never joins)";
  Failures f;
  std::string id;
  if (f.Expect("NewUniqueId", NcclGroup::NewUniqueId(&id), Code::kOk)) {
    NcclGroup::Options opts;
    opts.world_size = 2;
    opts.timeout = milliseconds(3000);
    std::unique_ptr<NcclGroup> group;
    const auto start = std::chrono::steady_clock::now();
    f.Expect("Create", NcclGroup::Create(opts, id, &group), Code::kDeadlineExceeded);
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("  join timeout returned after %.2f s\n", s);
    if (s > 20) f.Add("took " + std::to_string(s) + " s for a 3 s timeout");
  }
  Report(name, f.text());
}

void CheckRanks(int32_t world) {
  const std::string name = std::to_string(world) + " ranks on " + std::to_string(world) +
                           " GPUs (threads)";
  Failures f;
  std::string id;
  if (f.Expect("NewUniqueId", NcclGroup::NewUniqueId(&id), Code::kOk)) {
    std::vector<std::thread> threads;
    for (int32_t r = 0; r < world; ++r) {
      threads.emplace_back(RunRank, r, world, id, size_t{1} << 20, size_t{4099}, &f);
    }
    for (std::thread& t : threads) t.join();
  }
  Report(name, f.text());
}

// Rank 1 joins but skips the all-reduce: rank 0 times out, and its group is
// unusable afterwards.
void CheckSilentPeer() {
  const std::string name = "2 ranks, rank 1 skips a collective";
  Failures f;
  std::string id;
  if (f.Expect("NewUniqueId", NcclGroup::NewUniqueId(&id), Code::kOk)) {
    std::atomic<bool> rank0_done{false};
    auto rank = [&](int32_t r) {
      NcclGroup::Options opts;
      opts.rank = r;
      opts.world_size = 2;
      opts.device = r;
      opts.timeout = milliseconds(3000);
      std::unique_ptr<NcclGroup> group;
      if (!f.Expect("rank " + std::to_string(r) + " Create", NcclGroup::Create(opts, id, &group),
                    Code::kOk)) {
        rank0_done = true;
        return;
      }
      if (r == 0) {
        DeviceFloats d(0, 1024);
        f.Expect("rank 0 AllReduceSum", group->AllReduceSum(d.get(), 1024),
                 Code::kDeadlineExceeded);
        f.Expect("rank 0 after timeout", group->Barrier(), Code::kFailedPrecondition);
        rank0_done = true;
      } else {
        while (!rank0_done) std::this_thread::sleep_for(milliseconds(10));
      }
      // ~NcclGroup: rank 1's flush cannot complete (rank 0 aborted) and
      // must give up within its timeout.
    };
    std::thread t0(rank, 0), t1(rank, 1);
    t0.join();
    t1.join();
  }
  Report(name, f.text());
}

int Run() {
  const int count = gpu_check::DeviceCountOrSkip();
  if (count == 0) return gpu_check::kExitSkip;
  int version = 0;
  ncclGetVersion(&version);
  std::printf("NCCL %d, %d CUDA device(s)\n", version, count);
  for (int d = 0; d < count; ++d) gpu_check::PrintDevice(d);
  std::fflush(stdout);

  // A hang must not eat the GPU machine's time: fail the whole check instead.
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::seconds(120));
    std::printf("FAIL watchdog: nccl_group_gpu_check still running after 120 s (hung?)\n");
    std::fflush(stdout);
    std::_Exit(1);
  }).detach();

  CheckOneRank();
  if (count >= 2) {
    CheckRanks(2);
    if (count > 2) CheckRanks(std::min(count, 8));
    CheckSilentPeer();
  } else {
    std::printf("(1 GPU: the multi-rank cases need 2+ GPUs and were not run)\n");
  }
  CheckJoinTimeout();  // last: NCCL may leave bootstrap threads of the aborted init behind
  return gpu_check::Summary("nccl_group_gpu_check");
}

}  // namespace
}  // namespace folio

int main() { return folio::Run(); }
