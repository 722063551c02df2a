#include "scheduler/server/scheduler_settings.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/kv_cache_dtype.h"

namespace folio {

void DefineSchedulerFlags(FlagSet& flags, SchedulerSettings& s) {
  flags.String("model", &s.model, "Hugging Face model directory (config.json, tokenizer.json)");
  flags.String("model-name", &s.model_name, "name reported by GetModelInfo (default: directory name)");
  flags.String("host", &s.host, "address to serve clients on");
  flags.Int("port", &s.port, "client gRPC port");
  flags.String("advertise-address", &s.advertise_address,
               "host:port workers reach this scheduler at (default host:port)");
  flags.String("workers", &s.workers, "comma-separated worker addresses, rank order");
  flags.String("worker-host", &s.worker_host, "host of the workers when --workers is unset");
  flags.Int("worker-base-port", &s.worker_base_port, "rank r listens on this + r");
  flags.Int("tensor-parallel-size", &s.tensor_parallel_size, "worker ranks");
  flags.String("device", &s.device,
               "worker device: cpu, cuda (rank r on local device r % devices) or cuda:N");
  flags.String("dtype", &s.dtype,
               "auto|float32|bfloat16: how the weights are stored; auto (or empty) = the "
               "checkpoint's torch_dtype on the cpu (fp16 computes in float32; activations are "
               "float32, the KV cache too unless --kv-cache-dtype says otherwise), bfloat16 on "
               "cuda");
  flags.String("quantization", &s.quantization,
               "int8: weight-only int8 computed at load (symmetric, per output channel; cpu)");
  flags.String("kv-cache-dtype", &s.kv_cache_dtype,
               "auto|int8|fp8 (fp8_e4m3): what the KV cache stores; auto = the compute dtype's "
               "(float32 on the cpu, bfloat16 or float32 on cuda); int8 and fp8 store one-byte "
               "codes with a float32 scale per block and KV head, so the same --kv-cache-mb "
               "holds about 4x the tokens of float32 (cpu only for now)");
  flags.Int("block-size", &s.block_size, "tokens per KV block (8, 16, 32)");
  flags.Int("kv-cache-mb", &s.kv_cache_mb,
            "KV cache memory per rank, MiB; 0 = from --gpu-memory-utilization (cuda: what a "
            "memory profile leaves of that fraction of the device; cpu: that fraction of the "
            "available memory); -1 = 256 on the cpu, 0 on cuda");
  flags.Double("gpu-memory-utilization", &s.gpu_memory_utilization,
               "fraction of each device's memory for weights, activations and KV cache, in "
               "(0, 1]; sizes the KV cache when --kv-cache-mb is 0");
  flags.Int("swap-space-mb", &s.swap_space_mb, "host memory per rank for swapped-out blocks, MiB");
  flags.Int("num-device-blocks", &s.num_device_blocks,
            "cap on device KV blocks; 0 = whatever fits in --kv-cache-mb");
  flags.Int("num-host-blocks", &s.num_host_blocks,
            "cap on host KV blocks; -1 = whatever fits in --swap-space-mb");
  flags.Int("max-num-seqs", &s.max_num_seqs, "running sequences at most");
  flags.Int("max-waiting-requests", &s.max_waiting_requests,
            "requests waiting to run at most; more are refused with RESOURCE_EXHAUSTED "
            "(HTTP 429) until the queue shrinks; 0 = no bound");
  flags.Int("max-waiting-tokens", &s.max_waiting_tokens,
            "prompt tokens of the waiting requests at most (a longer prompt alone is still "
            "queued); 0 = no bound");
  flags.Int("stream-interval", &s.stream_interval,
            "tokens a stream collects before they are sent (gRPC chunks, SSE events): 1 sends "
            "every step's; larger values send fewer, longer messages, which costs the server "
            "and its clients less per token; the first token and a sequence's end are sent "
            "at once");
  flags.Int("max-num-batched-tokens", &s.max_num_batched_tokens, "token budget of one step");
  flags.Int("max-model-len", &s.max_model_len,
            "prompt + output tokens at most; 0 = the model's, capped at the KV cache's token "
            "slots (larger is refused)");
  flags.String("preemption-mode", &s.preemption_mode, "auto|recompute|swap");
  flags.String("scheduling-policy", &s.scheduling_policy, "fcfs|priority");
  flags.String("reservation-policy", &s.reservation_policy,
               "KV memory a request claims at admission: none (blocks as tokens arrive), max "
               "(max-model-len tokens) or pow2 (prompt + max_tokens rounded up to a power of "
               "two); max and pow2 model the systems before paging, for benchmarks");
  flags.String("batching", &s.batching,
               "continuous (requests join the running batch every step) or static (a batch "
               "runs until its last request finishes before the next is admitted), for "
               "benchmarks");
  flags.String("generation-config", &s.generation_config,
               "defaults of unset sampling fields: auto (the model's generation_config.json), "
               "none, or a directory holding a generation_config.json");
  flags.Bool("enable-prefix-caching", &s.enable_prefix_caching, "reuse cached prompt blocks");
  flags.Bool("host-prefix-cache", &s.host_prefix_cache,
             "keep cached prompt blocks that the device evicts in the host pool and bring them "
             "back by swap instead of computing them again; on whenever host blocks "
             "(--swap-space-mb) and --enable-prefix-caching are (--no-host-prefix-cache: off)");
  flags.Int("host-prefix-cache-step-mb", &s.host_prefix_cache_step_mb,
            "the host tier's traffic per step and direction, MiB per rank: evicted blocks past "
            "it are dropped, prefix hits past it computed; -1 = as many blocks as a step's "
            "--max-num-batched-tokens fill; 0 = no bound");
  flags.Double("step-timeout-s", &s.step_timeout_s,
               "the longest a step may run before its workers count as hung (the ceiling of "
               "its deadline, which adapts: see --step-timeout-min-s)");
  flags.Double("step-timeout-min-s", &s.step_timeout_min_s,
               "a step's deadline is 10x the slowest recent step, at least this, plus an "
               "allowance per prefill token");
  flags.String("on-worker-failure", &s.on_worker_failure,
               "when a worker rank dies or hangs: requeue (running requests wait and resume "
               "once the group is rebuilt) or fail (they end with the error); the group is "
               "rebuilt either way");
  flags.Int("max-requeues", &s.max_requeues,
            "a request requeued by this many worker failures fails at the next one");
  flags.Double("health-check-interval-s", &s.health_check_interval_s,
               "how often idle workers are health-checked; 0 = never");
  flags.Double("drain-timeout-s", &s.drain_timeout_s,
               "on SIGTERM: NOT_SERVING and new requests refused at once, the live ones may "
               "finish for this long, then the rest are aborted (a second SIGTERM, or SIGINT, "
               "stops at once); 0 = abort at once");
  flags.Double("connect-timeout-s", &s.connect_timeout_s, "wait this long for workers to start");
  flags.String("metrics-host", &s.metrics_host, "address of the Prometheus endpoint (default: --host)");
  flags.Int("metrics-port", &s.metrics_port,
            "Prometheus /metrics port; -1 = 9400, serving without metrics if taken; 0 = none");
  flags.String("api-key", &s.api_key,
               "clients must send `authorization: Bearer <key>` on folio.v1.Generation calls "
               "and HTTP requests (gRPC health and reflection, HTTP /health and /metrics stay "
               "open); empty = no key");
  flags.String("api-key-file", &s.api_key_file, "read the API key from this file instead");
  flags.String("tls-cert", &s.tls.cert, "PEM certificate (chain) of the client port: serve TLS");
  flags.String("tls-key", &s.tls.key, "PEM private key of --tls-cert");
  flags.String("tls-client-ca", &s.tls.client_ca,
               "PEM CA: clients must present a certificate it signed (mutual TLS)");
  flags.Int("health-port", &s.health_port,
            "also serve grpc.health.v1 alone, plaintext, on --host:this port (for probes "
            "that cannot speak TLS); 0 = off");
  flags.Int("rendezvous-port", &s.rendezvous_port,
            "the workers' plaintext rendezvous port; 0 = the client port, or under TLS any "
            "free port (give --advertise-address host:this port)");
  flags.Int("http-port", &s.http_port,
            "OpenAI-compatible HTTP API on --host:this port (HTTPS with --tls-cert); 0 = off; "
            "the default 8000 is skipped with a warning when taken");
  flags.Int("max-request-body-mb", &s.max_request_body_mb,
            "largest HTTP request body, MiB (413 beyond it)");
  flags.Int("http-threads", &s.http_threads, "I/O threads of the HTTP server");
  flags.Double("http-request-timeout-s", &s.http_request_timeout_s,
               "an HTTP request must arrive whole within this, else the connection is closed");
  flags.Double("http-idle-timeout-s", &s.http_idle_timeout_s,
               "an idle keep-alive HTTP connection is closed after this");
  flags.String("chat-template", &s.chat_template,
               "Jinja chat template file for /v1/chat/completions (default: the model's "
               "tokenizer_config.json chat_template or chat_template.jinja)");
}

absl::Status CheckSchedulerSettings(const SchedulerSettings& s, const FlagSet& flags) {
  if (!(s.gpu_memory_utilization > 0.0 && s.gpu_memory_utilization <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--gpu-memory-utilization must be in (0, 1], got ", s.gpu_memory_utilization));
  }
  if (s.kv_cache_mb < -1) {
    return absl::InvalidArgumentError("--kv-cache-mb must be >= -1");
  }
  if (absl::Status st = CheckKvCacheDtype(s.kv_cache_dtype, s.device.rfind("cuda", 0) == 0);
      !st.ok()) {
    return st;
  }
  for (auto [name, port] : {std::pair<const char*, int64_t>{"--health-port", s.health_port},
                            {"--rendezvous-port", s.rendezvous_port},
                            {"--http-port", s.http_port}}) {
    if (port < 0 || port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat(name, " must be in [0, 65535]"));
    }
    // gRPC binds with SO_REUSEPORT: a clash would not fail, it would split the traffic.
    if (port != 0 && port == s.port) {
      return absl::InvalidArgumentError(absl::StrCat(name, " must differ from --port"));
    }
  }
  if (s.health_port != 0 && s.health_port == s.rendezvous_port) {
    return absl::InvalidArgumentError("--health-port must differ from --rendezvous-port");
  }
  if (s.http_port != 0 && (s.http_port == s.health_port || s.http_port == s.rendezvous_port)) {
    return absl::InvalidArgumentError(
        "--http-port must differ from --health-port and --rendezvous-port");
  }

  if (s.max_request_body_mb < 1 || s.http_threads < 1) {
    return absl::InvalidArgumentError("--max-request-body-mb and --http-threads must be >= 1");
  }
  if (!(s.http_request_timeout_s > 0) || !(s.http_idle_timeout_s > 0)) {
    return absl::InvalidArgumentError(
        "--http-request-timeout-s and --http-idle-timeout-s must be > 0");
  }
  const bool host_tier_asked = s.host_prefix_cache && flags.IsSet("host-prefix-cache");
  if (host_tier_asked && (s.swap_space_mb <= 0 || s.num_host_blocks == 0)) {
    return absl::InvalidArgumentError(
        "--host-prefix-cache needs host blocks to keep them in: set --swap-space-mb");
  }
  if (host_tier_asked && !s.enable_prefix_caching) {
    return absl::InvalidArgumentError(
        "--host-prefix-cache is a tier of the prefix cache: it needs --enable-prefix-caching");
  }
  if (s.host_prefix_cache_step_mb < -1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--host-prefix-cache-step-mb must be >= -1, got ", s.host_prefix_cache_step_mb));
  }
  if (s.on_worker_failure != "requeue" && s.on_worker_failure != "fail") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--on-worker-failure '", s.on_worker_failure, "': expected requeue or fail"));
  }
  if (s.max_requeues < 0 || s.max_requeues > 1000) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-requeues must be in [0, 1000], got ", s.max_requeues));
  }
  if (!(s.step_timeout_min_s > 0) || !(s.step_timeout_s >= s.step_timeout_min_s)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--step-timeout-min-s must be > 0 and at most --step-timeout-s (got ",
        s.step_timeout_min_s, " and ", s.step_timeout_s, ")"));
  }
  if (!(s.drain_timeout_s >= 0 && s.drain_timeout_s <= 86400)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--drain-timeout-s must be in [0, 86400], got ", s.drain_timeout_s));
  }
  if (!(s.health_check_interval_s >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--health-check-interval-s must be >= 0, got ", s.health_check_interval_s));
  }
  if (s.max_waiting_requests < 0 || s.max_waiting_requests > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max-waiting-requests must be in [0, ", INT32_MAX, "], got ", s.max_waiting_requests));
  }
  if (s.max_waiting_tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-waiting-tokens must be >= 0, got ", s.max_waiting_tokens));
  }
  if (s.stream_interval < 1 || s.stream_interval > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("--stream-interval must be in [1, 1024], got ", s.stream_interval));
  }
  return absl::OkStatus();
}

