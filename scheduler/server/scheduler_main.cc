// folio-scheduler: the cluster's brain. Serves folio.v1.Generation to
// clients and folio.v1.Rendezvous to its workers, drives the folio-worker
// ranks (one per device) through one plan per iteration, and owns every KV
// block. Configured by flags or FOLIO_* environment variables.
//
// Beside gRPC it serves the OpenAI-compatible HTTP API (--http-port,
// default 8000; scheduler/openai/), on the same engine.
//
// Securing the client port (docs/operations.md): --api-key / --api-key-file
// (Generation calls need `authorization: Bearer <key>`), --tls-cert and
// --tls-key (TLS), --tls-client-ca (mutual TLS), and --health-port, a
// plaintext grpc.health.v1-only port for probes that cannot speak TLS.

#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/flags.h"
#include "common/generation_defaults.h"
#include "common/metrics_server.h"
#include "common/model_config.h"
#include "common/tokenizer.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/impl/server_builder_option.h"
#include "grpcpp/impl/server_builder_plugin.h"
#include "prometheus/registry.h"
#include "common/chat_template.h"
#include "scheduler/openai/http_server.h"
#include "scheduler/openai/openai_service.h"
#include "scheduler/rendezvous_service.h"
#include "scheduler/reservation_space.h"
#include "scheduler/server/api_key_auth.h"
#include "scheduler/server/engine.h"
#include "scheduler/server/generation_service.h"
#include "scheduler/server/remote_worker_group.h"
#include "scheduler/server/scheduler_metrics.h"
#include "scheduler/server/scheduler_settings.h"
#include "scheduler/server/tls_credentials.h"

namespace folio {
namespace {

constexpr char kUsage[] =
    "usage: folio-scheduler --model DIR [flags]\n"
    "Serves folio.v1.Generation and drives the folio-worker ranks.\n";

// Leaves gRPC's server plugins (reflection) out of a server: the health
// port serves grpc.health.v1 and nothing else.
class WithoutPlugins final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments* /*args*/) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->clear();
  }
};

// The serving status of every server's grpc.health.v1 (the client port's
// and the --health-port's): one state, set on all.
// Readiness is the server's overall status (service ""); liveness is the
// service "liveness", SERVING from the start while the process can recover.
class HealthStatus {
 public:
  static constexpr char kLiveness[] = "liveness";
  void Add(grpc::Server& server) {
    services_.push_back(server.GetHealthCheckService());
    services_.back()->SetServingStatus(kLiveness, true);
  }
  void Set(bool serving) const {
    for (grpc::HealthCheckServiceInterface* s : services_) s->SetServingStatus("", serving);
  }
  void SetLive(bool live) const {
    for (grpc::HealthCheckServiceInterface* s : services_) s->SetServingStatus(kLiveness, live);
  }

 private:
  std::vector<grpc::HealthCheckServiceInterface*> services_;
};

// Submits a one-token request and waits for it: proof that a real forward
// pass works before the server reports itself ready.
absl::Status Warmup(Engine& engine, TokenId token) {
  struct Sink : GenerateSink {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    absl::Status status;
    void OnResponse(v1::GenerateResponse r) override {
      std::lock_guard<std::mutex> lock(mu);
      if (!r.has_finished()) return;
      for (const auto& s : r.finished().sequences()) {
        if (s.reason() == v1::FINISH_REASON_ERROR) status = absl::InternalError(s.error_message());
      }
      done = true;
      cv.notify_all();
    }
    void OnError(absl::Status s) override {
      std::lock_guard<std::mutex> lock(mu);
      status = s;
      done = true;
      cv.notify_all();
    }
  };
  auto sink = std::make_shared<Sink>();
  v1::GenerateRequest request;
  request.mutable_token_ids()->add_ids(token);
  request.mutable_sampling_params()->set_max_tokens(1);
  request.mutable_sampling_params()->set_temperature(0);
  absl::StatusOr<std::string> id = engine.Submit(request, sink);
  if (!id.ok()) return id.status();
  std::unique_lock<std::mutex> lock(sink->mu);
  sink->cv.wait(lock, [&] { return sink->done; });
  return sink->status;
}

