#include "worker/nccl_group.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <thread>
#include <utility>

namespace folio {
namespace {

using Clock = std::chrono::steady_clock;
using Code = NcclGroup::Status::Code;

static_assert(NcclGroup::kUniqueIdBytes == NCCL_UNIQUE_ID_BYTES);
static_assert(sizeof(ncclUniqueId) == NCCL_UNIQUE_ID_BYTES);

// Destruction waits at most this long for the peers to flush.
constexpr std::chrono::milliseconds kMaxFinalizeWait{10000};

NcclGroup::Status Ok() { return {}; }

NcclGroup::Status Error(Code code, std::string message) { return {code, std::move(message)}; }

NcclGroup::Status CudaError(const char* call, cudaError_t e) {
  return Error(Code::kInternal, std::string(call) + ": " + cudaGetErrorName(e) + ": " +
                                    cudaGetErrorString(e));
}

// `comm` may be null (calls before a communicator exists).
NcclGroup::Status NcclError(const char* call, ncclResult_t r, ncclComm_t comm) {
  Code code = Code::kInternal;
  switch (r) {
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      code = Code::kInvalidArgument;
      break;
    case ncclRemoteError:  // a peer failed or went away
    case ncclSystemError:  // sockets, shared memory, ...
      code = Code::kUnavailable;
      break;
    default:
      break;
  }
  std::string message = std::string(call) + ": " + ncclGetErrorString(r);
  if (const char* last = ncclGetLastError(comm); last != nullptr && last[0] != '\0') {
    message += std::string(" (") + last + ")";
  }
  return Error(code, std::move(message));
}

// Waiting on the device: spin first (collectives of a decode step take
// microseconds), then yield, then sleep so a stuck peer does not burn a core.
void Backoff(int iteration) {
  if (iteration < 256) return;
  if (iteration < 4096) {
    std::this_thread::yield();
    return;
  }
  std::this_thread::sleep_for(std::chrono::microseconds(50));
}

}  // namespace

NcclGroup::Status NcclGroup::NewUniqueId(std::string* unique_id) {
  ncclUniqueId id;
  if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) {
    return NcclError("ncclGetUniqueId", r, nullptr);
  }
  unique_id->assign(id.internal, sizeof(id.internal));
  return Ok();
}

NcclGroup::Status NcclGroup::Create(const Options& options, const std::string& unique_id,
                                    std::unique_ptr<NcclGroup>* out) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return Error(Code::kInvalidArgument, "NCCL group: rank must be in [0, world_size), got rank " +
                                             std::to_string(options.rank) + " of " +
                                             std::to_string(options.world_size));
  }
  if (unique_id.size() != kUniqueIdBytes) {
    return Error(Code::kInvalidArgument, "NCCL group: the unique id has " +
                                             std::to_string(unique_id.size()) + " bytes, want " +
                                             std::to_string(kUniqueIdBytes));
  }
  if (options.timeout <= std::chrono::milliseconds::zero()) {
    return Error(Code::kInvalidArgument, "NCCL group: timeout must be positive");
  }
  int devices = 0;
  if (cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess) {
    return CudaError("cudaGetDeviceCount", e);
  }
  if (options.device < 0 || options.device >= devices) {
    return Error(Code::kInvalidArgument, "NCCL group: CUDA device " +
                                             std::to_string(options.device) + " of " +
                                             std::to_string(devices) + " visible");
  }
  const Clock::time_point deadline = Clock::now() + options.timeout;

  // From here on the destructor releases whatever was set up.
  std::unique_ptr<NcclGroup> group(new NcclGroup(options));
  if (cudaError_t e = cudaSetDevice(options.device); e != cudaSuccess) {
    return CudaError("cudaSetDevice", e);
  }
  // A blocking stream (not cudaStreamNonBlocking): it waits for work on the
  // legacy default stream, which is the documented way to hand us inputs.
  if (cudaError_t e = cudaStreamCreate(&group->stream_); e != cudaSuccess) {
    return CudaError("cudaStreamCreate", e);
  }
  void* scratch = nullptr;
  if (cudaError_t e = cudaMalloc(&scratch, sizeof(float)); e != cudaSuccess) {
    return CudaError("cudaMalloc", e);
  }
  group->barrier_scratch_ = static_cast<float*>(scratch);
  if (cudaError_t e = cudaMemset(scratch, 0, sizeof(float)); e != cudaSuccess) {
    return CudaError("cudaMemset", e);
  }

  ncclUniqueId id;
  std::memcpy(id.internal, unique_id.data(), kUniqueIdBytes);
  // Non-blocking: initialisation proceeds in the background and is polled,
  // so a rank that never joins is a timeout instead of a hang.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm, options.world_size, id, options.rank, &config);
  group->comm_ = comm;
  if (r != ncclSuccess && r != ncclInProgress) {
    Status s = NcclError("ncclCommInitRankConfig", r, comm);
    if (comm == nullptr) return s;
    return group->Break(std::move(s));
  }
  if (comm == nullptr) {
    return Error(Code::kInternal, "ncclCommInitRankConfig returned no communicator");
  }
  if (Status s = group->AwaitComm("ncclCommInitRankConfig", deadline); !s.ok()) return s;
  *out = std::move(group);
  return Ok();
}

