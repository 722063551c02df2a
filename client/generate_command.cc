// `folio generate`: a streaming gRPC client of folio.v1.Generation. Text
// goes to stdout as it arrives; --json prints every stream message as one
// JSON line instead. Interrupting it closes the stream, which aborts the
// request on the server.
//
// A secured endpoint (docs/operations.md): --api-key (FOLIO_API_KEY) sends
// `authorization: Bearer <key>`; --tls-ca FILE (or --tls for the system's
// roots) speaks TLS; --tls-client-cert/--tls-client-key for mutual TLS.

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "client/commands.h"
#include "client/logit_bias_flag.h"
#include "common/byte_level.h"
#include "common/flags.h"
#include "folio/v1/generation.grpc.pb.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"

namespace folio {
namespace {

constexpr char kGenerateUsage[] =
    "usage: folio generate [flags] PROMPT\n"
    "Streams a generation from a running folio cluster (folio serve).\n";

// The contents of `path` (named by `flag`), or an error message.
bool ReadFile(const std::string& flag, const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (in) out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (!in || in.bad() || out->empty()) {
    std::fprintf(stderr, "folio generate: %s: cannot read %s\n", flag.c_str(), path.c_str());
    return false;
  }
  return true;
}

const char* ReasonName(v1::FinishReason reason) {
  switch (reason) {
    case v1::FINISH_REASON_LENGTH: return "length";
    case v1::FINISH_REASON_STOP: return "stop";
    case v1::FINISH_REASON_EOS: return "eos";
    case v1::FINISH_REASON_ABORT: return "abort";
    case v1::FINISH_REASON_ERROR: return "error";
    default: return "unspecified";
  }
}

}  // namespace

int GenerateMain(int argc, char** argv) {
  std::string address = "127.0.0.1:50051";
  std::string request_id;
  int64_t max_tokens = 16, top_k = 0, n = 1, best_of = 0, beam_width = 0, logprobs = -1,
          prompt_logprobs = -1, seed = -1, priority = 0, truncate_prompt_tokens = 0;
  double temperature = 1.0, top_p = 1.0, min_p = 0.0, repetition_penalty = 1.0,
         presence_penalty = 0.0, frequency_penalty = 0.0, timeout_s = 600, wait_s = 0;
  bool ignore_eos = false, json = false, token_ids_only = false;
  bool include_stop = false, skip_special_tokens = true;
  int64_t min_tokens = 0;
  std::vector<std::string> stops, stop_token_ids, logit_biases, allowed_token_ids, bad_words;
  std::string api_key, tls_ca, tls_server_name, tls_client_cert, tls_client_key;
  bool tls = false;
  FlagSet flags;
  flags.String("address", &address, "the scheduler's client address");
  flags.String("api-key", &api_key, "sent as `authorization: Bearer <key>` (folio-scheduler --api-key)");
  flags.Bool("tls", &tls, "TLS, the server verified against the system's root CAs");
  flags.String("tls-ca", &tls_ca, "TLS, the server verified against this PEM CA (implies --tls)");
  flags.String("tls-server-name", &tls_server_name,
               "expect this name in the server's certificate instead of --address's host");
  flags.String("tls-client-cert", &tls_client_cert, "PEM client certificate (mutual TLS)");
  flags.String("tls-client-key", &tls_client_key, "PEM key of --tls-client-cert");
  flags.Int("max-tokens", &max_tokens, "new tokens at most (unset: the model's default, else 16)");
  flags.Double("temperature", &temperature, "0 = greedy (unset: the model's default, else 1)");
  flags.Double("top-p", &top_p, "nucleus mass (unset: the model's default, else 1 = off)");
  flags.Int("top-k", &top_k, "0 = off (unset: the model's default, else off)");
  flags.Double("min-p", &min_p, "0 = off (unset: the model's default, else off)");
  flags.Double("repetition-penalty", &repetition_penalty,
               "1 = off (unset: the model's default, else off)");
  flags.Double("presence-penalty", &presence_penalty, "0 = off");
  flags.Double("frequency-penalty", &frequency_penalty, "0 = off");
  flags.Int("seed", &seed, "deterministic sampling; -1 = random");
  flags.Int("n", &n, "sequences returned");
  flags.Int("best-of", &best_of, "candidates sampled; 0 = n");
  flags.Int("beam-width", &beam_width, "> 1 = beam search");
  flags.Strings("stop", &stops, "stop string");
  flags.Strings("stop-token-id", &stop_token_ids, "stop token id");
  flags.Bool("ignore-eos", &ignore_eos, "keep going past end-of-sequence");
  flags.Int("min-tokens", &min_tokens, "no EOS, stop token or stop string before this many tokens");
  flags.Strings("logit-bias", &logit_biases, "ID=BIAS, added to that token's logit ([-100, 100])");
  flags.Strings("allowed-token-id", &allowed_token_ids, "sample only among these tokens");
  flags.Strings("bad-word", &bad_words, "a word never to generate");
  flags.Bool("include-stop-str-in-output", &include_stop,
             "keep the stop string, stop token or EOS that ended the text");
  flags.Bool("skip-special-tokens", &skip_special_tokens,
             "leave special tokens out of the text (--skip-special-tokens=false shows them)");
  flags.Int("logprobs", &logprobs, "top log-probs per token; -1 = none");
  flags.Int("prompt-logprobs", &prompt_logprobs,
            "score the prompt's tokens, with this many top log-probs each (see --json); -1 = none");
  flags.Int("truncate-prompt-tokens", &truncate_prompt_tokens,
            "keep only the prompt's last K tokens (-1: as many as max_model_len allows)");
  flags.Int("priority", &priority, "lower runs sooner (priority scheduling)");
  flags.String("request-id", &request_id, "client-chosen id (for Abort)");
  flags.Bool("json", &json, "print every stream message as a JSON line");
  flags.Bool("token-ids", &token_ids_only, "PROMPT is space-separated token ids");
  flags.Double("timeout-s", &timeout_s, "deadline of the whole call");
  flags.Double("wait-s", &wait_s, "wait this long for the server to come up");
  for (int i = 0; i < argc; ++i) {
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      std::printf("%s%s", kGenerateUsage, flags.Help().c_str());
      return 0;
    }
  }
  if (absl::Status s = flags.Parse(argc, argv, 0); !s.ok()) {
    std::fprintf(stderr, "folio generate: %s\n%s", std::string(s.message()).c_str(),
                 kGenerateUsage);
    return 2;
  }
  if (flags.positional().size() != 1) {
    std::fprintf(stderr, "folio generate: give exactly one PROMPT\n%s", kGenerateUsage);
    return 2;
  }

