#include "worker/worker_service.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/kv_cache_dtype.h"
#include "common/plan_proto.h"
#include "worker/cpu_worker.h"
#include "worker/device_spec.h"
#include "worker/gloo_communicator.h"
#include "worker/rendezvous_store.h"
#include "worker/shm_communicator.h"

namespace folio {
namespace {

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

grpc::Status Precondition(const std::string& what) {
  return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, what);
}

// KV cache bytes when the request gives none: a fraction of the memory
// available now, shared by the ranks on this machine (assumed all of them).
int64_t DefaultKvCacheBytes(float utilization, uint32_t world_size) {
  const double fraction = utilization > 0.0f ? utilization : 0.9;
  const double available = static_cast<double>(sysconf(_SC_AVPHYS_PAGES)) *
                           static_cast<double>(sysconf(_SC_PAGESIZE));
  return static_cast<int64_t>(fraction * available / std::max<uint32_t>(world_size, 1));
}

}  // namespace

WorkerService::WorkerService(Options options) : options_(std::move(options)) {}

WorkerService::~WorkerService() { Close(absl::Seconds(5)); }

grpc::Status WorkerService::Initialize(grpc::ServerContext* context,
                                       const v1::InitializeRequest* request,
                                       v1::InitializeResponse* response) {
  bool again = false;
  {
    absl::MutexLock lock(&mu_);
    if (state_ == State::kClosed) {
      return {grpc::StatusCode::UNAVAILABLE, "the worker is shutting down"};
    }
    if (initializing_) return Precondition("Initialize is running already");
    initializing_ = true;
    again = state_ != State::kNew;
  }
  grpc::Status status = again ? ToGrpc(Unload()) : grpc::Status::OK;
  if (status.ok()) status = Load(*request, response);
  absl::MutexLock lock(&mu_);
  initializing_ = false;
  return status;
}

absl::Status WorkerService::Unload() {
  std::unique_ptr<ModelWorker> worker;
  std::unique_ptr<Communicator> comm;
  {
    absl::MutexLock lock(&mu_);
    // A step blocked in a collective on the failed peer would otherwise wait
    // for its timeout; the peers of the old group fail their steps too.
    if (comm_ != nullptr) comm_->Abort();
    auto ended = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return state_ == State::kClosed || (!in_flight_ && !stream_open_);
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&ended), options_.collective_timeout)) {
      return absl::UnavailableError(absl::StrCat(
          "the previous step is still running or its Step stream is still open after ",
          absl::FormatDuration(options_.collective_timeout),
          "; cancel the Step stream and call Initialize again"));
    }
    if (state_ == State::kClosed) return absl::UnavailableError("the worker is shutting down");
    worker = std::move(worker_);
    comm = std::move(comm_);
    state_ = State::kNew;
    std::fprintf(stderr,
                 "folio-worker rank %u: initializing again (the scheduler is rebuilding the "
                 "group)\n",
                 rank_);
  }
  worker.reset();  // frees the cache (it uses comm)
  comm.reset();    // leaves the old group
  return absl::OkStatus();
}

