// ShmCommunicator: ranks as threads of this process (gloo's HashStore as the
// rendezvous store) and as forked processes (gloo's FileStore in a temp
// dir). All-reduce of random data equals the rank-order sum bit for bit on
// every rank (1 element, odd counts, counts over one slot), gathers, barriers,
// thousands of collectives in a row (both phases reused), a peer that never
// comes or stops calling (DEADLINE_EXCEEDED within the timeout), a peer
// process that dies or an Abort() from another thread (UNAVAILABLE long
// before the timeout), and no segment left in /dev/shm. Then tensor
// parallelism over it: logits bit-identical to LocalCommunicator's (same
// summation order) and within 1e-4 of one rank, and the same greedy tokens
// as one rank through a real Scheduler.

#include "worker/shm_communicator.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/rendezvous/hash_store.h"
#include "tests/worker/runner_workload.h"
#include "tests/worker/worker_test_util.h"
#include "worker/cache_engine.h"
#include "worker/cpu_worker.h"
#include "worker/local_communicator.h"
#include "worker/model_runner.h"
#include "worker/model_weights.h"

namespace folio {
namespace {

using Clock = std::chrono::steady_clock;

// Names of folio segments in /dev/shm now.
std::vector<std::string> FolioSegments() {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(&ShmCommunicator::kSegmentPrefix[1], 0) == 0) out.push_back(name);
  }
  return out;
}

bool SegmentExists(const std::string& name) {
  return !name.empty() && std::filesystem::exists("/dev/shm" + name);
}

using testing::OnRanks;

// world communicators on threads, joined through one HashStore.
std::vector<std::unique_ptr<ShmCommunicator>> ThreadGroup(int world, int64_t slot_bytes,
                                                          absl::Duration timeout = absl::Seconds(30)) {
  gloo::rendezvous::HashStore store;
  std::vector<std::unique_ptr<ShmCommunicator>> comms(world);
  std::vector<absl::Status> errors(world);
  OnRanks(world, [&](int r) {
    ShmCommunicator::Options o;
    o.rank = r;
    o.world_size = world;
    o.slot_bytes = slot_bytes;
    o.timeout = timeout;
    absl::StatusOr<std::unique_ptr<ShmCommunicator>> c = ShmCommunicator::Create(o, store);
    if (c.ok()) {
      comms[r] = std::move(*c);
    } else {
      errors[r] = c.status();
    }
  });
  for (int r = 0; r < world; ++r) EXPECT_TRUE(errors[r].ok()) << "rank " << r << ": " << errors[r];
  return comms;
}

// Rank r's data for iteration `it`: deterministic, so any process can
// compute every rank's (and the expected sum).
std::vector<float> RankData(int rank, int it, int64_t count) {
  std::mt19937 gen(static_cast<uint32_t>(rank * 7919 + it * 104729 + count));
  std::uniform_real_distribution<float> dist(-100.0f, 100.0f);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = dist(gen);
  return v;
}

