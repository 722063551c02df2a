// Scaffolding shared by the GPU checks in tests/gpu/: the "no CUDA device ->
// exit 77" prologue, CUDA error checks, PASS/FAIL lines and the summary,
// fp16/bf16 conversions, random fills and a device array. std + CUDA
// runtime only (no GTest, no abseil): the checks build in the kernels-only
// mode on GPU machines without our Debian packages.
//
// Thread-safety: none. The pass/fail counts are plain globals: report from
// one thread (nccl_group_gpu_check's rank threads only collect failures and
// the main thread reports after joining them).
//
// Exit codes: kExitPass 0, kExitFail 1, kExitSkip 77 (ctest: skipped).
#ifndef FOLIO_TESTS_GPU_GPU_CHECK_UTIL_H_
#define FOLIO_TESTS_GPU_GPU_CHECK_UTIL_H_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace folio::gpu_check {

inline constexpr int kExitPass = 0;
inline constexpr int kExitFail = 1;
inline constexpr int kExitSkip = 77;

// ---------------------------------------------------------------- devices

// The number of visible CUDA devices, or 0 after printing why there is none:
// `skip_line` when given, else "SKIPPED: no CUDA device (<reason>)".
// Callers return kExitSkip on 0.
inline int DeviceCountOrSkip(const char* skip_line = nullptr) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err == cudaSuccess && count > 0) return count;
  if (skip_line != nullptr) {
    std::printf("%s\n", skip_line);
  } else {
    std::printf("SKIPPED: no CUDA device (%s)\n",
                err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
  }
  return 0;
}

// Prints "device <d>: <name> (sm_XY)", with ", <n> SMs" when `with_sms`,
// and returns the properties; prints nothing (and returns zeroed
// properties) when they cannot be read.
inline cudaDeviceProp PrintDevice(int device, bool with_sms = false) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) return cudaDeviceProp{};
  if (with_sms) {
    std::printf("device %d: %s (sm_%d%d, %d SMs)\n", device, prop.name, prop.major, prop.minor,
                prop.multiProcessorCount);
  } else {
    std::printf("device %d: %s (sm_%d%d)\n", device, prop.name, prop.major, prop.minor);
  }
  return prop;
}

// ---------------------------------------------------------------- results

// Cases passed and failed so far in this process.
inline int g_passed = 0;
inline int g_failed = 0;

// "PASS|FAIL <name> <detail>" (the space is printed even for an empty detail).
inline void Report(const std::string& name, bool ok, const std::string& detail) {
  std::printf("%s %s %s\n", ok ? "PASS" : "FAIL", name.c_str(), detail.c_str());
  ++(ok ? g_passed : g_failed);
}

// "PASS|FAIL <name> max_err=<%g>[ <detail>]".
inline void ReportMaxErr(const std::string& name, bool ok, double max_err,
                         const std::string& detail = "") {
  std::printf("%s %s max_err=%g%s%s\n", ok ? "PASS" : "FAIL", name.c_str(), max_err,
              detail.empty() ? "" : " ", detail.c_str());
  ++(ok ? g_passed : g_failed);
}

// "PASS <name>" when `failure` is empty, else "FAIL <name>: <failure>";
// flushed, so that a later hang or crash leaves the line behind.
inline void ReportFailure(const std::string& name, const std::string& failure) {
  if (failure.empty()) {
    std::printf("PASS %s\n", name.c_str());
    ++g_passed;
  } else {
    std::printf("FAIL %s: %s\n", name.c_str(), failure.c_str());
    ++g_failed;
  }
  std::fflush(stdout);
}

// kExitPass when no case failed, else kExitFail.
inline int ExitCode() { return g_failed == 0 ? kExitPass : kExitFail; }

// Prints "<check>: <p> passed, <f> failed<suffix>" and returns ExitCode().
inline int Summary(const char* check, const std::string& suffix = "") {
  std::printf("%s: %d passed, %d failed%s\n", check, g_passed, g_failed, suffix.c_str());
  return ExitCode();
}

// ------------------------------------------------------------ CUDA errors

// True on cudaSuccess; else prints "FAIL <name>: <expr> -> <error>" and
// counts a failed case.
inline bool CudaOk(cudaError_t err, const char* expr, const std::string& name) {
  if (err == cudaSuccess) return true;
  std::printf("FAIL %s: %s -> %s\n", name.c_str(), expr, cudaGetErrorString(err));
  ++g_failed;
  return false;
}

