// GPU check: every CUDA cache op against its CPU twin on random shapes
// (ggml test-backend-ops style). Standalone: CUDA runtime + std + kernels libs.
// Prints one PASS/FAIL line per case with its max error, then a summary.
// Exit: 0 all passed, 1 any failure, 77 no CUDA device (ctest: skipped).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cache_layout.h"
#include "kernels/cpu/cache_ops.h"
#include "kernels/cuda/cache_ops.cuh"
#include "kernels/kv_cache_view.h"
#include "tests/gpu/gpu_check_util.h"

namespace folio::kernels {
namespace {

using gpu_check::DeviceArray;
using gpu_check::FillUniform;
using gpu_check::FromFloat;
using gpu_check::ReportMaxErr;
using gpu_check::ToFloat;

using Bytes = std::vector<uint8_t>;

// A pool as host vectors (the CPU twin's) plus a device or pinned-host copy.
struct Pool {
  int32_t layers;
  int64_t blocks, bytes;
  bool pinned;
  std::vector<Bytes> k, v;          // CPU twin's memory
  std::vector<void*> dk, dv;        // device (or pinned host) memory

  Pool(int32_t l, int64_t b, int64_t bpb, bool pinned_host, std::mt19937& rng)
      : layers(l), blocks(b), bytes(bpb), pinned(pinned_host), k(l), v(l), dk(l), dv(l) {
    std::uniform_int_distribution<int> byte(0, 255);
    for (int32_t i = 0; i < l; ++i) {
      for (Bytes* t : {&k[i], &v[i]}) {
        t->resize(b * bpb);
        for (uint8_t& x : *t) x = static_cast<uint8_t>(byte(rng));
      }
    }
  }
  ~Pool() {
    for (void* p : dk) Free(p);
    for (void* p : dv) Free(p);
  }
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  void Free(void* p) {
    if (p == nullptr) return;
    if (pinned) cudaFreeHost(p); else cudaFree(p);
  }
  // Allocates the GPU-side copy and uploads the twin's bytes into it.
  cudaError_t Upload() {
    for (int32_t i = 0; i < layers; ++i) {
      for (int kv = 0; kv < 2; ++kv) {
        void*& p = kv == 0 ? dk[i] : dv[i];
        const size_t n = blocks * bytes;
        cudaError_t err = pinned ? cudaMallocHost(&p, n) : cudaMalloc(&p, n);
        if (err != cudaSuccess) return err;
        err = cudaMemcpy(p, (kv == 0 ? k[i] : v[i]).data(), n, cudaMemcpyDefault);
        if (err != cudaSuccess) return err;
      }
    }
    return cudaSuccess;
  }
  static KvCacheView MakeView(int32_t layers, int64_t blocks, int64_t bytes,
                              const std::vector<void*>& ks, const std::vector<void*>& vs) {
    KvCacheView view;
    view.num_layers = layers;
    view.num_blocks = blocks;
    view.bytes_per_block = bytes;
    for (int32_t i = 0; i < layers; ++i) {
      view.k[i] = ks[i];
      view.v[i] = vs[i];
    }
    return view;
  }
  KvCacheView GpuView() const { return MakeView(layers, blocks, bytes, dk, dv); }
  KvCacheView TwinView() {
    std::vector<void*> ks, vs;
    for (int32_t i = 0; i < layers; ++i) {
      ks.push_back(k[i].data());
      vs.push_back(v[i].data());
    }
    return MakeView(layers, blocks, bytes, ks, vs);
  }
  // Number of bytes where the GPU-side copy differs from the twin.
  cudaError_t CountMismatches(int64_t* mismatches) const {
    *mismatches = 0;
    Bytes got(blocks * bytes);
    for (int32_t i = 0; i < layers; ++i) {
      for (int kv = 0; kv < 2; ++kv) {
        cudaError_t err = cudaMemcpy(got.data(), kv == 0 ? dk[i] : dv[i], got.size(),
                                     cudaMemcpyDefault);
        if (err != cudaSuccess) return err;
        const Bytes& want = kv == 0 ? k[i] : v[i];
        for (size_t j = 0; j < got.size(); ++j) *mismatches += got[j] != want[j];
      }
    }
    return cudaSuccess;
  }
};

std::vector<int64_t> DistinctBlocks(int64_t n, int64_t num_blocks, std::mt19937& rng) {
  std::vector<int64_t> ids(num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  ids.resize(n);
  return ids;
}

void CheckCopyBlocks(int32_t layers, int64_t blocks, int64_t bytes, std::mt19937& rng) {
  const std::string name = "copy_blocks layers=" + std::to_string(layers) +
                           " blocks=" + std::to_string(blocks) + " bytes=" + std::to_string(bytes);
  Pool pool(layers, blocks, bytes, /*pinned_host=*/false, rng);
  CHECK_CUDA(pool.Upload());
  // 4 shared srcs forked into many dsts, as copy-on-write does.
  const std::vector<int64_t> ids = DistinctBlocks(blocks * 3 / 4, blocks, rng);
  std::vector<BlockPair> pairs;
  for (size_t i = 4; i < ids.size(); ++i) pairs.push_back({ids[i % 4], ids[i]});

  std::string error;
  if (!cpu::CopyBlocks(pool.TwinView(), pairs, &error)) {
    return ReportMaxErr(name, false, 0, "cpu twin: " + error);
  }
  {
    DeviceArray<BlockPair> d_pairs;
    CHECK_CUDA(d_pairs.AllocAndUpload(pairs));
    CHECK_CUDA(gpu::CopyBlocks(pool.GpuView(), d_pairs.data(), int64_t(pairs.size()), nullptr));
    CHECK_CUDA(cudaDeviceSynchronize());
  }
  int64_t mismatches = 0;
  CHECK_CUDA(pool.CountMismatches(&mismatches));
  ReportMaxErr(name, mismatches == 0, mismatches ? 255 : 0,
               "pairs=" + std::to_string(pairs.size()) +
                   " bad_bytes=" + std::to_string(mismatches));
}

// device -> pinned host -> device, each step against the CPU twin.
void CheckSwap(int32_t layers, int64_t bytes, std::mt19937& rng) {
  const std::string name = "swap_blocks layers=" + std::to_string(layers) +
                           " bytes=" + std::to_string(bytes);
  Pool device(layers, 48, bytes, /*pinned_host=*/false, rng);
  Pool host(layers, 32, bytes, /*pinned_host=*/true, rng);
  CHECK_CUDA(device.Upload());
  CHECK_CUDA(host.Upload());
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));

