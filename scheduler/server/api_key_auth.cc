#include "scheduler/server/api_key_auth.h"

#include "scheduler/server/tls_credentials.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace folio {

bool ConstantTimeEquals(const std::string& a, const std::string& b) {
  // Volatile keeps the compiler from turning the loop into an early exit.
  volatile unsigned char diff = a.size() == b.size() ? 0 : 1;
  if (b.empty()) return a.empty();
  for (size_t i = 0; i < a.size(); ++i) {
    diff = diff | static_cast<unsigned char>(a[i] ^ b[i % b.size()]);
  }
  return diff == 0;
}

grpc::Status ApiKeyAuth::Check(const grpc::ServerContextBase& context) const {
  if (key_.empty()) return grpc::Status::OK;
  bool presented = false;
  bool match = false;
  const auto& metadata = context.client_metadata();
  auto [begin, end] = metadata.equal_range("authorization");
  for (auto it = begin; it != end; ++it) {
    const std::string value(it->second.data(), it->second.size());
    // RFC 6750: the scheme is case-insensitive.
    if (value.size() < 7 || !absl::EqualsIgnoreCase(value.substr(0, 7), "bearer ")) continue;
    presented = true;
    // Every Bearer value is compared (no early exit on the first match).
    match = ConstantTimeEquals(std::string(absl::StripAsciiWhitespace(value.substr(7))), key_) ||
            match;
  }
  if (!presented) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "missing authorization metadata (authorization: Bearer <api key>)");
  }
  if (!match) return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "invalid API key");
  return grpc::Status::OK;
}

absl::Status ApiKeyAuth::ValidateKey(const std::string& key, const std::string& flag) {
  if (key.empty()) return absl::InvalidArgumentError(absl::StrCat(flag, " is empty"));
  for (char c : key) {
    if (c <= 0x20 || c >= 0x7f) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " must be printable ASCII without spaces"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ApiKeyAuth::Load(const std::string& key, const std::string& key_file) {
  if (!key.empty() && !key_file.empty()) {
    return absl::InvalidArgumentError(
        "give --api-key (FOLIO_API_KEY) or --api-key-file, not both");
  }
  if (!key_file.empty()) {
    absl::StatusOr<std::string> text = ReadFlagFile("--api-key-file", key_file);
    if (!text.ok()) return text.status();
    std::string from_file(absl::StripAsciiWhitespace(*text));
    if (absl::Status s = ValidateKey(from_file, absl::StrCat("--api-key-file ", key_file));
        !s.ok()) {
      return s;
    }
    return from_file;
  }
  if (key.empty()) return std::string();
  if (absl::Status s = ValidateKey(key, "--api-key (FOLIO_API_KEY)"); !s.ok()) return s;
  return key;
}

}  // namespace folio
