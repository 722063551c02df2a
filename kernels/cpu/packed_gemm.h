// The CPU linear layers' GEMM over weights laid out once, at load, in the
// form the kernel reads: out[m][r] = sum_k x[m][k] * W[r][k] (nn.Linear).
//
// Why our own kernel and not OpenBLAS or oneDNN (docs/performance.md has the
// figures): OpenBLAS's sgemm packs the weight operand again on every call,
// which at decode batch sizes (1-32 rows) costs more than the product itself,
// and neither it nor Debian's oneDNN 2.6 reads bf16 or int8 weights on an
// AVX2 machine without widening the whole matrix first. Here a decode step
// streams each weight byte from memory exactly once, in its stored width,
// and widens it in registers; accumulation is fp32.
//
// Layout: panels of kPanelRows = 16 output rows. Panel p holds, for every k
// in [0, cols), the 16 values W[16p + j][k] (j = 0..15) next to each other,
// the last panel zero-padded past `rows`. So the kernel reads each panel
// front to back and one AVX2 register pair (one AVX-512 register) holds 16
// outputs' weights at one k. bf16 panels store each 16 in the order that two 16-bit unpacks widen
// into columns 0-7 and 8-15; int8 panels keep one fp32 scale per output row
// (symmetric, scale = max|W[r]| / 127), applied to the finished sums.
//
// Thread-safety: a PackedMatrix is immutable after Pack; PackedGemm may run
// concurrently on the same matrix.
#ifndef FOLIO_KERNELS_CPU_PACKED_GEMM_H_
#define FOLIO_KERNELS_CPU_PACKED_GEMM_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace folio::kernels::cpu {

enum class WeightType { kFloat32, kBFloat16, kInt8 };

std::string_view WeightTypeName(WeightType type);  // "float32", "bfloat16", "int8"
int32_t WeightTypeBytes(WeightType type);          // 4, 2, 1

class PackedMatrix {
 public:
  static constexpr int32_t kPanelRows = 16;

  PackedMatrix() = default;
  PackedMatrix(PackedMatrix&&) = default;
  PackedMatrix& operator=(PackedMatrix&&) = default;
  PackedMatrix(const PackedMatrix&) = delete;
  PackedMatrix& operator=(const PackedMatrix&) = delete;

  // Lays out w [rows][cols] (row-major fp32) as `type`: bf16 rounds to
  // nearest even (exact for a bf16 checkpoint read as fp32), int8 quantizes
  // each row symmetrically. REQUIRES: rows > 0, cols > 0.
  static PackedMatrix Pack(const float* w, int32_t rows, int32_t cols, WeightType type);

  int32_t rows() const { return rows_; }
  int32_t cols() const { return cols_; }
  WeightType type() const { return type_; }
  bool empty() const { return rows_ == 0; }
  int32_t num_panels() const { return (rows_ + kPanelRows - 1) / kPanelRows; }
  // Bytes of the stored weights and scales (what a decode step reads).
  int64_t bytes() const;

  // Row r as fp32, dequantized (the embedding lookup of a tied LM head).
  // REQUIRES: 0 <= r < rows(); out holds cols() floats.
  void Row(int32_t r, float* out) const;

  // The first byte of panel p; panels are panel_bytes() apart.
  const uint8_t* panel(int32_t p) const { return data_.get() + int64_t{p} * panel_bytes(); }
  int64_t panel_bytes() const { return int64_t{cols_} * kPanelRows * WeightTypeBytes(type_); }
  // int8 only: [num_panels() * kPanelRows] per-row scales (0 past rows()).
  const float* scales() const { return scales_.data(); }

 private:
  struct FreeAligned {
    void operator()(uint8_t* p) const;
  };
  int32_t rows_ = 0, cols_ = 0;
  WeightType type_ = WeightType::kFloat32;
  std::unique_ptr<uint8_t[], FreeAligned> data_;  // 64-byte aligned panels
  std::vector<float> scales_;
};

// out[m][r] = sum_k x[m][k] * W[r][k] for m < n, r < w.rows(), on the kernel
// threads (kernels/cpu/threads.h). x: [n][w.cols()], out: [n][w.rows()],
// both row-major and dense; they must not overlap. n may be 0.
void PackedGemm(const float* x, int32_t n, const PackedMatrix& w, float* out);

// Which instruction set PackedGemm runs on this machine: "avx512", "avx2"
// (with FMA) or "portable" (any CPU; the same sums up to rounding).
std::string_view PackedGemmIsa();
// Every instruction set this machine can run, "portable" first.
std::vector<std::string> PackedGemmIsas();

// Tests: cap the instruction set ("portable", "avx2"; anything else: the
// best available) for calls from now on.
void SetPackedGemmIsaForTesting(std::string_view isa);

}  // namespace folio::kernels::cpu

#endif  // FOLIO_KERNELS_CPU_PACKED_GEMM_H_