  // Runs of neighbours (merged into one memcpy) mixed with singles.
  const std::vector<int64_t> dev_ids = {3, 4, 5, 6, 20, 21, 0, 47, 11, 30, 31};
  const std::vector<int64_t> host_ids = {7, 8, 9, 10, 1, 2, 31, 0, 15, 16, 3};
  std::vector<BlockPair> out, in;
  for (size_t i = 0; i < dev_ids.size(); ++i) {
    out.push_back({dev_ids[i], host_ids[i]});
    // Swap in to different device blocks than the ones swapped out.
    in.push_back({host_ids[i], (dev_ids[i] + 1) % device.blocks});
  }
  std::string error;
  int64_t bad_out = 0, bad_in = 0;
  bool ok = cpu::SwapBlocks(device.TwinView(), host.TwinView(), out, &error);
  CHECK_CUDA(gpu::SwapBlocks(device.GpuView(), host.GpuView(), out, stream));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  CHECK_CUDA(host.CountMismatches(&bad_out));

  ok = ok && cpu::SwapBlocks(host.TwinView(), device.TwinView(), in, &error);
  CHECK_CUDA(gpu::SwapBlocks(host.GpuView(), device.GpuView(), in, stream));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  CHECK_CUDA(device.CountMismatches(&bad_in));
  CHECK_CUDA(cudaStreamDestroy(stream));
  ReportMaxErr(name, ok && bad_out == 0 && bad_in == 0, (bad_out || bad_in) ? 255 : 0,
               "bad_bytes_out=" + std::to_string(bad_out) +
                   " bad_bytes_in=" + std::to_string(bad_in) + (ok ? "" : " cpu twin: " + error));
}

// Storage T against the fp32 CPU twin. Inputs lie in [-1, 1], so rounding
// to T is off by at most half an ulp of 1: 0 for fp32, 2^-12 fp16, 2^-9 bf16.
template <typename T>
void CheckReshape(CacheDtype dtype, const char* dtype_name, const CacheShape& shape,
                  double tolerance, std::mt19937& rng) {
  const std::string name = std::string("reshape_and_cache ") + dtype_name +
                           " heads=" + std::to_string(shape.num_kv_heads) +
                           " block_size=" + std::to_string(shape.block_size) +
                           " head_dim=" + std::to_string(shape.head_dim);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  const int64_t num_blocks = 7;
  const int64_t elems = num_blocks * BlockElems(shape);
  const int64_t num_tokens = 3 * shape.block_size + 3;
  const int64_t n = TokenElems(shape);

  // Cache starts as random values representable in T, identical in the twin.
  std::vector<T> k_init(elems), v_init(elems);
  std::vector<float> k_twin(elems), v_twin(elems);
  for (int64_t i = 0; i < elems; ++i) {
    k_init[i] = FromFloat<T>(uniform(rng));
    v_init[i] = FromFloat<T>(uniform(rng));
    k_twin[i] = ToFloat(k_init[i]);
    v_twin[i] = ToFloat(v_init[i]);
  }
  std::vector<float> key(num_tokens * n), value(num_tokens * n);
  FillUniform(key, -1.f, 1.f, rng);
  FillUniform(value, -1.f, 1.f, rng);
  std::vector<int64_t> slots = DistinctBlocks(num_tokens, num_blocks * shape.block_size, rng);
  for (int64_t t = 1; t < num_tokens; t += 5) slots[t] = kSkipSlot;

  std::string error;
  const KvLayerView twin{k_twin.data(), v_twin.data(), num_blocks,
                         BlockElems(shape) * int64_t{sizeof(float)}};
  if (!cpu::ReshapeAndCache(key.data(), value.data(), slots.data(), num_tokens, shape, twin,
                            &error)) {
    return ReportMaxErr(name, false, 0, "cpu twin: " + error);
  }

  std::vector<T> k_got, v_got;
  {
    DeviceArray<T> dk, dv;
    DeviceArray<float> dkey, dvalue;
    DeviceArray<int64_t> dslots;
    CHECK_CUDA(dk.AllocAndUpload(k_init));
    CHECK_CUDA(dv.AllocAndUpload(v_init));
    CHECK_CUDA(dkey.AllocAndUpload(key));
    CHECK_CUDA(dvalue.AllocAndUpload(value));
    CHECK_CUDA(dslots.AllocAndUpload(slots));
    const KvLayerView layer{dk.data(), dv.data(), num_blocks,
                            BlockElems(shape) * int64_t{sizeof(T)}};
    CHECK_CUDA(gpu::ReshapeAndCache(dkey.data(), dvalue.data(), dslots.data(), num_tokens, shape,
                                    dtype, layer, nullptr));
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(dk.Download(&k_got));
    CHECK_CUDA(dv.Download(&v_got));
  }

  // Written slots within rounding; every other element must be bit-identical.
  double max_err = 0;
  int64_t untouched_changed = 0;
  auto compare = [&](T got, T init, float want) {
    const double err = std::fabs(double(ToFloat(got)) - double(want));
    max_err = std::max(max_err, err);
    // A twin value equal to the initial one means "not written" (random
    // floats collide with negligible probability).
    if (want == ToFloat(init) && err != 0) ++untouched_changed;
  };
  for (int64_t i = 0; i < elems; ++i) {
    compare(k_got[i], k_init[i], k_twin[i]);
    compare(v_got[i], v_init[i], v_twin[i]);
  }
  ReportMaxErr(name, max_err <= tolerance && untouched_changed == 0, max_err,
               "tol=" + std::to_string(tolerance) +
                   " untouched_changed=" + std::to_string(untouched_changed));
}

void CheckInvalidArgs() {
  const std::string name = "invalid_args";
  KvCacheView empty;
  const BlockPair pair{0, 1};
  const CacheShape shape{1, 8, 4};
  const bool ok =
      gpu::CopyBlocks(empty, &pair, 1, nullptr) == cudaErrorInvalidValue &&
      gpu::SwapBlocks(empty, empty, {&pair, 1}, nullptr) == cudaErrorInvalidValue &&
      gpu::ReshapeAndCache(nullptr, nullptr, nullptr, 1, shape, CacheDtype::kFloat16,
                           KvLayerView{}, nullptr) == cudaErrorInvalidValue;
  ReportMaxErr(name, ok, 0);
}

int Run() {
  if (gpu_check::DeviceCountOrSkip() == 0) return gpu_check::kExitSkip;
  gpu_check::PrintDevice(0);
  std::mt19937 rng(20240601);

  CheckInvalidArgs();
  // 37 bytes: byte path; 52: 4-byte words; the rest: 16-byte words.
  CheckCopyBlocks(1, 16, 37, rng);
  CheckCopyBlocks(3, 32, 52, rng);
  CheckCopyBlocks(4, 64, 8 * 16 * 128 * 2, rng);
  CheckCopyBlocks(KvCacheView::kMaxLayers, 8, 256, rng);
  CheckSwap(1, 37, rng);
  CheckSwap(6, 2 * 16 * 64 * 2, rng);
  CheckSwap(2, 8 * 32 * 128 * 4, rng);

  std::uniform_int_distribution<int> pick(0, 3);
  const int32_t heads[] = {1, 2, 4, 8};
  for (int32_t block_size : {8, 16, 32}) {
    for (int32_t head_dim : {64, 80, 96, 128}) {
      const CacheShape shape{heads[pick(rng)], block_size, head_dim};
      CheckReshape<float>(CacheDtype::kFloat32, "fp32", shape, 0.0, rng);
      CheckReshape<__half>(CacheDtype::kFloat16, "fp16", shape, std::ldexp(1.0, -12), rng);
      CheckReshape<__nv_bfloat16>(CacheDtype::kBFloat16, "bf16", shape, std::ldexp(1.0, -9),
                                  rng);
    }
  }
  return gpu_check::Summary("cache_ops_gpu_check");
}

}  // namespace
}  // namespace folio::kernels

int main() { return folio::kernels::Run(); }
