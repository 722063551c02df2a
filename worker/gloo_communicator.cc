#include "worker/gloo_communicator.h"

#include <algorithm>
#include <exception>
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

namespace folio {
namespace {

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
