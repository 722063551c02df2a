#ifndef FOLIO_CLIENT_BENCH_GRPC_BACKEND_H_
#define FOLIO_CLIENT_BENCH_GRPC_BACKEND_H_

#include <memory>

#include "client/bench/backend.h"

namespace folio::bench {

// folio.v1.Generation over one shared (insecure) channel; each Send is a
// blocking Generate stream on the calling thread.
std::unique_ptr<Backend> NewGrpcBackend(const BackendOptions& options);

}  // namespace folio::bench

#endif  // FOLIO_CLIENT_BENCH_GRPC_BACKEND_H_