  v1::GenerateRequest request;
  if (token_ids_only) {
    for (absl::string_view word : absl::StrSplit(flags.positional()[0], ' ', absl::SkipEmpty())) {
      int id;
      if (!absl::SimpleAtoi(word, &id)) {
        std::fprintf(stderr, "folio generate: '%s' is not a token id\n", std::string(word).c_str());
        return 2;
      }
      request.mutable_token_ids()->add_ids(id);
    }
  } else {
    request.set_text(flags.positional()[0]);
  }
  // Protobuf strings must be UTF-8: the server could not even parse the
  // request (and would answer without a reason).
  for (const auto& [what, texts] :
       {std::pair{"PROMPT", std::vector<std::string>{request.text()}},
        std::pair{"--request-id", std::vector<std::string>{request_id}},
        std::pair{"--stop", stops}, std::pair{"--bad-word", bad_words}}) {
    for (const std::string& text : texts) {
      if (!IsValidUtf8(text)) {
        std::fprintf(stderr, "folio generate: %s is not valid UTF-8\n", what);
        return 2;
      }
    }
  }
  if (!request_id.empty()) request.set_request_id(request_id);
  v1::SamplingParams* sp = request.mutable_sampling_params();
  // Counts the server takes as uint32: refuse what would wrap or go negative
  // (a negative --prompt-logprobs means none).
  for (const auto& [name, value] :
       {std::pair{"--max-tokens", max_tokens}, std::pair{"--min-tokens", min_tokens},
        std::pair{"--prompt-logprobs", std::max<int64_t>(prompt_logprobs, 0)}}) {
    if (value < 0 || value > UINT32_MAX) {
      std::fprintf(stderr, "folio generate: %s must be in [0, %u], got %lld\n", name, UINT32_MAX,
                   static_cast<long long>(value));
      return 2;
    }
  }
  // Left unset unless given, so the model's generation_config.json
  // recommendations (folio-scheduler --generation-config) apply.
  if (flags.IsSet("max-tokens")) sp->set_max_tokens(static_cast<uint32_t>(max_tokens));
  if (flags.IsSet("temperature")) sp->set_temperature(static_cast<float>(temperature));
  if (flags.IsSet("top-p")) sp->set_top_p(static_cast<float>(top_p));
  if (flags.IsSet("top-k")) sp->set_top_k(static_cast<int32_t>(top_k));
  if (flags.IsSet("min-p")) sp->set_min_p(static_cast<float>(min_p));
  if (flags.IsSet("repetition-penalty")) {
    sp->set_repetition_penalty(static_cast<float>(repetition_penalty));
  }
  sp->set_presence_penalty(static_cast<float>(presence_penalty));
  sp->set_frequency_penalty(static_cast<float>(frequency_penalty));
  if (seed >= 0) sp->set_seed(static_cast<uint64_t>(seed));
  sp->set_n(static_cast<uint32_t>(n));
  sp->set_best_of(static_cast<uint32_t>(best_of));
  sp->set_beam_width(static_cast<uint32_t>(beam_width));
  for (const std::string& s : stops) sp->add_stop(s);
  for (const auto& [flag, values, add] :
       {std::tuple{"--stop-token-id", &stop_token_ids, &v1::SamplingParams::add_stop_token_ids},
        std::tuple{"--allowed-token-id", &allowed_token_ids,
                   &v1::SamplingParams::add_allowed_token_ids}}) {
    for (const std::string& s : *values) {
      int id;
      if (!absl::SimpleAtoi(s, &id)) {
        std::fprintf(stderr, "folio generate: %s needs an integer, got '%s'\n", flag, s.c_str());
        return 2;
      }
      (sp->*add)(id);
    }
  }
  for (const std::string& s : bad_words) sp->add_bad_words(s);
  sp->set_ignore_eos(ignore_eos);
  sp->set_min_tokens(static_cast<uint32_t>(min_tokens));
  for (const std::string& s : logit_biases) {
    const std::optional<TokenBias> bias = ParseLogitBiasFlag(s);
    if (!bias.has_value()) {
      std::fprintf(stderr, "folio generate: --logit-bias needs ID=BIAS, got '%s'\n", s.c_str());
      return 2;
    }
    (*sp->mutable_logit_bias())[bias->token] = bias->bias;
  }
  sp->set_include_stop_str_in_output(include_stop);
  if (!skip_special_tokens) sp->set_skip_special_tokens(false);
  if (logprobs >= 0) sp->set_logprobs(static_cast<uint32_t>(logprobs));
  if (prompt_logprobs >= 0) sp->set_prompt_logprobs(static_cast<uint32_t>(prompt_logprobs));
  sp->set_priority(static_cast<int32_t>(priority));
  if (flags.IsSet("truncate-prompt-tokens")) {
    if (truncate_prompt_tokens < INT32_MIN || truncate_prompt_tokens > INT32_MAX) {
      std::fprintf(stderr, "folio generate: --truncate-prompt-tokens %lld is out of range\n",
                   static_cast<long long>(truncate_prompt_tokens));
      return 2;
    }
    sp->set_truncate_prompt_tokens(static_cast<int32_t>(truncate_prompt_tokens));
  }

