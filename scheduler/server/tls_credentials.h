#ifndef FOLIO_SCHEDULER_SERVER_TLS_CREDENTIALS_H_
#define FOLIO_SCHEDULER_SERVER_TLS_CREDENTIALS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/server_credentials.h"

namespace folio {

// The TLS material of folio-scheduler's client port (PEM files).
struct TlsFiles {
  std::string cert;       // --tls-cert: certificate (chain), leaf first
  std::string key;        // --tls-key: its private key
  std::string client_ca;  // --tls-client-ca: when set, clients must present a
                          // certificate this CA signed (mutual TLS)

  bool enabled() const { return !cert.empty() || !key.empty(); }
};

// Credentials for the client port: plaintext when `files` names nothing,
// else grpc::SslServerCredentials. Every file is read and checked now (PEM
// that parses, a key that belongs to the certificate), so a mistake stops
// start-up with an error naming the flag instead of failing handshakes later.
// A client CA without a certificate and key is an error too.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& files);

// The contents of the regular file `path`, which `flag` named; errors name
// the flag and the file.
absl::StatusOr<std::string> ReadFlagFile(const std::string& flag, const std::string& path);

}  // namespace folio

#endif  // FOLIO_SCHEDULER_SERVER_TLS_CREDENTIALS_H_