int Run(int argc, char** argv) {
  SchedulerSettings s;
  FlagSet flags;
  DefineSchedulerFlags(flags, s);
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      std::printf("%s%s", kUsage, flags.Help().c_str());
      return 0;
    }
  }
  if (absl::Status st = flags.Parse(argc, argv); !st.ok() || s.model.empty()) {
    std::fprintf(stderr, "folio-scheduler: %s\n%s",
                 st.ok() ? "--model is required" : std::string(st.message()).c_str(), kUsage);
    return 2;
  }
  auto fail = [](const absl::Status& st) {
    std::fprintf(stderr, "folio-scheduler: %s\n", std::string(st.message()).c_str());
    return 1;
  };
  // Signals go to one thread; Ctrl-C before the engine is up just exits.
  // Blocked before anything starts a thread (gRPC does, from the first
  // credentials on): a thread created earlier would take SIGTERM and die.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // SIGTERM (Kubernetes, `folio serve`) drains for --drain-timeout-s;
  // SIGINT (Ctrl-C) or a second signal stops at once.
  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stop = false;
  bool drain = false;
  std::atomic<bool> stop_now{false};
  std::atomic<bool> ready{false};
  std::thread([&] {
    for (int received = 0;; ++received) {
      int sig = 0;
      sigwait(&signals, &sig);
      if (!ready.load()) std::_Exit(128 + sig);
      std::lock_guard<std::mutex> lock(stop_mu);
      if (received == 0) drain = sig == SIGTERM;
      if (received > 0 || sig != SIGTERM) stop_now = true;
      stop = true;
      stop_cv.notify_all();
    }
  }).detach();

  // Every HTTP stream and gRPC call holds a descriptor: take what the hard
  // limit allows (as vLLM does), so thousands of clients fit.
  if (rlimit nofile; getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = std::min<rlim_t>(nofile.rlim_max, 1 << 20);
    setrlimit(RLIMIT_NOFILE, &nofile);
  }

  // Security settings first: a wrong file fails before the model loads.
  absl::StatusOr<std::string> api_key = ApiKeyAuth::Load(s.api_key, s.api_key_file);
  if (!api_key.ok()) return fail(api_key.status());
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> client_credentials =
      MakeServerCredentials(s.tls);
  if (!client_credentials.ok()) return fail(client_credentials.status());
  if (absl::Status st = CheckSchedulerSettings(s, flags); !st.ok()) return fail(st);

  absl::StatusOr<ModelConfig> model = ModelConfig::LoadFromDirectory(s.model);
  if (!model.ok()) return fail(model.status());
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::LoadFromDirectory(s.model);
  if (!tokenizer.ok()) return fail(tokenizer.status());
  std::string defaults_source;
  absl::StatusOr<SamplingDefaults> sampling_defaults =
      LoadSamplingDefaults(s.generation_config, s.model, &defaults_source);
  if (!sampling_defaults.ok()) {
    return fail(absl::Status(sampling_defaults.status().code(),
                             absl::StrCat(sampling_defaults.status().message(),
                                          " (--generation-config none ignores it)")));
  }
  if (!sampling_defaults->empty()) {
    std::fprintf(stderr,
                 "folio-scheduler: requests that leave them unset sample with %s, from %s "
                 "(--generation-config none turns this off)\n",
                 sampling_defaults->ToString().c_str(), defaults_source.c_str());
  }
  // The chat template: a broken one stops start-up; none only refuses chat.
  std::unique_ptr<ChatTemplate> chat_template;
  std::string no_template_reason;
  if (s.http_port != 0) {
    absl::StatusOr<std::unique_ptr<ChatTemplate>> loaded = ChatTemplate::Load(s.model, s.chat_template);
    if (loaded.ok()) {
      chat_template = std::move(*loaded);
    } else if (loaded.status().code() == absl::StatusCode::kNotFound && s.chat_template.empty()) {
      no_template_reason = std::string(loaded.status().message());
      std::fprintf(stderr, "folio-scheduler: %s: /v1/chat/completions will answer 400\n",
                   no_template_reason.c_str());
    } else {
      return fail(loaded.status());
    }
  }
  const bool on_cuda = s.device.rfind("cuda", 0) == 0;
  absl::StatusOr<v1::DType> dtype = ParseDType(s.dtype, on_cuda);
  if (!dtype.ok()) return fail(dtype.status());
  if (absl::Status q = CheckQuantization(s.quantization, on_cuda); !q.ok()) return fail(q);
  const int32_t model_max_len = model->MaxModelLen();
  // A --max-model-len past the model's context fails here, before any worker
  // loads (the cache's own bound is checked once the workers report it).
  if (absl::StatusOr<int32_t> len = ResolveMaxModelLen(
          static_cast<int32_t>(std::min<int64_t>(s.max_model_len, INT32_MAX)), model_max_len,
          std::numeric_limits<int64_t>::max());
      !len.ok()) {
    return fail(len.status());
  }
  absl::StatusOr<PreemptionMode> preemption = ParsePreemptionMode(s.preemption_mode);
  if (!preemption.ok()) return fail(preemption.status());
  absl::StatusOr<SchedulingPolicy> policy = ParseSchedulingPolicy(s.scheduling_policy);
  if (!policy.ok()) return fail(policy.status());
  absl::StatusOr<ReservationPolicy> reservation = ParseServedReservationPolicy(s.reservation_policy);
  if (!reservation.ok()) return fail(reservation.status());
  absl::StatusOr<BatchingMode> batching = ParseBatchingMode(s.batching);
  if (!batching.ok()) {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("--batching '", s.batching, "': expected continuous or static")));
  }

  // One server for clients and the workers' rendezvous; Generation answers
  // UNAVAILABLE and health NOT_SERVING until the workers are up.
  // Prometheus /metrics, up before anything else so a scrape sees the
  // process; the series appear once the workers are up. A clash on a port
  // given explicitly is fatal; on the default port it only costs the metrics.
  auto registry = std::make_shared<prometheus::Registry>();
  std::unique_ptr<MetricsServer> metrics_server;
  if (s.metrics_port != 0) {
    const std::string metrics_host = s.metrics_host.empty() ? s.host : s.metrics_host;
    absl::StatusOr<std::unique_ptr<MetricsServer>> started = MetricsServer::Start(
        metrics_host, s.metrics_port < 0 ? 9400 : static_cast<int>(s.metrics_port), registry);
    if (started.ok()) {
      metrics_server = std::move(*started);
      std::fprintf(stderr, "folio-scheduler: metrics on http://%s:%d/metrics\n",
                   metrics_host.c_str(), metrics_server->port());
    } else if (s.metrics_port > 0) {
      return fail(started.status());
    } else {
      std::fprintf(stderr, "folio-scheduler: warning: %s; serving without metrics\n",
                   std::string(started.status().message()).c_str());
    }
  }
  std::unique_ptr<SchedulerMetrics> metrics;  // outlives the engine

  // The OpenAI HTTP API answers 503 (and /health 503) until the engine is up.
  std::string served_name = s.model_name;
  if (served_name.empty()) {
    std::vector<std::string> parts = absl::StrSplit(s.model, '/', absl::SkipEmpty());
    served_name = parts.empty() ? s.model : parts.back();
  }
  std::unique_ptr<OpenAiService> openai;
  std::unique_ptr<HttpServer> http_server;
  if (s.http_port != 0) {
    OpenAiService::Options oo;
    oo.model_name = served_name;
    oo.model_root = s.model;
    oo.version = FOLIO_VERSION;
    oo.api_key = *api_key;
    oo.registry = registry;
    openai = std::make_unique<OpenAiService>(oo, std::move(chat_template), no_template_reason);
    HttpServer::Options ho;
    ho.host = s.host;
    ho.port = static_cast<int>(s.http_port);
    ho.num_threads = static_cast<int>(s.http_threads);
    ho.max_body_bytes = s.max_request_body_mb << 20;
    ho.request_timeout = absl::Seconds(s.http_request_timeout_s);
    ho.idle_timeout = absl::Seconds(s.http_idle_timeout_s);
    ho.tls_cert_file = s.tls.cert;
    ho.tls_key_file = s.tls.key;
    ho.tls_client_ca_file = s.tls.client_ca;
    absl::StatusOr<std::unique_ptr<HttpServer>> started = HttpServer::Start(ho, openai.get());
    if (started.ok()) {
      http_server = std::move(*started);
      std::fprintf(stderr, "folio-scheduler: OpenAI API on %s://%s:%d/v1\n",
                   http_server->tls() ? "https" : "http", s.host.c_str(), http_server->port());
    } else if (flags.IsSet("http-port") || started.status().code() != absl::StatusCode::kUnavailable) {
      return fail(started.status());
    } else {
      std::fprintf(stderr, "folio-scheduler: warning: %s; serving without the HTTP API\n",
                   std::string(started.status().message()).c_str());
    }
  }

  RemoteWorkerGroup::Options wo;
  if (s.workers.empty()) {
    for (int64_t r = 0; r < s.tensor_parallel_size; ++r) {
      wo.addresses.push_back(absl::StrCat(s.worker_host, ":", s.worker_base_port + r));
    }
  } else {
    wo.addresses = absl::StrSplit(s.workers, ',', absl::SkipEmpty());
  }
  // The workers' rendezvous (more than one rank) speaks plaintext: under TLS,
  // or when asked, it gets a server of its own instead of the client port.
  const bool separate_rendezvous =
      wo.addresses.size() > 1 && (s.tls.enabled() || s.rendezvous_port != 0);

  RendezvousService rendezvous;
  // A reservation policy's claims, in one linear space as the allocators
  // before paging had (the engine refers to it: it lives longer).
  std::unique_ptr<ContiguousSlotSpace> reservation_space;
  std::unique_ptr<Engine> engine;
  // The engine comes once the workers are up.
  GenerationService generation(nullptr, ApiKeyAuth(*api_key));
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(absl::StrCat(s.host, ":", s.port), *client_credentials, &bound_port);
  builder.SetMaxReceiveMessageSize(64 << 20);
  if (!separate_rendezvous) builder.RegisterService(&rendezvous);
  builder.RegisterService(&generation);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) {
    return fail(absl::UnavailableError(absl::StrCat("cannot listen on ", s.host, ":", s.port)));
  }
  HealthStatus health;
  health.Add(*server);

  // Plaintext side servers: grpc.health.v1 alone (--health-port) and the
  // rendezvous. Neither carries folio.v1.Generation.
  grpc::CallbackGenericService unimplemented;
  std::unique_ptr<grpc::Server> health_server;
  std::unique_ptr<grpc::Server> rendezvous_server;
  auto stop_side_servers = [&] {
    const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(1);
    if (rendezvous_server != nullptr) rendezvous_server->Shutdown(deadline);
    if (health_server != nullptr) health_server->Shutdown(deadline);
  };
  if (s.health_port != 0) {
    grpc::ServerBuilder hb;
    int health_bound = 0;
    hb.AddListeningPort(absl::StrCat(s.host, ":", s.health_port),
                        grpc::InsecureServerCredentials(), &health_bound);
    hb.SetOption(std::make_unique<WithoutPlugins>());
    // Answers UNIMPLEMENTED to everything but health; gRPC also needs one
    // service of ours to poll a completion queue for the server to start.
    hb.RegisterCallbackGenericService(&unimplemented);
    health_server = hb.BuildAndStart();
    if (health_server == nullptr || health_bound == 0) {
      server->Shutdown(std::chrono::system_clock::now());
      return fail(absl::UnavailableError(
          absl::StrCat("--health-port: cannot listen on ", s.host, ":", s.health_port)));
    }
    health.Add(*health_server);
    std::fprintf(stderr, "folio-scheduler: grpc.health.v1 (plaintext) on %s:%d\n",
                 s.host.c_str(), health_bound);
  }
  health.Set(false);
  std::string advertise =
      s.advertise_address.empty() ? absl::StrCat(s.host, ":", bound_port) : s.advertise_address;
  if (separate_rendezvous) {
    grpc::ServerBuilder rb;
    int rendezvous_bound = 0;
    rb.AddListeningPort(absl::StrCat(s.host, ":", s.rendezvous_port),
                        grpc::InsecureServerCredentials(), &rendezvous_bound);
    rb.SetOption(std::make_unique<WithoutPlugins>());
    rb.RegisterService(&rendezvous);
    rendezvous_server = rb.BuildAndStart();
    if (rendezvous_server == nullptr || rendezvous_bound == 0) {
      stop_side_servers();
      server->Shutdown(std::chrono::system_clock::now());
      return fail(absl::UnavailableError(
          absl::StrCat("--rendezvous-port: cannot listen on ", s.host, ":", s.rendezvous_port)));
    }
    if (s.advertise_address.empty()) {
      advertise = absl::StrCat(s.host, ":", rendezvous_bound);
    } else if (absl::EndsWith(s.advertise_address, absl::StrCat(":", bound_port))) {
      stop_side_servers();
      server->Shutdown(std::chrono::system_clock::now());
      return fail(absl::InvalidArgumentError(absl::StrCat(
          "--advertise-address ", s.advertise_address,
          " names the client port, but the workers' rendezvous is served (plaintext) on port ",
          rendezvous_bound, " (--rendezvous-port)")));
    }
    std::fprintf(stderr, "folio-scheduler: worker rendezvous (plaintext) on %s:%d\n",
                 s.host.c_str(), rendezvous_bound);
  }
  std::fprintf(stderr, "folio-scheduler: listening on %s:%d (%s%s), waiting for %zu worker(s)\n",
               s.host.c_str(), bound_port,
               !s.tls.enabled()                ? "plaintext"
               : s.tls.client_ca.empty()       ? "TLS"
                                               : "mutual TLS",
               api_key->empty() ? "" : ", API key required", wo.addresses.size());
  v1::InitializeRequest& init = wo.initialize;
  init.set_model_path(s.model);
  init.set_model_name(s.model_name);  // empty: the workers use the directory's name too
  init.set_dtype(*dtype);
  init.set_quantization(s.quantization);
  init.set_kv_cache_dtype(s.kv_cache_dtype);
  init.set_device(s.device);
  init.set_block_size(static_cast<uint32_t>(s.block_size));
  const int64_t kv_cache_mb = s.kv_cache_mb >= 0 ? s.kv_cache_mb : on_cuda ? 0 : 256;
  init.set_kv_cache_bytes(static_cast<uint64_t>(kv_cache_mb) << 20);
  init.set_memory_utilization(static_cast<float>(s.gpu_memory_utilization));
  init.set_swap_space_bytes(static_cast<uint64_t>(s.swap_space_mb) << 20);
  const int32_t max_model_len =
      s.max_model_len > 0 ? static_cast<int32_t>(s.max_model_len) : model_max_len;
  init.set_max_model_len(static_cast<uint32_t>(max_model_len));
  init.set_max_num_batched_tokens(static_cast<uint32_t>(s.max_num_batched_tokens));
  init.set_max_num_seqs(static_cast<uint32_t>(s.max_num_seqs));
  if (wo.addresses.size() > 1) {
    init.set_rendezvous_address(advertise);
    init.set_rendezvous_prefix(absl::StrCat("folio-", absl::ToUnixNanos(absl::Now()), "/"));
  }
  wo.step_timeout = absl::Seconds(s.step_timeout_s);
  wo.step_timeout_min = absl::Seconds(s.step_timeout_min_s);
  wo.abandon_rendezvous = [&rendezvous](const std::string& prefix) { rendezvous.Abandon(prefix); };
  wo.max_device_blocks = static_cast<int32_t>(s.num_device_blocks);
  wo.max_host_blocks = static_cast<int32_t>(s.num_host_blocks);
  wo.connect_timeout = absl::Seconds(s.connect_timeout_s);
  absl::StatusOr<std::unique_ptr<RemoteWorkerGroup>> workers = RemoteWorkerGroup::Connect(wo);
  if (!workers.ok()) {
    // Said first: the workers are already told to stop, and `folio serve`
    // stops this process once they exit.
    const int code = fail(workers.status());
    rendezvous.Shutdown();
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    stop_side_servers();
    return code;
  }
  RemoteWorkerGroup* group = workers->get();

  Engine::Options eo;
  eo.scheduler.block_size = static_cast<int32_t>(s.block_size);
  eo.scheduler.num_device_blocks = group->num_device_blocks();
  eo.scheduler.num_host_blocks = group->num_host_blocks();
  eo.scheduler.max_num_seqs = static_cast<int32_t>(s.max_num_seqs);
  eo.max_waiting_requests = static_cast<int32_t>(s.max_waiting_requests);
  eo.max_waiting_tokens = s.max_waiting_tokens;
  eo.stream_interval = static_cast<int32_t>(s.stream_interval);
  eo.on_worker_failure =
      s.on_worker_failure == "fail" ? WorkerFailurePolicy::kFail : WorkerFailurePolicy::kRequeue;
  eo.max_requeues = static_cast<int32_t>(s.max_requeues);
  eo.health_check_interval = absl::Seconds(s.health_check_interval_s);
  eo.scheduler.max_num_batched_tokens = static_cast<int32_t>(s.max_num_batched_tokens);
  eo.scheduler.enable_prefix_caching = s.enable_prefix_caching;
  eo.scheduler.host_prefix_cache = s.host_prefix_cache;
  eo.scheduler.host_tier_blocks_per_step =
      HostTierBlocksPerStep(s.host_prefix_cache_step_mb, group->block_bytes());
  eo.scheduler.preemption_mode = *preemption;
  eo.scheduler.policy = *policy;
  eo.scheduler.reservation = *reservation;
  eo.scheduler.batching = *batching;
  if (*reservation != ReservationPolicy::kNone) {
    reservation_space = std::make_unique<ContiguousSlotSpace>(
        static_cast<int64_t>(eo.scheduler.num_device_blocks) * eo.scheduler.block_size);
    eo.scheduler.reservation_space = reservation_space.get();
  }
  if (*reservation != ReservationPolicy::kNone || *batching != BatchingMode::kContinuous) {
    std::fprintf(stderr, "folio-scheduler: %s batching, %s reservations (a benchmark baseline)\n",
                 BatchingModeName(*batching), ReservationPolicyName(*reservation));
  }
  eo.scheduler.check_invariants = false;
  // What the pool can hold bounds what may be asked for.
  std::string cap_note;
  const absl::StatusOr<int32_t> served_len =
      ResolveMaxModelLen(static_cast<int32_t>(std::min<int64_t>(s.max_model_len, INT32_MAX)),
                         model_max_len, RequestTokenSlots(eo.scheduler), &cap_note);
  if (!served_len.ok()) return fail(served_len.status());
  if (!cap_note.empty()) std::fprintf(stderr, "folio-scheduler: %s\n", cap_note.c_str());
  eo.scheduler.max_model_len = *served_len;
  eo.scheduler.sliding_window = model->CacheWindow();
  eo.model_name = served_name;
  eo.tensor_parallel_size = group->world_size();
  eo.kv_cache_dtype = group->kv_cache_dtype();
  if (metrics_server != nullptr || http_server != nullptr) {  // both serve /metrics
    SchedulerMetrics::Options mo;
    mo.model_name = eo.model_name;
    mo.block_size = eo.scheduler.block_size;
    mo.num_device_blocks = eo.scheduler.num_device_blocks;
    mo.num_host_blocks = eo.scheduler.num_host_blocks;
    mo.tensor_parallel_size = eo.tensor_parallel_size;
    mo.kv_cache_dtype = eo.kv_cache_dtype;
    mo.block_bytes = group->block_bytes() * static_cast<uint64_t>(group->world_size());
    metrics = std::make_unique<SchedulerMetrics>(*registry, mo);
    eo.metrics = metrics.get();
  }
  RequestLimits limits;
  limits.vocab_size = model->vocab_size;
  limits.max_model_len = *served_len;
  limits.eos_token_ids = model->eos_token_ids;
  limits.sampling_defaults = *sampling_defaults;
  // While the worker group is rebuilt, readiness is NOT_SERVING (traffic
  // goes elsewhere) and liveness stays SERVING (Kubernetes keeps the pod and
  // its queue). A failure beyond repair ends both: the pod is restarted.
  eo.on_serving_changed = [health](bool serving, const absl::Status&) { health.Set(serving); };
  eo.on_failure = [health](const absl::Status& status) {
    std::fprintf(stderr, "folio-scheduler: the workers failed, no longer serving: %s\n",
                 std::string(status.message()).c_str());
    health.Set(false);
    health.SetLive(false);
  };
  absl::StatusOr<std::unique_ptr<Engine>> created =
      Engine::Create(eo, std::move(*tokenizer), limits, std::move(*workers));
  if (!created.ok()) return fail(created.status());
  engine = std::move(*created);
  engine->Start();
  if (absl::Status st = Warmup(*engine, model->bos_token_id.value_or(0)); !st.ok()) {
    return fail(absl::InternalError(absl::StrCat("warm-up forward pass failed: ", st.message())));
  }
  generation.set_engine(engine.get());
  if (openai != nullptr) openai->set_engine(engine.get());
  health.Set(true);
  ready.store(true);
  const std::string http_address =
      http_server == nullptr ? std::string()
                             : absl::StrCat(", OpenAI API on ", http_server->tls() ? "https" : "http",
                                            "://", s.host, ":", http_server->port(), "/v1");
  std::fprintf(stderr,
               "folio-scheduler: serving %s on %s:%d%s (tp=%d, %d KV blocks of %lld tokens in "
               "%s, device %s)\n",
               eo.model_name.c_str(), s.host.c_str(), bound_port, http_address.c_str(),
               group->world_size(), group->num_device_blocks(),
               static_cast<long long>(s.block_size), group->kv_cache_dtype().c_str(),
               group->device_name().c_str());
  if (const KvCacheManager::Options kv = Scheduler::KvCacheOptions(eo.scheduler);
      kv.host_tier_enabled()) {
    const std::string budget =
        kv.host_tier_blocks_per_step == 0
            ? std::string("no bound")
            : absl::StrCat(kv.host_tier_blocks_per_step, " blocks (",
                           (kv.host_tier_blocks_per_step * group->block_bytes()) >> 20,
                           " MiB per rank)");
    std::fprintf(stderr,
                 "folio-scheduler: prefix cache host tier on (%d host blocks; per step and "
                 "direction: %s; --no-host-prefix-cache turns it off)\n",
                 kv.num_host_blocks, budget.c_str());
  }

  {
    std::unique_lock<std::mutex> lock(stop_mu);
    stop_cv.wait(lock, [&] { return stop; });
  }
  health.Set(false);
  if (drain && s.drain_timeout_s > 0) {
    engine->StopAccepting();
    const EngineSnapshot at_start = engine->Snapshot();
    std::fprintf(stderr,
                 "folio-scheduler: SIGTERM: draining %d live request(s) for up to %gs (a second "
                 "signal stops at once)\n",
                 at_start.num_live_requests, s.drain_timeout_s);
    const absl::Time deadline = absl::Now() + absl::Seconds(s.drain_timeout_s);
    bool idle = false;
    while (!(idle = engine->WaitIdle(absl::Milliseconds(100))) && !stop_now &&
           absl::Now() < deadline) {
    }
    if (!idle) {
      std::fprintf(stderr, "folio-scheduler: %s; aborting the %d request(s) left\n",
                   stop_now ? "stopping at once" : "the drain timeout passed",
                   engine->Snapshot().num_live_requests);
    }
  }
  std::fprintf(stderr, "folio-scheduler: shutting down\n");
  engine->Shutdown();  // every live stream left ends with FINISH_REASON_ABORT
  // The HTTP streams end as well ("abort", then [DONE]); give them a moment to leave.
  if (http_server != nullptr) http_server->Stop(absl::Seconds(1));
  if (openai != nullptr) openai->set_engine(nullptr);
  rendezvous.Shutdown();
  // Every stream has ended; what is left are idle client connections, which
  // gRPC would otherwise wait on until the deadline.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  stop_side_servers();
  generation.set_engine(nullptr);
  group->Shutdown();
  // Every request has ended by now, so every block must be back: a leak is
  // a bug worth a failing exit status (the integration tests check it).
  if (absl::Status st = engine->CheckDrained(); !st.ok()) return fail(st);
  return 0;
}

}  // namespace
}  // namespace folio

int main(int argc, char** argv) { return folio::Run(argc, argv); }
