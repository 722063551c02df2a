// folio.v1.Rendezvous over real gRPC on 127.0.0.1: set/get, blocking get and
// wait released by a later set, deadlines, limits and shutdown.

#include "scheduler/rendezvous_service.h"

#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <thread>

namespace folio {
namespace {

class RendezvousServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                   grpc::InsecureChannelCredentials());
    stub_ = v1::Rendezvous::NewStub(channel_);
  }
  void TearDown() override {
    service_.Shutdown();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  }

  grpc::Status Set(const std::string& key, const std::string& value) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::RendezvousSetRequest req;
    req.set_key(key);
    req.set_value(value);
    v1::RendezvousSetResponse resp;
    return stub_->Set(&ctx, req, &resp);
  }
  grpc::Status Get(const std::string& key, std::string* value,
                   std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + timeout);
    v1::RendezvousGetRequest req;
    req.set_key(key);
    v1::RendezvousGetResponse resp;
    grpc::Status s = stub_->Get(&ctx, req, &resp);
    *value = resp.value();
    return s;
  }

  RendezvousService service_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Rendezvous::Stub> stub_;
};

TEST_F(RendezvousServiceTest, SetThenGet) {
  ASSERT_TRUE(Set("c1/a", std::string("\0\1binary", 8)).ok());
  std::string v;
  ASSERT_TRUE(Get("c1/a", &v).ok());
  EXPECT_EQ(v, std::string("\0\1binary", 8));
  ASSERT_TRUE(Set("c1/a", "replaced").ok());
  ASSERT_TRUE(Get("c1/a", &v).ok());
  EXPECT_EQ(v, "replaced");
}

TEST_F(RendezvousServiceTest, GetBlocksUntilSet) {
  std::string v;
  grpc::Status got;
  std::thread getter([&] { got = Get("c1/late", &v); });
  // The getter is blocked in the server; the set releases it.
  ASSERT_TRUE(Set("c1/late", "here").ok());
  getter.join();
  ASSERT_TRUE(got.ok()) << got.error_message();
  EXPECT_EQ(v, "here");
}

TEST_F(RendezvousServiceTest, WaitForSeveralKeys) {
  grpc::Status waited;
  std::thread waiter([&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::RendezvousWaitRequest req;
    req.add_keys("k/0");
    req.add_keys("k/1");
    v1::RendezvousWaitResponse resp;
    waited = stub_->Wait(&ctx, req, &resp);
  });
  ASSERT_TRUE(Set("k/1", "x").ok());
  ASSERT_TRUE(Set("k/0", "y").ok());
  waiter.join();
  EXPECT_TRUE(waited.ok()) << waited.error_message();
}

TEST_F(RendezvousServiceTest, DeadlineExceededNamesTheKey) {
  std::string v;
  const grpc::Status s = Get("never/set", &v, std::chrono::milliseconds(200));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
}

TEST_F(RendezvousServiceTest, LimitsAndEmptyKey) {
  EXPECT_EQ(Set("", "v").error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Set(std::string(RendezvousService::kMaxKeyBytes + 1, 'k'), "v").error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Set("big", std::string(RendezvousService::kMaxValueBytes + 1, 'v')).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(RendezvousServiceTest, ShutdownReleasesWaiters) {
  std::string v;
  grpc::Status got;
  std::thread getter([&] { got = Get("c1/never", &v, std::chrono::seconds(60)); });
  // Shutdown may run before the getter arrives; either way it returns UNAVAILABLE.
  service_.Shutdown();
  getter.join();
  EXPECT_EQ(got.error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(RendezvousServiceTest, EraseWithPrefix) {
  ASSERT_TRUE(Set("a/1", "1").ok());
  ASSERT_TRUE(Set("a/2", "2").ok());
  ASSERT_TRUE(Set("b/1", "3").ok());
  EXPECT_EQ(service_.size(), 3u);
  service_.EraseWithPrefix("a/");
  EXPECT_EQ(service_.size(), 1u);
}

// A rank fails while the group forms: the others' waits under its prefix
// end at once (ABORTED), the prefix's keys go, later calls under it are
// refused, and other groups' keys are untouched.
TEST_F(RendezvousServiceTest, AbandonReleasesWaitersOfThatGroupOnly) {
  ASSERT_TRUE(Set("run/g1/0", "x").ok());
  ASSERT_TRUE(Set("run/g2/0", "y").ok());
  std::string v;
  grpc::Status got;
  std::thread getter([&] { got = Get("run/g1/1", &v, std::chrono::seconds(60)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto start = std::chrono::steady_clock::now();
  service_.Abandon("run/g1/");
  getter.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(got.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_NE(got.error_message().find("abandoned"), std::string::npos) << got.error_message();
  EXPECT_EQ(Set("run/g1/1", "z").error_code(), grpc::StatusCode::ABORTED);
  EXPECT_EQ(Get("run/g1/0", &v).error_code(), grpc::StatusCode::ABORTED);
  ASSERT_TRUE(Get("run/g2/0", &v).ok());
  EXPECT_EQ(v, "y");
  EXPECT_TRUE(Set("run/g10/0", "w").ok()) << "g10 is another group than g1";
  EXPECT_EQ(service_.size(), 2u);
}

}  // namespace
}  // namespace folio