grpc::Status WorkerService::Load(const v1::InitializeRequest& request,
                                 v1::InitializeResponse* response) {
  const uint32_t world = request.world_size() == 0 ? 1 : request.world_size();
  if (request.rank() >= world) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            absl::StrCat("rank ", request.rank(), " is not below world_size ", world)};
  }
  absl::StatusOr<DeviceSpec> device = ParseDevice(request.device());
  if (!device.ok()) return ToGrpc(device.status());
  if (!device->is_cuda() && request.dtype() == v1::DTYPE_FLOAT16) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            "InitializeRequest.dtype FLOAT16: the CPU worker stores weights as float32 or bfloat16 "
            "(UNSPECIFIED computes an fp16 checkpoint in float32)"};
  }
  if (device->is_cuda() && !request.quantization().empty()) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            absl::StrCat("InitializeRequest.quantization \"", request.quantization(),
                         "\": weight-only quantization runs on the CPU worker only")};
  }
  // Checked for every device, so a typo is named as one; a quantized cache
  // needs the CPU worker's kernels.
  const std::string& kv_dtype = request.kv_cache_dtype();
  absl::StatusOr<kernels::CacheDtype> kv_storage = ParseCpuKvCacheDtype(kv_dtype);
  if (!kv_storage.ok()) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            absl::StrCat("InitializeRequest.kv_cache_dtype: ", kv_storage.status().message())};
  }
  if (device->is_cuda() && *kv_storage != kernels::CacheDtype::kFloat32) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            absl::StrCat("InitializeRequest.kv_cache_dtype \"", kv_dtype,
                         "\": a quantized KV cache runs on the CPU worker only for now")};
  }
  if (device->is_cuda() && !options_.cuda_loader) {
    return {grpc::StatusCode::FAILED_PRECONDITION,
            absl::StrCat("InitializeRequest.device \"", request.device(),
                         "\": this folio-worker was built without CUDA (use device \"cpu\")")};
  }
  if (world > 1 && request.rendezvous_address().empty()) {
    return {grpc::StatusCode::INVALID_ARGUMENT, "world_size > 1 needs a rendezvous_address"};
  }
  std::unique_ptr<Communicator> comm;
  std::unique_ptr<ModelWorker> worker;
  if (device->is_cuda()) {
    // Checks the device, joins the NCCL group (ranks > 1), loads and sizes.
    CudaLoadOptions lo;
    lo.seed = options_.seed;
    lo.collective_timeout = options_.collective_timeout;
    absl::StatusOr<LoadedWorker> loaded = options_.cuda_loader(request, lo);
    if (!loaded.ok()) return ToGrpc(loaded.status());
    comm = std::move(loaded->communicator);
    worker = std::move(loaded->worker);
  } else {
    absl::StatusOr<std::unique_ptr<CpuWorker>> cpu = LoadCpuWorker(request, world, *kv_storage, &comm);
    if (!cpu.ok()) return ToGrpc(cpu.status());
    // Two clock reads a part and layer (microseconds a step against
    // milliseconds of forward): kept on whenever there are metrics.
    if (options_.metrics != nullptr) (*cpu)->set_step_profile(&step_profile_);
    worker = std::move(*cpu);
  }
  response->set_num_device_blocks(static_cast<uint32_t>(std::max(worker->DeviceBlocksThatFit(), 0)));
  response->set_num_host_blocks(static_cast<uint32_t>(std::max(worker->HostBlocksThatFit(), 0)));
  response->set_block_bytes(static_cast<uint64_t>(worker->block_bytes()));
  response->set_vocab_size(static_cast<uint32_t>(worker->config().vocab_size));
  response->set_device_name(worker->device_name());
  response->set_kv_cache_dtype(std::string(kernels::CacheDtypeName(worker->kv_cache_dtype())));
  absl::MutexLock lock(&mu_);
  if (state_ == State::kClosed) {
    return {grpc::StatusCode::UNAVAILABLE, "the worker is shutting down"};
  }
  comm_ = std::move(comm);
  worker_ = std::move(worker);
  rank_ = request.rank();
  if (options_.metrics != nullptr) {
    // The scheduler's name for the model, so dashboards join both processes' series.
    std::string model = request.model_name();
    if (model.empty()) {
      std::vector<std::string> parts = absl::StrSplit(request.model_path(), '/', absl::SkipEmpty());
      model = parts.empty() ? request.model_path() : parts.back();
    }
    options_.metrics->Bind(model, static_cast<int>(request.rank()));
  }
  state_ = State::kLoaded;
  return grpc::Status::OK;
}

absl::StatusOr<std::unique_ptr<CpuWorker>> WorkerService::LoadCpuWorker(
    const v1::InitializeRequest& request, uint32_t world, kernels::CacheDtype kv_cache_dtype,
    std::unique_ptr<Communicator>* comm) {
  CpuWorker::Options wo;
  wo.model_dir = request.model_path();
  wo.shard = ShardSpec{static_cast<int32_t>(request.rank()), static_cast<int32_t>(world)};
  wo.block_size = request.block_size() == 0 ? 16 : static_cast<int32_t>(request.block_size());
  wo.kv_cache_bytes = request.kv_cache_bytes() > 0
                          ? static_cast<int64_t>(request.kv_cache_bytes())
                          : DefaultKvCacheBytes(request.memory_utilization(), world);
  wo.swap_space_bytes = static_cast<int64_t>(request.swap_space_bytes());
  wo.seed = options_.seed;
  if (request.dtype() == v1::DTYPE_FLOAT32) wo.dtype = DType::kF32;
  if (request.dtype() == v1::DTYPE_BFLOAT16) wo.dtype = DType::kBF16;
  wo.quantization = request.quantization();
  if (absl::Status s = CheckCpuQuantization(wo.quantization); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("InitializeRequest.quantization: ", s.message()));
  }
  wo.kv_cache_dtype = kv_cache_dtype;

  // Join the group first (all ranks wait for each other here), then load.
  if (world > 1) {
    absl::StatusOr<std::unique_ptr<Communicator>> joined =
        JoinGroup(request, wo.shard.rank, wo.shard.world_size);
    if (!joined.ok()) return joined.status();
    *comm = std::move(*joined);
  }
  wo.communicator = comm->get();
  return CpuWorker::Load(wo);
}

