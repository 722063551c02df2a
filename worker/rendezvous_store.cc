#include "worker/rendezvous_store.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "gloo/common/error.h"

namespace folio {
namespace {

absl::Status ToAbsl(const grpc::Status& s, const std::string& what) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat("rendezvous ", what, ": ", s.error_message()));
}

void SetDeadline(grpc::ClientContext* ctx, absl::Duration timeout) {
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  // The scheduler may not be listening yet: wait for it within the deadline.
  ctx->set_wait_for_ready(true);
}

[[noreturn]] void Throw(const absl::Status& s) {
  throw gloo::IoException(std::string(s.message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<RendezvousStore>> RendezvousStore::Create(const Options& options) {
  if (options.address.empty()) return absl::InvalidArgumentError("rendezvous address is empty");
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(4 << 20);
  args.SetMaxSendMessageSize(4 << 20);
  auto channel = grpc::CreateCustomChannel(options.address, grpc::InsecureChannelCredentials(),
                                           args);
  return std::make_unique<RendezvousStore>(std::move(channel), options);
}

RendezvousStore::RendezvousStore(std::shared_ptr<grpc::Channel> channel, const Options& options)
    : options_(options), stub_(v1::Rendezvous::NewStub(channel)) {}

absl::Status RendezvousStore::Set(const std::string& key, const std::string& value) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, options_.timeout);
  v1::RendezvousSetRequest req;
  req.set_key(options_.prefix + key);
  req.set_value(value);
  v1::RendezvousSetResponse resp;
  return ToAbsl(stub_->Set(&ctx, req, &resp), absl::StrCat("set ", req.key()));
}

absl::StatusOr<std::string> RendezvousStore::Get(const std::string& key) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, options_.timeout);
  v1::RendezvousGetRequest req;
  req.set_key(options_.prefix + key);
  v1::RendezvousGetResponse resp;
  if (absl::Status s = ToAbsl(stub_->Get(&ctx, req, &resp), absl::StrCat("get ", req.key()));
      !s.ok()) {
    return s;
  }
  return std::move(*resp.mutable_value());
}

absl::Status RendezvousStore::Wait(const std::vector<std::string>& keys, absl::Duration timeout) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, timeout);
  v1::RendezvousWaitRequest req;
  for (const std::string& k : keys) req.add_keys(options_.prefix + k);
  v1::RendezvousWaitResponse resp;
  return ToAbsl(stub_->Wait(&ctx, req, &resp), absl::StrCat("wait for ", keys.size(), " keys"));
}

void RendezvousStore::set(const std::string& key, const std::vector<char>& data) {
  if (absl::Status s = Set(key, std::string(data.begin(), data.end())); !s.ok()) Throw(s);
}

std::vector<char> RendezvousStore::get(const std::string& key) {
  absl::StatusOr<std::string> v = Get(key);
  if (!v.ok()) Throw(v.status());
  return std::vector<char>(v->begin(), v->end());
}

void RendezvousStore::wait(const std::vector<std::string>& keys) {
  if (absl::Status s = Wait(keys, options_.timeout); !s.ok()) Throw(s);
}

void RendezvousStore::wait(const std::vector<std::string>& keys,
                           const std::chrono::milliseconds& timeout) {
  if (absl::Status s = Wait(keys, absl::FromChrono(timeout)); !s.ok()) Throw(s);
}

}  // namespace folio