// s0 + s1 + ... in rank order, element by element.
std::vector<float> RankOrderSum(int world, int it, int64_t count) {
  std::vector<float> sum = RankData(0, it, count);
  for (int q = 1; q < world; ++q) {
    const std::vector<float> d = RankData(q, it, count);
    for (int64_t i = 0; i < count; ++i) sum[i] += d[i];
  }
  return sum;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Slots of 64 floats: counts 63, 64, 65 and 1000 cross chunk boundaries.
constexpr int64_t kSmallSlot = 64 * sizeof(float);
const int64_t kCounts[] = {1, 3, 63, 64, 65, 257, 1000};

// One rank's share of the collective checks; returns the first failure.
absl::Status RunCollectives(ShmCommunicator& comm, int iterations) {
  const int world = comm.world_size(), rank = comm.rank();
  for (int it = 0; it < iterations; ++it) {
    const int64_t count = kCounts[it % std::size(kCounts)];
    std::vector<float> data = RankData(rank, it, count);
    if (absl::Status s = comm.AllReduceSum(data.data(), count); !s.ok()) return s;
    if (!SameBits(data, RankOrderSum(world, it, count))) {
      return absl::InternalError(absl::StrCat("all-reduce of ", count, " floats, iteration ", it,
                                              ": not the rank-order sum on rank ", rank));
    }
    if (it % 3 == 0) {
      const std::vector<float> send = RankData(rank, -it, count);
      std::vector<float> recv(rank == 0 ? size_t(count * world) : 0);
      if (absl::Status s = comm.GatherToRank0(send.data(), count, rank == 0 ? recv.data() : nullptr);
          !s.ok()) {
        return s;
      }
      if (rank == 0) {
        for (int q = 0; q < world; ++q) {
          const std::vector<float> expect = RankData(q, -it, count);
          if (!std::equal(expect.begin(), expect.end(), recv.begin() + q * count)) {
            return absl::InternalError(absl::StrCat("gather of ", count, " floats, iteration ", it,
                                                    ": rank ", q, "'s part differs"));
          }
        }
      }
    }
    if (it % 5 == 0) {
      if (absl::Status s = comm.Barrier(); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

TEST(ShmCommunicatorTest, ThreadsAllReduceGatherBarrierBitIdentical) {
  for (int world : {1, 2, 3, 4}) {
    SCOPED_TRACE(::testing::Message() << "world " << world);
    auto comms = ThreadGroup(world, kSmallSlot);
    ASSERT_TRUE(comms[0] != nullptr);
    if (world > 1) {
      EXPECT_FALSE(SegmentExists(comms[0]->segment_name()));
    }
    std::vector<absl::Status> errors(world);
    OnRanks(world, [&](int r) { errors[r] = RunCollectives(*comms[r], 300); });
    for (int r = 0; r < world; ++r) EXPECT_TRUE(errors[r].ok()) << "rank " << r << ": " << errors[r];
    EXPECT_GT(comms[0]->busy_seconds(), 0.0);
  }
}

TEST(ShmCommunicatorTest, ManyCollectivesInARowWithTheDefaultSlot) {
  auto comms = ThreadGroup(2, ShmCommunicator::Options().slot_bytes);
  ASSERT_TRUE(comms[1] != nullptr);
  std::vector<absl::Status> errors(2);
  OnRanks(2, [&](int r) {
    for (int it = 0; it < 5000 && errors[r].ok(); ++it) {
      float x[3] = {float(r + it), 0.5f, -float(it)};
      errors[r] = comms[r]->AllReduceSum(x, 3);
      if (errors[r].ok() && (x[0] != float(2 * it + 1) || x[1] != 1.0f || x[2] != -2.0f * it)) {
        errors[r] = absl::InternalError(absl::StrCat("wrong sum at iteration ", it));
      }
    }
    // One tensor larger than the 1 MiB slot: 3 chunks.
    if (errors[r].ok()) {
      const int64_t n = (int64_t{1} << 18) * 2 + 12345;
      std::vector<float> big = RankData(r, 1, n);
      errors[r] = comms[r]->AllReduceSum(big.data(), n);
      if (errors[r].ok() && !SameBits(big, RankOrderSum(2, 1, n))) {
        errors[r] = absl::InternalError("big all-reduce differs");
      }
    }
  });
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(errors[r].ok()) << "rank " << r << ": " << errors[r];
}

// Ranks 1..world-1 as forked processes, rank 0 here; each process checks its
// own results (exit status 0 = all good).
TEST(ShmCommunicatorTest, ProcessesAllReduceGatherBarrierBitIdentical) {
  for (int world : {2, 4}) {
    SCOPED_TRACE(::testing::Message() << "world " << world);
    const std::string dir =
        absl::StrCat(std::filesystem::temp_directory_path().string(), "/folio_shm_test_",
                     getpid(), "_", world);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    auto rank_main = [&](int r) -> absl::Status {
      gloo::rendezvous::FileStore store(dir);
      ShmCommunicator::Options o;
      o.rank = r;
      o.world_size = world;
      o.slot_bytes = kSmallSlot;
      o.timeout = absl::Seconds(60);
      absl::StatusOr<std::unique_ptr<ShmCommunicator>> c = ShmCommunicator::Create(o, store);
      if (!c.ok()) return c.status();
      if (SegmentExists((*c)->segment_name())) return absl::InternalError("segment not unlinked");
      return RunCollectives(**c, 400);
    };
    std::vector<pid_t> children;
    for (int r = 1; r < world; ++r) {
      const pid_t pid = fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        const absl::Status s = rank_main(r);
        if (!s.ok()) std::fprintf(stderr, "rank %d: %s\n", r, s.ToString().c_str());
        _exit(s.ok() ? 0 : 1);
      }
      children.push_back(pid);
    }
    EXPECT_TRUE(rank_main(0).ok());
    for (pid_t pid : children) {
      int status = 0;
      ASSERT_EQ(waitpid(pid, &status, 0), pid);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a child rank failed";
    }
    std::filesystem::remove_all(dir);
  }
}

TEST(ShmCommunicatorTest, MissingPeerAtJoinIsDeadlineExceededAndLeavesNoSegment) {
  gloo::rendezvous::HashStore store;
  ShmCommunicator::Options o;
  o.rank = 0;
  o.world_size = 2;
  o.timeout = absl::Milliseconds(300);
  const auto start = Clock::now();
  absl::StatusOr<std::unique_ptr<ShmCommunicator>> c = ShmCommunicator::Create(o, store);
  const double waited = std::chrono::duration<double>(Clock::now() - start).count();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDeadlineExceeded) << c.status();
  EXPECT_NE(c.status().message().find("join"), std::string::npos) << c.status();
  EXPECT_LT(waited, 5.0);
  // The published name is gone.
  const std::vector<char> name = store.get("shm/segment");
  EXPECT_FALSE(SegmentExists(std::string(name.begin(), name.end())));
  // And a rank that never finds rank 0's name times out too.
  gloo::rendezvous::HashStore empty;
  o.rank = 1;
  c = ShmCommunicator::Create(o, empty);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDeadlineExceeded) << c.status();
}

// A store whose waits fail as soon as Abandon() is called, as
// RendezvousStore's do (ABORTED) when the scheduler abandons the group being
// formed because one of its ranks failed.
class AbandonableStore : public gloo::rendezvous::Store {
 public:
  void Abandon() { abandoned_ = true; }
  void set(const std::string& key, const std::vector<char>& data) override { inner_.set(key, data); }
  std::vector<char> get(const std::string& key) override { return inner_.get(key); }
  void wait(const std::vector<std::string>& keys) override { wait(keys, kDefaultTimeout); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    const auto deadline = Clock::now() + timeout;
    while (!abandoned_) {
      try {
        inner_.wait(keys, std::chrono::milliseconds(20));
        return;
      } catch (const std::exception&) {
        if (Clock::now() >= deadline) throw;
      }
    }
    throw std::runtime_error("ABORTED: the group was abandoned");
  }

 private:
  gloo::rendezvous::HashStore inner_;
  std::atomic<bool> abandoned_{false};
};

// Rank 0 makes the segment and then waits for its peer; when the peer died
// before mapping it, the scheduler abandons the group, and rank 0 gives up
// at once (not after the timeout) and leaves no segment behind.
TEST(ShmCommunicatorTest, RankZeroWaitingForAPeerGivesUpWhenTheGroupIsAbandoned) {
  AbandonableStore store;
  ShmCommunicator::Options o;
  o.rank = 0;
  o.world_size = 2;
  o.timeout = absl::Seconds(60);
  std::thread abandon([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    store.Abandon();
  });
  const auto start = Clock::now();
  absl::StatusOr<std::unique_ptr<ShmCommunicator>> c = ShmCommunicator::Create(o, store);
  const double waited = std::chrono::duration<double>(Clock::now() - start).count();
  abandon.join();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable) << c.status();
  EXPECT_NE(c.status().message().find("abandoned"), std::string::npos) << c.status();
  EXPECT_LT(waited, 5.0);
  const std::vector<char> name = store.get("shm/segment");
  EXPECT_FALSE(SegmentExists(std::string(name.begin(), name.end())));
}

TEST(ShmCommunicatorTest, PeerThatStopsCallingIsDeadlineExceededThenBroken) {
  auto comms = ThreadGroup(2, kSmallSlot, absl::Milliseconds(300));
  ASSERT_TRUE(comms[1] != nullptr);
  float x[5] = {1, 2, 3, 4, 5};
  const auto start = Clock::now();
  absl::Status s = comms[0]->AllReduceSum(x, 5);  // rank 1 never calls
  const double waited = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find("all-reduce"), std::string::npos) << s;
  EXPECT_NE(s.message().find("rank(s) 1"), std::string::npos) << s;
  EXPECT_GE(waited, 0.25);
  EXPECT_LT(waited, 5.0);
  // The group is broken for everyone now.
  EXPECT_EQ(comms[1]->AllReduceSum(x, 5).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(comms[0]->Barrier().code(), absl::StatusCode::kUnavailable);
  s = comms[1]->GatherToRank0(x, 5, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
}

// Abort() from another thread (the worker initialized again) wakes a rank
// waiting for a peer that never comes, long before the timeout, and breaks
// the group for every rank.
TEST(ShmCommunicatorTest, AbortFromAnotherThreadEndsAWaitingCollective) {
  auto comms = ThreadGroup(2, kSmallSlot, absl::Seconds(60));
  ASSERT_TRUE(comms[1] != nullptr);
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    comms[0]->Abort();
  });
  float x[5] = {1, 2, 3, 4, 5};
  const auto start = Clock::now();
  absl::Status s = comms[0]->AllReduceSum(x, 5);  // rank 1 never calls
  const double waited = std::chrono::duration<double>(Clock::now() - start).count();
  aborter.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("aborted"), std::string::npos) << s;
  EXPECT_LT(waited, 5.0);
  EXPECT_EQ(comms[1]->AllReduceSum(x, 5).code(), absl::StatusCode::kUnavailable);
  comms[1]->Abort();  // idempotent
  EXPECT_EQ(comms[0]->Barrier().code(), absl::StatusCode::kUnavailable);
  // One rank: nothing to break.
  auto alone = ThreadGroup(1, kSmallSlot);
  ASSERT_TRUE(alone[0] != nullptr);
  alone[0]->Abort();
  EXPECT_TRUE(alone[0]->AllReduceSum(x, 5).ok());
}