grpc::Status WorkerService::AllocateCache(grpc::ServerContext* context,
                                          const v1::AllocateCacheRequest* request,
                                          v1::AllocateCacheResponse* response) {
  absl::MutexLock lock(&mu_);
  if (initializing_) return Precondition("AllocateCache while Initialize runs");
  if (state_ != State::kLoaded) {
    return Precondition(state_ == State::kReady ? "the cache is allocated already"
                                                : "AllocateCache needs Initialize first");
  }
  if (request->num_device_blocks() > (1u << 30) || request->num_host_blocks() > (1u << 30)) {
    return {grpc::StatusCode::INVALID_ARGUMENT, "block counts above 2^30"};
  }
  if (absl::Status s = worker_->AllocateCache(static_cast<int32_t>(request->num_device_blocks()),
                                              static_cast<int32_t>(request->num_host_blocks()));
      !s.ok()) {
    return ToGrpc(s);
  }
  response->set_device_bytes(uint64_t{request->num_device_blocks()} *
                             static_cast<uint64_t>(worker_->block_bytes()));
  response->set_host_bytes(uint64_t{request->num_host_blocks()} *
                           static_cast<uint64_t>(worker_->block_bytes()));
  state_ = State::kReady;
  return grpc::Status::OK;
}

absl::StatusOr<std::unique_ptr<Communicator>> WorkerService::JoinGroup(
    const v1::InitializeRequest& request, int32_t rank, int32_t world) {
  using Collectives = Options::Collectives;
  auto store_with_prefix = [&](const std::string& suffix) {
    RendezvousStore::Options so;
    so.address = request.rendezvous_address();
    so.prefix = absl::StrCat(request.rendezvous_prefix(), suffix);
    so.timeout = options_.collective_timeout;
    return RendezvousStore::Create(so);
  };
  Collectives choice = options_.collectives;
  std::string why = choice == Collectives::kAuto ? "" : " (as configured)";
  if (choice == Collectives::kAuto) {
    // Every rank publishes where it runs; all on this host -> shared memory.
    absl::StatusOr<std::unique_ptr<RendezvousStore>> store = store_with_prefix("/host/");
    if (!store.ok()) return store.status();
    const std::string mine = ShmCommunicator::HostIdentity();
    if (absl::Status s = (*store)->Set(absl::StrCat(rank), mine); !s.ok()) return s;
    std::vector<std::string> keys;
    for (int32_t r = 0; r < world; ++r) keys.push_back(absl::StrCat(r));
    if (absl::Status s = (*store)->Wait(keys, options_.collective_timeout); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("waiting for every rank's host identity: ",
                                                 s.message()));
    }
    int32_t same = 0;
    for (const std::string& key : keys) {
      absl::StatusOr<std::string> theirs = (*store)->Get(key);
      if (!theirs.ok()) return theirs.status();
      same += *theirs == mine ? 1 : 0;
    }
    choice = same == world ? Collectives::kShm : Collectives::kGloo;
    why = same == world ? absl::StrCat(" (auto: all ", world, " ranks on this host)")
                        : absl::StrCat(" (auto: ", world - same, " of ", world,
                                       " ranks on other hosts)");
  }
  std::unique_ptr<Communicator> comm;
  if (choice == Collectives::kShm) {
    absl::StatusOr<std::unique_ptr<RendezvousStore>> store = store_with_prefix("/");
    if (!store.ok()) return store.status();
    ShmCommunicator::Options so;
    so.rank = rank;
    so.world_size = world;
    so.timeout = options_.collective_timeout;
    absl::StatusOr<std::unique_ptr<ShmCommunicator>> shm = ShmCommunicator::Create(so, **store);
    if (!shm.ok()) return shm.status();
    comm = std::move(*shm);
  } else {
    absl::StatusOr<std::unique_ptr<RendezvousStore>> store = store_with_prefix("/gloo/");
    if (!store.ok()) return store.status();
    GlooCommunicator::Options go;
    go.rank = rank;
    go.world_size = world;
    go.hostname = options_.collective_host;
    go.iface = options_.collective_iface;
    go.timeout = options_.collective_timeout;
    absl::StatusOr<std::unique_ptr<GlooCommunicator>> gloo = GlooCommunicator::Create(go, **store);
    if (!gloo.ok()) return gloo.status();
    comm = std::move(*gloo);
  }
  std::fprintf(stderr, "folio-worker rank %d of %d: collectives over %s%s\n", rank, world,
               choice == Collectives::kShm ? "shared memory" : "Gloo (TCP)", why.c_str());
  return comm;
}

