// The host-side parts of the CUDA paged attention (kernels/cuda/attention.cuh)
// that need no GPU: the decode's automatic context split, its workspace
// bound, and the cache-layer checks. Runs in every build with CUDA; the
// kernels themselves are checked on a GPU by tests/gpu/attention_gpu_check.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "kernels/cache_layout.h"
#include "kernels/cuda/attention.cuh"

namespace folio::kernels::gpu {
namespace {

constexpr int32_t kSms = 132;  // an H100 / H200
constexpr int64_t kQuantum = kGpuMinAutoPartitionTokens;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

TEST(DecodePartitionTest, ExplicitRequestsAreKept) {
  EXPECT_EQ(ChooseDecodePartition(2, 32, 8, 4096, -1, kSms, CacheDtype::kBFloat16,
                                  GpuDecodeKernel::kAuto),
            -1);
  EXPECT_EQ(ChooseDecodePartition(2, 32, 8, 4096, 48, kSms, CacheDtype::kBFloat16,
                                  GpuDecodeKernel::kAuto),
            48);
}

TEST(DecodePartitionTest, NoSplitForShortContextsOrAFullGpu) {
  for (GpuDecodeKernel kernel : {GpuDecodeKernel::kSimt, GpuDecodeKernel::kTensorCores}) {
    // Under two slices' worth of context.
    EXPECT_EQ(
        ChooseDecodePartition(2, 32, 8, 2 * kQuantum - 1, 0, kSms, CacheDtype::kBFloat16, kernel),
        -1);
    // 64 sequences x 8 KV heads: 512 CTAs, ~4 per SM already.
    EXPECT_EQ(ChooseDecodePartition(64, 32, 8, 4096, 0, kSms, CacheDtype::kBFloat16, kernel), -1);
  }
}

// 40 sequences, 4 KV heads with 16 query heads each. The tensor-core kernel
// serves a whole group per CTA (160 CTAs, 1.2 per SM: split); the CUDA-core
// kernel serves 8 heads per CTA (320 CTAs, 2.4 per SM: no split).
TEST(DecodePartitionTest, CountsTheCtasOfTheKernelThatRuns) {
  const int32_t seqs = 40, heads = 64, kv_heads = 4, ctx = 4096;
  const int32_t on_tensor_cores = ChooseDecodePartition(
      seqs, heads, kv_heads, ctx, 0, kSms, CacheDtype::kBFloat16, GpuDecodeKernel::kAuto);
  // About 4 CTAs per SM: ceil(528 / 160) = 4 parts of 1024 positions.
  EXPECT_EQ(on_tensor_cores, 1024);
  EXPECT_EQ(ChooseDecodePartition(seqs, heads, kv_heads, ctx, 0, kSms, CacheDtype::kBFloat16,
                                  GpuDecodeKernel::kTensorCores),
            1024);
  EXPECT_EQ(ChooseDecodePartition(seqs, heads, kv_heads, ctx, 0, kSms, CacheDtype::kBFloat16,
                                  GpuDecodeKernel::kSimt),
            -1);
  // fp32 caches always decode on CUDA cores.
  EXPECT_EQ(ChooseDecodePartition(seqs, heads, kv_heads, ctx, 0, kSms, CacheDtype::kFloat32,
                                  GpuDecodeKernel::kAuto),
            -1);
  // MHA decodes on CUDA cores under kAuto, one row per CTA.
  EXPECT_EQ(
      ChooseDecodePartition(1, 8, 8, ctx, 0, kSms, CacheDtype::kFloat16, GpuDecodeKernel::kAuto),
      ChooseDecodePartition(1, 8, 8, ctx, 0, kSms, CacheDtype::kFloat16, GpuDecodeKernel::kSimt));
}

// Every automatic slice is a multiple of the quantum, gives at least two
// parts, and needs no more workspace than the auto bound the caller sized.
TEST(DecodePartitionTest, AutomaticSlicesFitTheAutoWorkspace) {
  struct Heads {
    int32_t q, kv;
  };
  int splits = 0;
  for (Heads h : {Heads{32, 32}, Heads{32, 8}, Heads{28, 4}, Heads{64, 4}, Heads{48, 2}}) {
    for (CacheDtype dtype : {CacheDtype::kFloat32, CacheDtype::kBFloat16}) {
      for (GpuDecodeKernel kernel : {GpuDecodeKernel::kAuto, GpuDecodeKernel::kSimt}) {
        for (int32_t seqs : {1, 2, 5, 16, 100}) {
          for (int32_t ctx : {511, 512, 1000, 4096, 100000}) {
            for (int32_t sms : {1, 108, 132}) {
              const int32_t slice =
                  ChooseDecodePartition(seqs, h.q, h.kv, ctx, 0, sms, dtype, kernel);
              if (slice == -1) continue;
              ++splits;
              SCOPED_TRACE("heads " + std::to_string(h.q) + "/" + std::to_string(h.kv) + " seqs " +
                           std::to_string(seqs) + " ctx " + std::to_string(ctx) + " sms " +
                           std::to_string(sms));
              EXPECT_EQ(slice % kQuantum, 0);
              EXPECT_GE(CeilDiv(ctx, slice), 2);
              for (int32_t hd : {64, 128, 256}) {
                const size_t bound = PagedAttentionDecodeWorkspaceBytes(seqs, h.q, hd, ctx, 0);
                const size_t exact = PagedAttentionDecodeWorkspaceBytes(seqs, h.q, hd, ctx, slice);
                EXPECT_GT(exact, 0u);
                EXPECT_LE(exact, bound);
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(splits, 0);  // the sweep reached the split at all
}

TEST(DecodePartitionTest, WorkspaceIsZeroWithoutParts) {
  EXPECT_EQ(PagedAttentionDecodeWorkspaceBytes(4, 32, 128, 2 * kQuantum - 1, 0), 0u);
  EXPECT_EQ(PagedAttentionDecodeWorkspaceBytes(4, 32, 128, 300, 512), 0u);
  // 3 parts x 4 sequences x 32 heads x (128 accumulators + max + sum) floats.
  EXPECT_EQ(PagedAttentionDecodeWorkspaceBytes(4, 32, 128, 1100, 512),
            size_t{3} * 4 * 32 * 130 * sizeof(float));
}

TEST(GpuPagedKvLayerTest, ChecksNameTheProblem) {
  alignas(16) static unsigned char storage[64];
  GpuPagedKvLayer kv{storage, storage, CacheDtype::kBFloat16, 4, 2, 16, 128};
  std::string error;
  EXPECT_TRUE(ValidateGpuPagedKvLayer(kv, &error)) << error;

  GpuPagedKvLayer bad = kv;
  bad.head_dim = 96;
  EXPECT_FALSE(ValidateGpuPagedKvLayer(bad, &error));
  EXPECT_NE(error.find("head_dim 96"), std::string::npos) << error;

  bad = kv;
  bad.block_size = 64;
  EXPECT_FALSE(ValidateGpuPagedKvLayer(bad, &error));
  EXPECT_NE(error.find("block_size 64"), std::string::npos) << error;

  bad = kv;
  bad.k = storage + 8;
  EXPECT_FALSE(ValidateGpuPagedKvLayer(bad, &error));
  EXPECT_NE(error.find("aligned"), std::string::npos) << error;

  bad = kv;
  bad.num_kv_heads = 0;
  EXPECT_FALSE(ValidateGpuPagedKvLayer(bad, &error));
  EXPECT_NE(error.find("num_kv_heads"), std::string::npos) << error;
}

// Under a window the decode reads at most W + block_size - 1 positions (from
// the block holding the first visible one); without one, the whole context.
TEST(CudaAttentionHostTest, DecodeReadLengthIsTheWindowPlusPartOfABlock) {
  EXPECT_EQ(DecodeReadLength(1000, 0, 16), 1000);
  EXPECT_EQ(DecodeReadLength(1000, 7, 16), 22);
  EXPECT_EQ(DecodeReadLength(10, 7, 16), 10);
  EXPECT_EQ(DecodeReadLength(5000, 4096, 32), 4127);
  EXPECT_EQ(DecodeReadLength(1 << 20, INT32_MAX, 32), 1 << 20);  // no overflow
}

}  // namespace
}  // namespace folio::kernels::gpu