int32_t HostTierBlocksPerStep(int64_t step_mb, uint64_t block_bytes) {
  if (step_mb <= 0) return static_cast<int32_t>(step_mb);
  const uint64_t blocks = (static_cast<uint64_t>(step_mb) << 20) / std::max<uint64_t>(block_bytes, 1);
  return static_cast<int32_t>(std::clamp<uint64_t>(blocks, 1, INT32_MAX));
}

// --dtype: what the workers can compute in on `device`. Checked before any
// server starts, so a typo is not silently served in the default dtype.
// On the cpu, bfloat16 means bf16 weights (compute and KV cache stay fp32).
absl::StatusOr<v1::DType> ParseDType(const std::string& name, bool on_cuda) {
  if (name.empty() || name == "auto") return v1::DTYPE_UNSPECIFIED;
  if (name == "float32" || name == "float" || name == "f32") return v1::DTYPE_FLOAT32;
  if (name == "bfloat16" || name == "bf16") return v1::DTYPE_BFLOAT16;
  if (!on_cuda && (name == "float16" || name == "half" || name == "f16")) {
    return absl::InvalidArgumentError(
        "--dtype float16: the cpu worker stores weights as float32 or bfloat16 (auto computes "
        "an fp16 checkpoint in float32)");
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--dtype '", name, "': expected auto, float32 or bfloat16"));
}

// --quantization: weight-only int8 is the cpu worker's.
absl::Status CheckQuantization(const std::string& name, bool on_cuda) {
  if (name.empty()) return absl::OkStatus();
  if (name != "int8") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--quantization '", name, "': expected int8 (weight-only, per output channel)"));
  }
  if (on_cuda) {
    return absl::InvalidArgumentError(
        "--quantization int8: weight-only int8 runs on the cpu worker only (--device cpu)");
  }
  return absl::OkStatus();
}

// --kv-cache-dtype: the quantized caches are the cpu worker's (the CUDA
// kernels read bf16 or fp32 blocks only).
absl::Status CheckKvCacheDtype(const std::string& name, bool on_cuda) {
  absl::StatusOr<kernels::CacheDtype> dtype = ParseCpuKvCacheDtype(name);
  if (!dtype.ok()) return dtype.status();
  if (on_cuda && *dtype != kernels::CacheDtype::kFloat32) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--kv-cache-dtype ", name,
        ": a quantized KV cache runs on the cpu worker only for now (--device cpu, or "
        "--kv-cache-dtype auto)"));
  }
  return absl::OkStatus();
}

// --reservation-policy: the simulator's oracle needs every output's true
// length, which a server is never told.
absl::StatusOr<ReservationPolicy> ParseServedReservationPolicy(const std::string& name) {
  absl::StatusOr<ReservationPolicy> policy = ParseReservationPolicy(name);
  if (!policy.ok() || *policy == ReservationPolicy::kOracle) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--reservation-policy '", name, "': expected none, max or pow2",
        policy.ok() ? " (oracle needs each output's true length, which a server is not told; "
                      "folio-kvsim models it)"
                    : ""));
  }
  return policy;
}

}  // namespace folio
