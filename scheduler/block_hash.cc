#include "scheduler/block_hash.h"

#include <openssl/evp.h>

#include "common/check.h"

namespace folio {
namespace {

// One reusable digest context per thread: EVP_MD_CTX_new per block would
// dominate the cost of hashing 16 tokens.
struct DigestContext {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ~DigestContext() { EVP_MD_CTX_free(ctx); }
};

}  // namespace

BlockHash HashBlockTokens(const BlockHash* parent, std::span<const TokenId> tokens,
                          std::string_view salt) {
  // An explicitly fetched digest: passing EVP_sha256() makes OpenSSL 3 look
  // the implementation up again on every init, which triples the cost.
  static EVP_MD* const kSha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  FOLIO_CHECK(kSha256 != nullptr);
  thread_local DigestContext digest;
  FOLIO_CHECK(EVP_DigestInit_ex2(digest.ctx, kSha256, nullptr) == 1);
  // A one-byte tag tells "no parent" apart from an all-zero parent digest.
  const uint8_t has_parent = parent != nullptr;
  FOLIO_CHECK(EVP_DigestUpdate(digest.ctx, &has_parent, 1) == 1);
  if (parent != nullptr) {
    FOLIO_CHECK(EVP_DigestUpdate(digest.ctx, parent->bytes.data(), parent->bytes.size()) == 1);
  }
  const uint64_t salt_size = salt.size();
  FOLIO_CHECK(EVP_DigestUpdate(digest.ctx, &salt_size, sizeof(salt_size)) == 1);
  FOLIO_CHECK(EVP_DigestUpdate(digest.ctx, salt.data(), salt.size()) == 1);
  FOLIO_CHECK(EVP_DigestUpdate(digest.ctx, tokens.data(), tokens.size_bytes()) == 1);
  BlockHash out;
  unsigned int len = 0;
  FOLIO_CHECK(EVP_DigestFinal_ex(digest.ctx, out.bytes.data(), &len) == 1);
  FOLIO_CHECK_EQ(len, out.bytes.size());
  return out;
}

}  // namespace folio