TEST(ShmCommunicatorTest, PeerProcessThatDiesIsUnavailableBeforeTheTimeout) {
  const std::string dir = absl::StrCat(std::filesystem::temp_directory_path().string(),
                                       "/folio_shm_test_dead_", getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  ShmCommunicator::Options o;
  o.world_size = 2;
  o.timeout = absl::Seconds(60);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    gloo::rendezvous::FileStore store(dir);
    o.rank = 1;
    absl::StatusOr<std::unique_ptr<ShmCommunicator>> c = ShmCommunicator::Create(o, store);
    float x = 1.0f;
    if (c.ok()) (*c)->AllReduceSum(&x, 1).IgnoreError();
    _exit(c.ok() ? 0 : 1);  // dies without leaving the group
  }
  gloo::rendezvous::FileStore store(dir);
  o.rank = 0;
  absl::StatusOr<std::unique_ptr<ShmCommunicator>> c = ShmCommunicator::Create(o, store);
  ASSERT_TRUE(c.ok()) << c.status();
  float x = 2.0f;
  ASSERT_TRUE((*c)->AllReduceSum(&x, 1).ok());
  EXPECT_EQ(x, 3.0f);
  const auto start = Clock::now();
  absl::Status s = (*c)->AllReduceSum(&x, 1);  // rank 1 has exited (or is exiting)
  const double waited = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("exited"), std::string::npos) << s;
  EXPECT_LT(waited, 10.0);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::filesystem::remove_all(dir);
}