void WorkerService::RunStep(const v1::StepPlan& proto, v1::StepResult* result) {
  const auto start = std::chrono::steady_clock::now();
  if (comm_ != nullptr) comm_->ResetBusySeconds();
  StepPlan plan;
  absl::Status status = FromProto(proto, &plan);
  if (status.ok()) {
    absl::StatusOr<StepResult> r = worker_->Execute(plan);
    if (r.ok()) {
      ToProto(*r, result);
    } else {
      status = r.status();
    }
  }
  result->set_step_id(proto.step_id());
  if (!status.ok()) {
    result->clear_samples();
    ToProto(status, result->mutable_status());
  }
  result->set_forward_seconds(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  result->set_allreduce_seconds(comm_ != nullptr ? comm_->busy_seconds() : 0.0);
  if (options_.metrics != nullptr) {
    const int64_t block_bytes = status.ok() ? worker_->block_bytes() : 0;
    options_.metrics->RecordStep(result->forward_seconds(), result->allreduce_seconds(),
                                 block_bytes * proto.swap_in_size(),
                                 block_bytes * proto.swap_out_size());
    options_.metrics->RecordStepParts(step_profile_);
  }
}

grpc::Status WorkerService::StepRefusal() const {
  if (state_ == State::kClosed) {
    return {grpc::StatusCode::UNAVAILABLE, "the worker is shutting down"};
  }
  // A second Initialize waits for this stream to close: run no more plans.
  if (initializing_ && state_ != State::kNew) {
    return {grpc::StatusCode::UNAVAILABLE, "the worker is initializing again"};
  }
  if (state_ != State::kReady) return Precondition("Step needs Initialize and AllocateCache");
  return grpc::Status::OK;
}

grpc::Status WorkerService::Step(grpc::ServerContext* context,
                                 grpc::ServerReaderWriter<v1::StepResult, v1::StepPlan>* stream) {
  uint32_t rank = 0;
  {
    absl::MutexLock lock(&mu_);
    if (grpc::Status refused = StepRefusal(); !refused.ok()) return refused;
    if (stream_open_) return {grpc::StatusCode::ABORTED, "a Step stream is open already"};
    stream_open_ = true;
    rank = rank_;
  }
  v1::StepPlan plan;
  v1::StepResult result;
  grpc::Status status = grpc::Status::OK;
  while (stream->Read(&plan)) {
    {
      absl::MutexLock lock(&mu_);
      status = StepRefusal();
      if (!status.ok()) break;
      in_flight_ = true;
    }
    result.Clear();
    RunStep(plan, &result);
    result.set_rank(rank);
    {
      absl::MutexLock lock(&mu_);
      in_flight_ = false;
    }
    if (!stream->Write(result)) break;  // the client went away
  }
  absl::MutexLock lock(&mu_);
  stream_open_ = false;
  return status;
}

grpc::Status WorkerService::Shutdown(grpc::ServerContext* context,
                                     const v1::ShutdownRequest* request,
                                     v1::ShutdownResponse* response) {
  const absl::Duration grace = request->grace_seconds() > 0
                                   ? absl::Seconds(request->grace_seconds())
                                   : absl::Seconds(10);
  if (!Close(grace)) {
    return {grpc::StatusCode::DEADLINE_EXCEEDED,
            "the step in flight did not finish within the grace period; stopping anyway"};
  }
  return grpc::Status::OK;
}

bool WorkerService::Close(absl::Duration grace) {
  std::unique_ptr<ModelWorker> worker;
  std::unique_ptr<Communicator> comm;
  bool finished = true;
  bool first = false;
  {
    absl::MutexLock lock(&mu_);
    first = state_ != State::kClosed;
    state_ = State::kClosed;
    auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !in_flight_; };
    finished = mu_.AwaitWithTimeout(absl::Condition(&idle), grace);
    if (finished) {
      worker = std::move(worker_);
      comm = std::move(comm_);
    }
  }
  worker.reset();  // frees the cache
  comm.reset();    // leaves the group
  if (first && options_.on_shutdown) options_.on_shutdown();
  return finished;
}

}  // namespace folio