NcclGroup::NcclGroup(const Options& options) : options_(options) {}

NcclGroup::~NcclGroup() {
  cudaSetDevice(options_.device);  // best effort: nothing to report to
  if (comm_ != nullptr) {
    const Clock::time_point deadline =
        Clock::now() + std::min<std::chrono::milliseconds>(options_.timeout, kMaxFinalizeWait);
    ncclResult_t r = ncclCommFinalize(comm_);
    bool flushed = r == ncclSuccess || r == ncclInProgress;
    if (flushed) flushed = AwaitComm("ncclCommFinalize", deadline).ok();  // aborts on failure
    if (flushed && comm_ != nullptr) {
      ncclCommDestroy(comm_);
    } else if (comm_ != nullptr) {
      ncclCommAbort(comm_);
    }
    comm_ = nullptr;
  }
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  if (barrier_scratch_ != nullptr) cudaFree(barrier_scratch_);
}

NcclGroup::Status NcclGroup::Enter() {
  if (Status s = CheckAbort(); !s.ok()) return s;
  if (!broken_.empty()) {
    return Error(Code::kFailedPrecondition,
                 "NCCL group is unusable after an earlier failure: " + broken_);
  }
  if (cudaError_t e = cudaSetDevice(options_.device); e != cudaSuccess) {
    return CudaError("cudaSetDevice", e);
  }
  return Ok();
}

NcclGroup::Status NcclGroup::CheckDevicePointer(const char* what, const void* p) const {
  if (p == nullptr) return Error(Code::kInvalidArgument, std::string(what) + " is null");
  cudaPointerAttributes attr;
  if (cudaError_t e = cudaPointerGetAttributes(&attr, p); e != cudaSuccess) {
    return CudaError("cudaPointerGetAttributes", e);
  }
  if (attr.type == cudaMemoryTypeManaged) return Ok();
  if (attr.type != cudaMemoryTypeDevice) {
    return Error(Code::kInvalidArgument,
                 std::string(what) + " is not device memory (NCCL collectives take device "
                                     "pointers; copy host data to the device first)");
  }
  if (attr.device != options_.device) {
    return Error(Code::kInvalidArgument,
                 std::string(what) + " is memory of CUDA device " + std::to_string(attr.device) +
                     ", this rank uses device " + std::to_string(options_.device));
  }
  return Ok();
}

NcclGroup::Status NcclGroup::AwaitComm(const char* what, Clock::time_point deadline) {
  for (int i = 0;; ++i) {
    ncclResult_t state = ncclSuccess;
    if (ncclResult_t r = ncclCommGetAsyncError(comm_, &state); r != ncclSuccess) {
      return Break(NcclError("ncclCommGetAsyncError", r, comm_));
    }
    if (state == ncclSuccess) return Ok();
    if (state != ncclInProgress) return Break(NcclError(what, state, comm_));
    if (Clock::now() >= deadline) {
      return Break(Error(Code::kDeadlineExceeded,
                         std::string(what) + ": timed out after " +
                             std::to_string(options_.timeout.count()) +
                             " ms (did every rank join / call the same collective?)"));
    }
    if (Status s = CheckAbort(); !s.ok()) return s;
    Backoff(i);
  }
}

NcclGroup::Status NcclGroup::AwaitStream(const char* what, Clock::time_point deadline) {
  for (int i = 0;; ++i) {
    cudaError_t e = cudaStreamQuery(stream_);
    if (e == cudaSuccess) return Ok();
    if (e != cudaErrorNotReady) return Break(CudaError("cudaStreamQuery", e));
    ncclResult_t state = ncclSuccess;
    if (ncclResult_t r = ncclCommGetAsyncError(comm_, &state); r != ncclSuccess) {
      return Break(NcclError("ncclCommGetAsyncError", r, comm_));
    }
    if (state != ncclSuccess && state != ncclInProgress) {
      return Break(NcclError(what, state, comm_));
    }
    if (Clock::now() >= deadline) {
      return Break(Error(Code::kDeadlineExceeded,
                         std::string(what) + ": not completed after " +
                             std::to_string(options_.timeout.count()) +
                             " ms (a peer stopped calling collectives?)"));
    }
    if (Status s = CheckAbort(); !s.ok()) return s;
    Backoff(i);
  }
}