TEST(ShmCommunicatorTest, NoSegmentOutlivesItsGroup) {
  const std::vector<std::string> before = FolioSegments();
  std::string name;
  {
    auto comms = ThreadGroup(3, kSmallSlot);
    ASSERT_TRUE(comms[2] != nullptr);
    name = comms[0]->segment_name();
    EXPECT_EQ(name.rfind(ShmCommunicator::kSegmentPrefix, 0), 0u) << name;
    EXPECT_FALSE(SegmentExists(name));  // unlinked as soon as every rank mapped it
    std::vector<absl::Status> errors(3);
    OnRanks(3, [&](int r) { errors[r] = comms[r]->Barrier(); });
    for (const absl::Status& e : errors) EXPECT_TRUE(e.ok()) << e;
  }
  EXPECT_FALSE(SegmentExists(name));
  // Nothing of ours among the segments now (others' tests may run alongside).
  for (const std::string& s : FolioSegments()) {
    EXPECT_NE(s, name.substr(1));
    EXPECT_EQ(s.find(absl::StrCat("folio-shm-", getpid(), "-")), std::string::npos)
        << "leaked " << s;
  }
  (void)before;
}

TEST(ShmCommunicatorTest, HostIdentityNamesThisHostAndNamespaces) {
  const std::string id = ShmCommunicator::HostIdentity();
  EXPECT_EQ(id, ShmCommunicator::HostIdentity());
  EXPECT_NE(id.find("ipc:["), std::string::npos) << id;
  EXPECT_NE(id.find("pid:["), std::string::npos) << id;
}