// True on cudaSuccess; else prints "CUDA error: <expr> -> <error>" (for
// code outside a named case, such as the benchmarks).
inline bool CudaOk(cudaError_t err, const char* expr) {
  if (err == cudaSuccess) return true;
  std::printf("CUDA error: %s -> %s\n", expr, cudaGetErrorString(err));
  return false;
}

}  // namespace folio::gpu_check

// In a void function with `name` (the case's std::string) in scope: on a
// CUDA error, reports the case failed and returns.
#define CHECK_CUDA(expr)                                                       \
  do {                                                                         \
    if (!::folio::gpu_check::CudaOk((expr), #expr, name)) return;              \
  } while (0)

// In a function returning bool: on a CUDA error, prints it and returns false.
#define CHECK_CUDA_OR_FALSE(expr)                                              \
  do {                                                                         \
    if (!::folio::gpu_check::CudaOk((expr), #expr)) return false;              \
  } while (0)

namespace folio::gpu_check {

// ------------------------------------------------------ 16-bit conversions

// Widening to float and round-to-nearest narrowing, for T in float, __half
// and __nv_bfloat16.
template <typename T>
float ToFloat(T x);
template <>
inline float ToFloat<float>(float x) { return x; }
template <>
inline float ToFloat<__half>(__half x) { return __half2float(x); }
template <>
inline float ToFloat<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
T FromFloat(float x);
template <>
inline float FromFloat<float>(float x) { return x; }
template <>
inline __half FromFloat<__half>(float x) { return __float2half_rn(x); }
template <>
inline __nv_bfloat16 FromFloat<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

// ------------------------------------------------------------ random fills

// `n` normal floats (a fresh distribution per call: the draws depend only on
// the engine's state).
inline std::vector<float> RandomNormal(size_t n, float mean, float sd, std::mt19937& rng) {
  std::normal_distribution<float> normal(mean, sd);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

// Overwrites `v` with uniform floats in [lo, hi).
inline void FillUniform(std::vector<float>& v, float lo, float hi, std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(lo, hi);
  for (float& x : v) x = uniform(rng);
}

// Uniform floats in [-1, 1) from a 64-bit LCG, for fills of tens of millions
// of elements, where mt19937 + uniform_real_distribution would dominate.
struct FastUniform {
  uint64_t state;
  float operator()() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>(state >> 40) * 0x1p-23f - 1.0f;
  }
};

// ------------------------------------------------------------ device array

// cudaMalloc'ed array of `size` Ts, freed on scope exit, with `pad` leading
// elements so that data() can be deliberately misaligned. One spare element
// is allocated, so that even an empty array has a non-null, valid address.
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  ~DeviceArray() {
    if (base_ != nullptr) cudaFree(base_);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  // REQUIRES: not allocated yet.
  cudaError_t Alloc(size_t n, size_t leading = 0) {
    pad_ = leading;
    size_ = n;
    return cudaMalloc(&base_, (n + leading + 1) * sizeof(T));
  }
  // Alloc(host.size()) and a copy of `host` into it.
  cudaError_t AllocAndUpload(const std::vector<T>& host) {
    const cudaError_t err = Alloc(host.size());
    if (err != cudaSuccess) return err;
    return Upload(host);
  }
  // Copies `host` to the start of data(). REQUIRES: host.size() <= size().
  cudaError_t Upload(const std::vector<T>& host) {
    if (host.empty()) return cudaSuccess;
    return cudaMemcpy(data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  // Resizes `host` to size() and copies the array into it.
  cudaError_t Download(std::vector<T>* host) const {
    host->resize(size_);
    if (size_ == 0) return cudaSuccess;
    return cudaMemcpy(host->data(), data(), size_ * sizeof(T), cudaMemcpyDeviceToHost);
  }

  T* data() const { return base_ + pad_; }
  size_t size() const { return size_; }
  size_t bytes() const { return size_ * sizeof(T); }

 private:
  T* base_ = nullptr;
  size_t pad_ = 0;
  size_t size_ = 0;
};

}  // namespace folio::gpu_check

#endif  // FOLIO_TESTS_GPU_GPU_CHECK_UTIL_H_
