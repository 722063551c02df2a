#ifndef FOLIO_WORKER_NCCL_GROUP_H_
#define FOLIO_WORKER_NCCL_GROUP_H_

// One rank's NCCL communicator on one CUDA device: the collectives of
// Communicator (all-reduce sum, gather to rank 0, barrier) on DEVICE memory,
// with errors returned, never thrown or aborted on.
//
// Why this class is separate from NcclCommunicator: it depends only on the
// CUDA runtime, NCCL and the C++ standard library, so it also builds in
// FOLIO_KERNELS_ONLY mode, and tests/gpu/nccl_group_gpu_check.cc proves it on
// GPU machines whose images lack our Debian packages (no absl, no gRPC).
// NcclCommunicator (nccl_communicator.h) is the thin absl-facing adapter that
// the worker uses: it exchanges the unique id through the scheduler's
// rendezvous store and maps Status to absl::Status. The unique id is just
// bytes here: NewUniqueId() on rank 0, Create() on every rank with the same
// bytes, however they travelled (the store, or a variable in a test).
//
// Synchronous: every collective is enqueued on the group's own CUDA stream
// and returns once it has completed on the device (the stream is polled, so a
// dead or silent peer turns into DEADLINE_EXCEEDED after `timeout`, not a
// hang). The result is then visible to the host and to every stream.
// REQUIRES of callers: the device work that wrote the input has completed, or
// was enqueued on the legacy default stream (the group's stream is a blocking
// stream, so it waits for that one).
//
// After a failed collective or a timeout the communicator is aborted
// (ncclCommAbort) and every later call fails with FAILED_PRECONDITION: the
// group is broken and must be rebuilt by every rank.
//
// Thread-compatible: one thread (the rank's worker thread) calls a group at a
// time (RequestAbort() excepted, which any thread may call). Each call makes
// `device` current on the calling thread.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

struct ncclComm;
struct CUstream_st;

namespace folio {

class NcclGroup {
 public:
  // Outcome of a call: codes mirror absl::StatusCode's names (the adapter
  // maps them one to one); `message` names the NCCL or CUDA call and its
  // error string.
  struct Status {
    enum class Code {
      kOk,
      kInvalidArgument,
      kFailedPrecondition,
      kDeadlineExceeded,
      kUnavailable,
      kInternal,
    };
    Code code = Code::kOk;
    std::string message;

    bool ok() const { return code == Code::kOk; }
  };

  struct Options {
    int32_t rank = 0;
    int32_t world_size = 1;
    int32_t device = 0;  // CUDA device ordinal of this rank
    // Joining the group and every collective fail after this long
    // (DEADLINE_EXCEEDED), and the communicator is aborted.
    std::chrono::milliseconds timeout{60000};
  };

  // Size of the unique id (NCCL_UNIQUE_ID_BYTES).
  static constexpr size_t kUniqueIdBytes = 128;

  // Rank 0, once per group: a fresh id (ncclGetUniqueId; it also starts
  // NCCL's bootstrap listener in this process, which rank 0's Create() then
  // serves, so rank 0 must call Create() in the same process).
  static Status NewUniqueId(std::string* unique_id);

  // Joins the group: every rank 0..world_size-1 calls Create() with the same
  // unique id within `timeout` (ncclCommInitRankConfig, non-blocking, polled).
  // On success *out holds the group.
  static Status Create(const Options& options, const std::string& unique_id,
                       std::unique_ptr<NcclGroup>* out);

  // Flushes the communicator (ncclCommFinalize, at most min(timeout, 10 s);
  // it waits for the peers) and destroys it (ncclCommDestroy), or aborts it
  // (ncclCommAbort) when flushing fails or times out.
  ~NcclGroup();
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

  int32_t rank() const { return options_.rank; }
  int32_t world_size() const { return options_.world_size; }
  int32_t device() const { return options_.device; }

  // data[0:count] = sum over ranks, in place. REQUIRES: `data` is device (or
  // managed) memory of this group's device; count >= 0 and the same on every
  // rank. NCCL gives every rank bit-identical results.
  Status AllReduceSum(float* data, int64_t count);

  // Rank r's send[0:count] lands in rank 0's recv[r*count : (r+1)*count].
  // REQUIRES: send (and on rank 0, recv) in device memory of this group's
  // device; recv unused (may be null) on other ranks.
  Status GatherToRank0(const float* send, int64_t count, float* recv);

  // Returns once every rank has called Barrier (a 1-element all-reduce).
  Status Barrier();

  // Any thread: makes the collective in progress (polled, see AwaitStream)
  // return kUnavailable "aborted ..." within a poll interval, aborting the
  // communicator (ncclCommAbort) on the calling rank's thread, and every
  // later call fail. For a peer that hangs: without it a collective waits
  // for `timeout`.
  void RequestAbort() { abort_requested_.store(true, std::memory_order_relaxed); }

 private:
  explicit NcclGroup(const Options& options);

  Status Enter();  // checks the group is usable; makes the device current
  Status CheckDevicePointer(const char* what, const void* p) const;
  // Polls until the communicator has no operation in progress (after a
  // non-blocking NCCL call) or until `deadline`.
  Status AwaitComm(const char* what, std::chrono::steady_clock::time_point deadline);
  // Polls until the stream's work has completed, watching for NCCL's
  // asynchronous errors, or until `deadline`.
  Status AwaitStream(const char* what, std::chrono::steady_clock::time_point deadline);
  // Break()s the group when RequestAbort() was called (once).
  Status CheckAbort();
  // Aborts the communicator after `why`; later calls get FAILED_PRECONDITION.
  Status Break(Status why);
  std::chrono::steady_clock::time_point Deadline() const {
    return std::chrono::steady_clock::now() + options_.timeout;
  }

  // Const after construction.
  const Options options_;

  // Owned; set up by Create(). comm_ is null once aborted.
  ncclComm* comm_ = nullptr;
  CUstream_st* stream_ = nullptr;
  float* barrier_scratch_ = nullptr;  // 1 float of device memory
  std::string broken_;                // why the group is unusable, or empty
  std::atomic<bool> abort_requested_{false};
};

}  // namespace folio

#endif  // FOLIO_WORKER_NCCL_GROUP_H_