TEST(ShmCommunicatorTest, InvalidOptions) {
  gloo::rendezvous::HashStore store;
  ShmCommunicator::Options o;
  o.rank = 2;
  o.world_size = 2;
  EXPECT_EQ(ShmCommunicator::Create(o, store).status().code(), absl::StatusCode::kInvalidArgument);
  o.rank = 0;
  o.world_size = ShmCommunicator::kMaxRanks + 1;
  EXPECT_EQ(ShmCommunicator::Create(o, store).status().code(), absl::StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------
// Tensor parallelism over shared memory (mirrors tensor_parallel_test.cc).

struct ModelCase {
  const char* name;
  const char* args;
};

const ModelCase kModels[] = {
    {"kv1_tied", "--hidden-size 64 --layers 2 --heads 4 --kv-heads 1 --head-dim 16 "
                 "--intermediate-size 128 --vocab-size 1001 --tie --dtype f32 --seed 11"},
    {"kv4_untied", "--hidden-size 64 --layers 2 --heads 8 --kv-heads 4 --head-dim 8 "
                   "--intermediate-size 96 --vocab-size 1003 --dtype f32 --seed 12"},
};

class ShmTensorParallelTest : public ::testing::TestWithParam<ModelCase> {
 protected:
  void SetUp() override {
    dir_ = testing::MakeRandomModel(GetParam().name, GetParam().args);
    ASSERT_FALSE(dir_.empty()) << "tools/make_random_model.py failed for " << GetParam().name;
  }
  std::string dir_;
};

// Communicators of one group: shared memory or LocalCommunicator.
std::vector<std::unique_ptr<Communicator>> Group(int world, bool shm) {
  std::vector<std::unique_ptr<Communicator>> out;
  if (world == 1) {
    out.emplace_back();
    return out;
  }
  if (shm) {
    // Small slots, so prefills go through several chunks.
    for (auto& c : ThreadGroup(world, 4096)) out.push_back(std::move(c));
  } else {
    for (auto& c : LocalCommunicator::CreateGroup(world)) out.push_back(std::move(c));
  }
  return out;
}

// A prefill (7 and 20 tokens) then a decode step; rank 0's logits per step.
std::vector<std::vector<float>> RunnerLogits(const std::string& dir, int world, bool shm) {
  std::vector<std::vector<float>> step0(world), step1(world);
  auto comms = Group(world, shm);
  std::vector<absl::Status> errors(world);
  OnRanks(world, [&](int rank) {
    errors[rank] = testing::RunTwoStepWorkload(dir, rank, world, comms[rank].get(), &step0[rank],
                                               &step1[rank]);
  });
  for (int r = 0; r < world; ++r) EXPECT_TRUE(errors[r].ok()) << "rank " << r << ": " << errors[r];
  return {step0[0], step1[0]};
}

TEST_P(ShmTensorParallelTest, LogitsMatchOneRankAndLocalCommunicatorBits) {
  const auto ref = RunnerLogits(dir_, 1, false);
  ASSERT_FALSE(ref[0].empty());
  for (int world : {2, 4}) {
    SCOPED_TRACE(::testing::Message() << "TP=" << world);
    const auto got = RunnerLogits(dir_, world, true);
    const auto local = RunnerLogits(dir_, world, false);
    for (size_t step = 0; step < ref.size(); ++step) {
      ASSERT_EQ(got[step].size(), ref[step].size());
      // The same sums in the same order as LocalCommunicator: same bits.
      EXPECT_TRUE(SameBits(got[step], local[step])) << "step " << step;
      float scale = 0.0f, worst = 0.0f;
      for (float v : ref[step]) scale = std::max(scale, std::fabs(v));
      for (size_t i = 0; i < ref[step].size(); ++i) {
        worst = std::max(worst, std::fabs(got[step][i] - ref[step][i]));
      }
      EXPECT_LE(worst, 1e-4f * scale) << "step " << step;
    }
  }
}

std::vector<std::vector<TokenId>> Generate(const std::string& dir, int world, bool shm) {
  auto comms = Group(world, shm);
  std::vector<Communicator*> ranks;
  for (auto& c : comms) ranks.push_back(c.get());
  auto tokens = testing::GenerateOnRanks(dir, ranks);
  EXPECT_TRUE(tokens.ok()) << tokens.status();
  return tokens.ok() ? *std::move(tokens) : std::vector<std::vector<TokenId>>{};
}

TEST_P(ShmTensorParallelTest, GreedyTokensMatchOneRank) {
  const auto ref = Generate(dir_, 1, false);
  ASSERT_EQ(ref.size(), 10u);
  for (int world : {2, 4}) {
    SCOPED_TRACE(::testing::Message() << "TP=" << world);
    EXPECT_EQ(Generate(dir_, world, true), ref);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ShmTensorParallelTest, ::testing::ValuesIn(kModels),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace folio
