// --kv-cache-dtype (common/kv_cache_dtype.h): vLLM's
// spellings map to the cache's storage type, anything else is refused naming
// the flag, and the names reports give back.

#include "common/kv_cache_dtype.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>

namespace folio {
namespace {

using kernels::CacheDtype;
using ::testing::HasSubstr;

TEST(KvCacheDtypeTest, AcceptedSpellingsMapToTheStorageType) {
  const std::pair<const char*, CacheDtype> cases[] = {
      {"", CacheDtype::kFloat32},     {"auto", CacheDtype::kFloat32},
      {"int8", CacheDtype::kInt8},    {"fp8", CacheDtype::kFp8E4m3},
      {"fp8_e4m3", CacheDtype::kFp8E4m3},
  };
  for (const auto& [name, want] : cases) {
    absl::StatusOr<CacheDtype> got = ParseCpuKvCacheDtype(name);
    ASSERT_TRUE(got.ok()) << "'" << name << "': " << got.status();
    EXPECT_EQ(*got, want) << name;
  }
}

TEST(KvCacheDtypeTest, AnythingElseIsInvalidArgumentNamingTheFlag) {
  // fp8_e5m2 is vLLM's too, but the CPU worker stores e4m3 only; bfloat16 and
  // float16 caches are the CUDA worker's.
  for (const char* name : {"fp8_e5m2", "bfloat16", "float16", "float32", "INT8", "int4", " "}) {
    absl::StatusOr<CacheDtype> got = ParseCpuKvCacheDtype(name);
    ASSERT_FALSE(got.ok()) << name;
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(got.status().message()),
                HasSubstr("--kv-cache-dtype '" + std::string(name) +
                          "': expected auto, fp8 (fp8_e4m3) or int8"));
  }
}

TEST(KvCacheDtypeTest, Names) {
  EXPECT_STREQ(kernels::CacheDtypeName(CacheDtype::kFloat32), "float32");
  EXPECT_STREQ(kernels::CacheDtypeName(CacheDtype::kFloat16), "float16");
  EXPECT_STREQ(kernels::CacheDtypeName(CacheDtype::kBFloat16), "bfloat16");
  EXPECT_STREQ(kernels::CacheDtypeName(CacheDtype::kInt8), "int8");
  EXPECT_STREQ(kernels::CacheDtypeName(CacheDtype::kFp8E4m3), "fp8_e4m3");
  // A name parses back to its type.
  for (CacheDtype t : {CacheDtype::kInt8, CacheDtype::kFp8E4m3}) {
    EXPECT_EQ(*ParseCpuKvCacheDtype(kernels::CacheDtypeName(t)), t);
  }
}

}  // namespace
}  // namespace folio
