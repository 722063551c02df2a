#ifndef FOLIO_CLIENT_BENCH_OPENAI_BACKEND_H_
#define FOLIO_CLIENT_BENCH_OPENAI_BACKEND_H_

#include <memory>

#include "client/bench/backend.h"

namespace folio::bench {

// The OpenAI HTTP API (POST /v1/completions, stream: true, usage included)
// on Boost.Beast: one plain-HTTP connection per request on the calling
// thread. Output tokens come from the usage event; token times are the
// arrivals of the events that carry text.
std::unique_ptr<Backend> NewOpenAiBackend(const BackendOptions& options);

}  // namespace folio::bench

#endif  // FOLIO_CLIENT_BENCH_OPENAI_BACKEND_H_
