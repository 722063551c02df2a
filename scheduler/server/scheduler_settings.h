// folio-scheduler's settings: every flag (each also read from FOLIO_<NAME>),
// its default, and the checks that need no model or worker, so a bad value
// fails before anything loads or listens.
#ifndef FOLIO_SCHEDULER_SERVER_SCHEDULER_SETTINGS_H_
#define FOLIO_SCHEDULER_SERVER_SCHEDULER_SETTINGS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/flags.h"
#include "folio/v1/worker.pb.h"
#include "scheduler/scheduler_config.h"
#include "scheduler/server/tls_credentials.h"

namespace folio {

struct SchedulerSettings {
  std::string model;
  std::string model_name;
  std::string host = "127.0.0.1";
  int64_t port = 50051;
  std::string advertise_address;  // what workers dial for the rendezvous
  std::string workers;            // comma-separated; default worker-host:50061+r
  std::string worker_host = "127.0.0.1";
  int64_t worker_base_port = 50061;
  int64_t tensor_parallel_size = 1;
  std::string device = "cpu";
  std::string dtype;
  std::string quantization;
  std::string kv_cache_dtype = "auto";
  int64_t block_size = 16;
  int64_t kv_cache_mb = -1;  // -1: 256 on the cpu, 0 (profile) on cuda
  double gpu_memory_utilization = 0.9;
  int64_t swap_space_mb = 0;
  int64_t num_device_blocks = 0;
  int64_t num_host_blocks = -1;
  int64_t max_num_seqs = 256;
  int64_t max_waiting_requests = 4096;
  int64_t max_waiting_tokens = int64_t{1} << 22;
  int64_t stream_interval = 1;
  int64_t max_num_batched_tokens = 2048;
  int64_t max_model_len = 0;
  std::string preemption_mode = "auto";
  std::string scheduling_policy = "fcfs";
  std::string reservation_policy = "none";
  std::string batching = "continuous";
  std::string generation_config = "auto";
  bool enable_prefix_caching = true;
  bool host_prefix_cache = true;  // on wherever host blocks and prefix caching are
  int64_t host_prefix_cache_step_mb = -1;  // -1: the step's token budget's worth of blocks
  std::string metrics_host;   // default: host
  int64_t metrics_port = -1;  // -1: the default, 9400; 0: no metrics
  double step_timeout_s = 600;      // the ceiling of a step's adaptive deadline
  double step_timeout_min_s = 10;   // its floor
  std::string on_worker_failure = "requeue";
  int64_t max_requeues = 2;
  double health_check_interval_s = 2;
  double drain_timeout_s = 30;
  double connect_timeout_s = 120;
  std::string api_key;       // FOLIO_API_KEY
  std::string api_key_file;
  TlsFiles tls;
  int64_t health_port = 0;      // 0: no separate health port
  int64_t rendezvous_port = 0;  // 0: the client port (plaintext) or, under TLS, any free port
  int64_t http_port = 8000;     // 0: no HTTP; the default is given up (with a warning) if taken
  int64_t max_request_body_mb = 32;
  int64_t http_threads = 2;
  double http_request_timeout_s = 30;  // for a whole request to arrive
  double http_idle_timeout_s = 60;     // keep-alive between requests
  std::string chat_template;  // file; empty: the model's own
};

// Registers every folio-scheduler flag on `flags`, writing into `s`.
void DefineSchedulerFlags(FlagSet& flags, SchedulerSettings& s);

// The settings' own ranges and combinations (ports, timeouts, bounds,
// --on-worker-failure, --kv-cache-dtype on --device, an explicit
// --host-prefix-cache and its needs): the
// first violation, as INVALID_ARGUMENT naming the flag. `flags` (those that
// parsed into `s`) tells an explicit flag from a default.
absl::Status CheckSchedulerSettings(const SchedulerSettings& s, const FlagSet& flags);

// --host-prefix-cache-step-mb as SchedulerConfig::host_tier_blocks_per_step,
// given the bytes of one block on one rank: -1 stays -1, 0 stays 0, else at
// least one block.
int32_t HostTierBlocksPerStep(int64_t step_mb, uint64_t block_bytes);

// --dtype: what the workers can compute in on the cpu or cuda.
absl::StatusOr<v1::DType> ParseDType(const std::string& name, bool on_cuda);
// --quantization: empty or int8 (the cpu worker's).
absl::Status CheckQuantization(const std::string& name, bool on_cuda);
// --kv-cache-dtype: auto (or empty), or the cpu worker's quantized caches
// int8 and fp8 (fp8_e4m3).
absl::Status CheckKvCacheDtype(const std::string& name, bool on_cuda);
// --reservation-policy: none, max or pow2 (oracle is the simulator's only).
absl::StatusOr<ReservationPolicy> ParseServedReservationPolicy(const std::string& name);

}  // namespace folio

#endif  // FOLIO_SCHEDULER_SERVER_SCHEDULER_SETTINGS_H_