  if (tls_client_cert.empty() != tls_client_key.empty()) {
    std::fprintf(stderr, "folio generate: give --tls-client-cert and --tls-client-key together\n");
    return 2;
  }
  tls = tls || !tls_ca.empty() || !tls_client_cert.empty() || !tls_server_name.empty();
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  grpc::ChannelArguments channel_args;
  if (tls) {
    grpc::SslCredentialsOptions ssl;  // empty roots: the system's
    if (!tls_ca.empty() && !ReadFile("--tls-ca", tls_ca, &ssl.pem_root_certs)) return 2;
    if (!tls_client_cert.empty() &&
        (!ReadFile("--tls-client-cert", tls_client_cert, &ssl.pem_cert_chain) ||
         !ReadFile("--tls-client-key", tls_client_key, &ssl.pem_private_key))) {
      return 2;
    }
    credentials = grpc::SslCredentials(ssl);
    if (!tls_server_name.empty()) channel_args.SetSslTargetNameOverride(tls_server_name);
  }
  auto channel = grpc::CreateCustomChannel(address, credentials, channel_args);
  auto stub = v1::Generation::NewStub(channel);
  // Without --json: stream sequence 0 live; others (n > 1) print at the end.
  std::vector<std::string> texts;
  v1::Finished finished;
  google::protobuf::util::JsonPrintOptions json_options;
  json_options.preserve_proto_field_names = true;
  bool received = false;
  auto call = [&]() -> grpc::Status {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
    if (!api_key.empty()) ctx.AddMetadata("authorization", "Bearer " + api_key);
    auto reader = stub->Generate(&ctx, request);
    v1::GenerateResponse response;
    while (reader->Read(&response)) {
      received = true;
      if (json) {
        if (response.has_finished()) finished = response.finished();
        std::string line;
        (void)google::protobuf::util::MessageToJsonString(response, &line, json_options);
        std::printf("%s\n", line.c_str());
        std::fflush(stdout);
        continue;
      }
      if (response.has_finished()) {
        finished = response.finished();
        continue;
      }
      // Without --json, the prompt's scores go to stderr, one token a line.
      for (const v1::TokenLogprob& t : response.chunk().prompt_logprobs()) {
        std::fprintf(stderr, "[prompt token %d: logprob %.6g]\n", t.token_id(), t.logprob());
      }
      for (const v1::SequenceDelta& d : response.chunk().deltas()) {
        if (texts.size() <= d.index()) texts.resize(d.index() + 1);
        texts[d.index()] += d.text();
        if (n <= 1 && d.index() == 0 && beam_width <= 1) {
          std::fputs(d.text().c_str(), stdout);
          std::fflush(stdout);
        }
      }
    }
    return reader->Finish();
  };
  // --wait-s bounds both waits: for the server to listen, then for it to
  // finish loading its model (it answers UNAVAILABLE until then).
  const auto give_up = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(wait_s * 1000));
  if (wait_s > 0) {
    (void)channel->WaitForConnected(std::chrono::system_clock::now() +
                                    std::chrono::milliseconds(static_cast<int64_t>(wait_s * 1000)));
  }
  grpc::Status status = call();
  while (!status.ok() && !received && status.error_code() == grpc::StatusCode::UNAVAILABLE &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    status = call();
  }
  if (!status.ok()) {
    if (!json && n <= 1) std::fputs("\n", stdout);
    if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
      std::fprintf(stderr, "folio generate: not authenticated: %s (%s)\n",
                   status.error_message().c_str(),
                   api_key.empty() ? "the server wants an API key: pass --api-key or set FOLIO_API_KEY"
                                   : "check --api-key / FOLIO_API_KEY");
      return 1;
    }
    const bool down = status.error_code() == grpc::StatusCode::UNAVAILABLE;
    const std::string hint =
        !down ? ""
        : tls ? absl::StrCat(" (is a cluster serving TLS at ", address,
                             "? check --tls-ca, --tls-server-name and, for mutual TLS, "
                             "--tls-client-cert)")
              : absl::StrCat(" (is a cluster serving at ", address,
                             "? if it speaks TLS, pass --tls-ca FILE or --tls)");
    std::fprintf(stderr, "folio generate: %s%s\n", status.error_message().c_str(), hint.c_str());
    return 1;
  }
  // A failed sequence fails the command, as a refused request does.
  const int exit_code = std::any_of(finished.sequences().begin(), finished.sequences().end(),
                                    [](const v1::SequenceFinish& f) {
                                      return f.reason() == v1::FINISH_REASON_ERROR;
                                    })
                            ? 1
                            : 0;
  if (json) return exit_code;
  if (n > 1 || beam_width > 1) {
    for (size_t i = 0; i < texts.size(); ++i) std::printf("[%zu] %s\n", i, texts[i].c_str());
  } else {
    std::fputs("\n", stdout);
  }
  std::vector<std::string> reasons;
  for (const v1::SequenceFinish& f : finished.sequences()) {
    reasons.push_back(ReasonName(f.reason()));
    if (f.reason() == v1::FINISH_REASON_ERROR) {
      std::fprintf(stderr, "folio generate: sequence %u failed: %s\n", f.index(), f.error_message().c_str());
    }
  }
  std::fprintf(stderr, "[finish: %s; prompt %u tokens (%u cached), completion %u tokens]\n",
               absl::StrJoin(reasons, ",").c_str(), finished.usage().prompt_tokens(),
               finished.usage().cached_prompt_tokens(), finished.usage().completion_tokens());
  return exit_code;
}

}  // namespace folio
