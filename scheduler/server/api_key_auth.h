#ifndef FOLIO_SCHEDULER_SERVER_API_KEY_AUTH_H_
#define FOLIO_SCHEDULER_SERVER_API_KEY_AUTH_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"

namespace folio {

// The API key of folio.v1.Generation: with a key set, every Generation call
// must carry the metadata `authorization: Bearer <key>`; without one, every
// call is let through. Only GenerationService asks (Check() at the top of
// each handler), so grpc.health.v1, reflection and the internal Worker and
// Rendezvous services stay open — Kubernetes' gRPC probes send no metadata.
//
// Why a check in the handlers rather than gRPC machinery: an
// AuthMetadataProcessor only runs on secure credentials (not on a plaintext
// port) and for every service alike, health included; gRPC 1.51's
// experimental server interceptors cannot end a call with a status of their
// own. Four handlers calling one function is the simplest thing that holds.
//
// Immutable after construction; thread-safe.
class ApiKeyAuth {
 public:
  // No key: every call passes.
  ApiKeyAuth() = default;
  // REQUIRES: ValidateKey(key).ok().
  explicit ApiKeyAuth(std::string key) : key_(std::move(key)) {}

  bool enabled() const { return !key_.empty(); }

  // OK, or UNAUTHENTICATED: "missing authorization metadata (authorization:
  // Bearer <api key>)" when the call has no Bearer credential, "invalid API
  // key" when none it has matches. The key is compared in constant time
  // (its length included: time depends only on what the client sent).
  grpc::Status Check(const grpc::ServerContextBase& context) const;

  // A key must be non-empty printable ASCII without spaces (a metadata value
  // after "Bearer "). `flag` names where it came from in the error.
  static absl::Status ValidateKey(const std::string& key, const std::string& flag);

  // The key from --api-key / --api-key-file (at most one of them; surrounding
  // whitespace of the file is dropped). Empty: no key.
  static absl::StatusOr<std::string> Load(const std::string& key, const std::string& key_file);

 private:
  std::string key_;
};

// a == b in time that depends only on a.size(): every byte of `a` is
// compared, and a length difference is folded into the result.
bool ConstantTimeEquals(const std::string& a, const std::string& b);

}  // namespace folio

#endif  // FOLIO_SCHEDULER_SERVER_API_KEY_AUTH_H_