NcclGroup::Status NcclGroup::CheckAbort() {
  if (!abort_requested_.load(std::memory_order_relaxed) || !broken_.empty()) return Ok();
  return Break(Error(Code::kUnavailable, "NCCL group aborted: this rank's group is being rebuilt"));
}

NcclGroup::Status NcclGroup::Break(Status why) {
  if (comm_ != nullptr) {
    ncclCommAbort(comm_);  // also frees it
    comm_ = nullptr;
  }
  if (broken_.empty()) broken_ = why.message;
  return why;
}

NcclGroup::Status NcclGroup::AllReduceSum(float* data, int64_t count) {
  if (count < 0) return Error(Code::kInvalidArgument, "all-reduce: negative count");
  if (count == 0) return Ok();
  if (Status s = Enter(); !s.ok()) return s;
  if (Status s = CheckDevicePointer("all-reduce data", data); !s.ok()) return s;
  const Clock::time_point deadline = Deadline();
  // Even with one rank: NCCL then copies in place, and the call stays a real
  // check of the pointer and the stream.
  ncclResult_t r = ncclAllReduce(data, data, static_cast<size_t>(count), ncclFloat, ncclSum, comm_,
                                 stream_);
  if (r != ncclSuccess && r != ncclInProgress) return Break(NcclError("ncclAllReduce", r, comm_));
  if (Status s = AwaitComm("ncclAllReduce", deadline); !s.ok()) return s;
  return AwaitStream("ncclAllReduce", deadline);
}

NcclGroup::Status NcclGroup::GatherToRank0(const float* send, int64_t count, float* recv) {
  if (count < 0) return Error(Code::kInvalidArgument, "gather: negative count");
  if (count > std::numeric_limits<int64_t>::max() / options_.world_size / int64_t{sizeof(float)}) {
    return Error(Code::kInvalidArgument, "gather: count * world_size overflows");
  }
  if (count == 0) return Ok();
  if (Status s = Enter(); !s.ok()) return s;
  if (Status s = CheckDevicePointer("gather send", send); !s.ok()) return s;
  const bool root = options_.rank == 0;
  if (root) {
    if (Status s = CheckDevicePointer("gather recv", recv); !s.ok()) return s;
  }
  const Clock::time_point deadline = Deadline();
  const size_t n = static_cast<size_t>(count);

  // Rank 0's own slice: a device-to-device copy on the same stream.
  if (root && recv != send) {
    if (cudaError_t e = cudaMemcpyAsync(recv, send, n * sizeof(float), cudaMemcpyDeviceToDevice,
                                        stream_);
        e != cudaSuccess) {
      return Break(CudaError("cudaMemcpyAsync", e));
    }
  }
  if (options_.world_size > 1) {
    // Point-to-point, grouped so that rank 0's receives proceed together.
    Status first;  // the first failure inside the group; the group is closed regardless
    if (ncclResult_t r = ncclGroupStart(); r != ncclSuccess) {
      return Break(NcclError("ncclGroupStart", r, comm_));
    }
    if (root) {
      for (int32_t peer = 1; peer < options_.world_size && first.ok(); ++peer) {
        ncclResult_t r = ncclRecv(recv + static_cast<size_t>(peer) * n, n, ncclFloat, peer, comm_,
                                  stream_);
        if (r != ncclSuccess && r != ncclInProgress) first = NcclError("ncclRecv", r, comm_);
      }
    } else {
      ncclResult_t r = ncclSend(send, n, ncclFloat, 0, comm_, stream_);
      if (r != ncclSuccess && r != ncclInProgress) first = NcclError("ncclSend", r, comm_);
    }
    ncclResult_t r = ncclGroupEnd();
    if (!first.ok()) return Break(std::move(first));
    if (r != ncclSuccess && r != ncclInProgress) return Break(NcclError("ncclGroupEnd", r, comm_));
    if (Status s = AwaitComm("gather (ncclSend/ncclRecv)", deadline); !s.ok()) return s;
  }
  return AwaitStream("gather (ncclSend/ncclRecv)", deadline);
}

NcclGroup::Status NcclGroup::Barrier() {
  if (Status s = Enter(); !s.ok()) return s;
  const Clock::time_point deadline = Deadline();
  ncclResult_t r = ncclAllReduce(barrier_scratch_, barrier_scratch_, 1, ncclFloat, ncclSum, comm_,
                                 stream_);
  if (r != ncclSuccess && r != ncclInProgress) {
    return Break(NcclError("ncclAllReduce (barrier)", r, comm_));
  }
  if (Status s = AwaitComm("barrier", deadline); !s.ok()) return s;
  return AwaitStream("barrier", deadline);
}

}  // namespace folio
