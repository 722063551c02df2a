#include "worker/gloo_communicator.h"

#include <algorithm>
#include <exception>
#include <string>
#include <typeinfo>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gloo/allreduce.h"
#include "gloo/barrier.h"
#include "gloo/common/error.h"
#include "gloo/gather.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/store.h"
#include "gloo/transport/tcp/device.h"

// gloo::transport::tcp::Pair::signalExceptionExternal(const std::string&),
// public and exported by libgloo: what Gloo itself calls when a buffer's wait
// times out. It stores the error in the pair, wakes every buffer waiting on
// it (they throw) and closes the pair. Declared here by its symbol because
// Debian's libgloo-dev lacks gloo/common/memory.h, which
// gloo/transport/tcp/pair.h includes, so the class cannot be included. A
// free function taking the object first has the member's calling convention
// (Itanium C++ ABI: `this` is the first argument; the returned exception_ptr
// goes through the same hidden result pointer).
std::exception_ptr GlooTcpPairSignalExceptionExternal(::gloo::transport::Pair* pair,
                                                      const std::string& message)
    asm("_ZN4gloo9transport3tcp4Pair23signalExceptionExternalERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE");

namespace folio {
namespace {

// The dynamic type of every pair made by gloo::transport::tcp's device;
// the cast below is valid only for it (tcp::Pair derives from
// transport::Pair alone, so both share one address).
constexpr char kTcpPairTypeName[] = "N4gloo9transport3tcp4PairE";

// Gloo throws: turn what it throws into a Status naming the operation.
template <typename F>
absl::Status Guard(const char* what, F&& f) {
  try {
    f();
    return absl::OkStatus();
  } catch (const gloo::IoException& e) {
    // Timeouts too ("Timed out waiting ...").
    return absl::UnavailableError(absl::StrCat("gloo ", what, ": ", e.what()));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("gloo ", what, ": ", e.what()));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<GlooCommunicator>> GlooCommunicator::Create(
    const Options& options, gloo::rendezvous::Store& store) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("rank must be in [0, world_size), got rank ",
                                                   options.rank, " of ", options.world_size));
  }
  std::shared_ptr<gloo::rendezvous::Context> context;
  absl::Status s = Guard("connect", [&] {
    gloo::transport::tcp::attr attr;
    if (!options.iface.empty()) {
      attr.iface = options.iface;
    } else {
      attr.hostname = options.hostname;
    }
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    context = std::make_shared<gloo::rendezvous::Context>(options.rank, options.world_size);
    context->setTimeout(absl::ToChronoMilliseconds(options.timeout));
    context->connectFullMesh(store, device);
  });
  if (!s.ok()) return s;
  return std::unique_ptr<GlooCommunicator>(new GlooCommunicator(options, std::move(context)));
}

GlooCommunicator::GlooCommunicator(const Options& options, std::shared_ptr<gloo::Context> context)
    : options_(options), context_(std::move(context)) {}

GlooCommunicator::~GlooCommunicator() = default;

void GlooCommunicator::Abort() {
  if (aborted_.exchange(true)) return;
  // The pairs exist from Create() on and are never replaced, so reading
  // them here races with nothing; each pair takes its own lock to signal.
  for (int peer = 0; peer < options_.world_size; ++peer) {
    if (peer == options_.rank) continue;
    gloo::transport::Pair* pair = context_->getPair(peer).get();
    if (pair != nullptr && std::string(typeid(*pair).name()) == kTcpPairTypeName) {
      GlooTcpPairSignalExceptionExternal(pair, "aborted: this rank's group is being rebuilt");
    }
  }
}

absl::Status GlooCommunicator::DoAllReduceSum(float* data, int64_t count) {
  if (options_.world_size == 1 || count == 0) return absl::OkStatus();
  return Guard("all-reduce", [&] {
    gloo::AllreduceOptions opts(context_);
    opts.setOutput(data, static_cast<size_t>(count));
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    opts.setTag(NextTag());
    gloo::allreduce(opts);
  });
}

absl::Status GlooCommunicator::DoGatherToRank0(const float* send, int64_t count, float* recv) {
  if (options_.world_size == 1) {
    if (count > 0 && recv != send) std::copy(send, send + count, recv);
    return absl::OkStatus();
  }
  if (count == 0) return absl::OkStatus();
  return Guard("gather", [&] {
    gloo::GatherOptions opts(context_);
    // Gloo takes a mutable pointer but only reads the input.
    opts.setInput(const_cast<float*>(send), static_cast<size_t>(count));
    if (options_.rank == 0) {
      opts.setOutput(recv, static_cast<size_t>(count) * options_.world_size);
    }
    opts.setRoot(0);
    opts.setTag(NextTag());
    gloo::gather(opts);
  });
}

absl::Status GlooCommunicator::DoBarrier() {
  if (options_.world_size == 1) return absl::OkStatus();
  return Guard("barrier", [&] {
    gloo::BarrierOptions opts(context_);
    opts.setTag(NextTag());
    gloo::barrier(opts);
  });
}

}  // namespace folio
