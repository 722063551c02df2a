// GlooCommunicator with 2 and 4 ranks on threads of one process over
// 127.0.0.1, meeting through RendezvousStore and a RendezvousService served
// in the test; and the store's own contract (prefixes, waits, deadlines).

#include "worker/gloo_communicator.h"

#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "gloo/common/error.h"
#include "scheduler/rendezvous_service.h"
#include "worker/rendezvous_store.h"

namespace folio {
namespace {

class GlooTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    address_ = "127.0.0.1:" + std::to_string(port);
  }
  void TearDown() override {
    service_.Shutdown();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  }
  std::unique_ptr<RendezvousStore> Store(const std::string& prefix,
                                         absl::Duration timeout = absl::Seconds(30)) {
    RendezvousStore::Options o;
    o.address = address_;
    o.prefix = prefix;
    o.timeout = timeout;
    absl::StatusOr<std::unique_ptr<RendezvousStore>> s = RendezvousStore::Create(o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }

  RendezvousService service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

TEST_F(GlooTest, StoreSetGetWaitWithPrefixes) {
  auto a = Store("run1/");
  auto b = Store("run2/");
  ASSERT_TRUE(a->Set("k", "one").ok());
  ASSERT_TRUE(b->Set("k", "two").ok());
  EXPECT_EQ(*a->Get("k"), "one");
  EXPECT_EQ(*b->Get("k"), "two");
  EXPECT_TRUE(a->Wait({"k"}, absl::Seconds(5)).ok());
  // Gloo's face: bytes in, bytes out.
  a->set("bin", std::vector<char>{'\0', 'x', '\xff'});
  EXPECT_EQ(a->get("bin"), (std::vector<char>{'\0', 'x', '\xff'}));
  // A get blocked on a key another client sets later.
  std::string got;
  std::thread getter([&] { got = *b->Get("late"); });
  ASSERT_TRUE(b->Set("late", "v").ok());
  getter.join();
  EXPECT_EQ(got, "v");
}

TEST_F(GlooTest, StoreDeadlines) {
  auto s = Store("dl/", absl::Milliseconds(200));
  EXPECT_EQ(s->Get("missing").status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(s->Wait({"missing"}, absl::Milliseconds(100)).code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_THROW(s->get("missing"), gloo::IoException);
  EXPECT_THROW(s->wait({"missing"}, std::chrono::milliseconds(100)), gloo::IoException);
}

TEST_F(GlooTest, StoreWithNoServerFailsWithinTheDeadline) {
  RendezvousStore::Options o;
  o.address = "127.0.0.1:1";  // nothing listens there
  o.timeout = absl::Milliseconds(300);
  auto s = RendezvousStore::Create(o);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE((*s)->Set("k", "v").ok());
}

void RunGroup(const std::string& address, int world) {
  std::vector<absl::Status> errors(world);
  std::vector<std::vector<float>> reduced(world);
  std::vector<float> gathered;
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      RendezvousStore::Options so;
      so.address = address;
      so.prefix = "tp" + std::to_string(world) + "/";
      absl::StatusOr<std::unique_ptr<RendezvousStore>> store = RendezvousStore::Create(so);
      if (!store.ok()) {
        errors[r] = store.status();
        return;
      }
      GlooCommunicator::Options go;
      go.rank = r;
      go.world_size = world;
      go.hostname = "127.0.0.1";
      go.timeout = absl::Seconds(30);
      absl::StatusOr<std::unique_ptr<GlooCommunicator>> comm = GlooCommunicator::Create(go, **store);
      if (!comm.ok()) {
        errors[r] = comm.status();
        return;
      }
      EXPECT_EQ((*comm)->rank(), r);
      EXPECT_EQ((*comm)->world_size(), world);
      for (int round = 0; round < 3; ++round) {  // repeated collectives reuse the pairs
        std::vector<float> data(1000);
        for (int i = 0; i < 1000; ++i) data[i] = float(r * 1000 + i + round);
        if (absl::Status s = (*comm)->AllReduceSum(data.data(), 1000); !s.ok()) {
          errors[r] = s;
          return;
        }
        reduced[r] = data;
      }
      std::vector<float> send = {float(r), float(r) + 0.5f, -float(r)};
      std::vector<float> recv(r == 0 ? 3 * world : 0);
      if (absl::Status s = (*comm)->GatherToRank0(send.data(), 3, r == 0 ? recv.data() : nullptr);
          !s.ok()) {
        errors[r] = s;
        return;
      }
      if (r == 0) gathered = recv;
      errors[r] = (*comm)->Barrier();
      EXPECT_GT((*comm)->busy_seconds(), 0.0);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) ASSERT_TRUE(errors[r].ok()) << "rank " << r << ": " << errors[r];
  for (int r = 0; r < world; ++r) {
    for (int i = 0; i < 1000; ++i) {
      // sum over ranks q of q*1000 + i + 2 (the last round)
      const float expect = 1000.0f * world * (world - 1) / 2 + float(world) * (i + 2);
      ASSERT_EQ(reduced[r][i], expect) << "rank " << r << " element " << i;
    }
    // Every rank holds the same bits.
    EXPECT_EQ(reduced[r], reduced[0]);
  }
  ASSERT_EQ(gathered.size(), size_t(3 * world));
  for (int q = 0; q < world; ++q) {
    EXPECT_EQ(gathered[3 * q], float(q));
    EXPECT_EQ(gathered[3 * q + 1], float(q) + 0.5f);
    EXPECT_EQ(gathered[3 * q + 2], -float(q));
  }
}

TEST_F(GlooTest, TwoRanks) { RunGroup(address_, 2); }
TEST_F(GlooTest, FourRanks) { RunGroup(address_, 4); }

TEST_F(GlooTest, MissingPeerTimesOutAsStatus) {
  auto store = Store("lonely/", absl::Milliseconds(500));
  GlooCommunicator::Options go;
  go.rank = 0;
  go.world_size = 2;
  go.timeout = absl::Milliseconds(500);
  absl::StatusOr<std::unique_ptr<GlooCommunicator>> comm = GlooCommunicator::Create(go, *store);
  EXPECT_FALSE(comm.ok());
}

// Abort() from another thread (the worker initialized again) wakes a rank
// whose peer hangs (never calls the collective) long before the timeout, and
// breaks the group: later collectives fail too.
TEST_F(GlooTest, AbortFromAnotherThreadEndsAWaitingCollective) {
  std::vector<std::unique_ptr<GlooCommunicator>> comms(2);
  std::vector<std::thread> joiners;
  for (int r = 0; r < 2; ++r) {
    joiners.emplace_back([&, r] {
      auto store = Store("abort/");
      GlooCommunicator::Options go;
      go.rank = r;
      go.world_size = 2;
      go.timeout = absl::Seconds(60);
      absl::StatusOr<std::unique_ptr<GlooCommunicator>> comm = GlooCommunicator::Create(go, *store);
      ASSERT_TRUE(comm.ok()) << comm.status();
      comms[r] = std::move(*comm);
    });
  }
  for (auto& t : joiners) t.join();
  ASSERT_TRUE(comms[0] != nullptr && comms[1] != nullptr);
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    comms[0]->Abort();
  });
  std::vector<float> x(4096, 1.0f);
  const auto start = std::chrono::steady_clock::now();
  absl::Status s = comms[0]->AllReduceSum(x.data(), int64_t(x.size()));  // rank 1 never calls
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  aborter.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("aborted"), std::string::npos) << s;
  EXPECT_LT(waited, 10.0);
  comms[0]->Abort();  // idempotent
  EXPECT_FALSE(comms[0]->Barrier().ok());
}

}  // namespace
}  // namespace folio
