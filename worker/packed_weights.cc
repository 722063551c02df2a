#include "worker/packed_weights.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace folio {
namespace {

using kernels::cpu::PackedMatrix;
using kernels::cpu::WeightType;

// Packs v [rows][cols] and releases its memory.
PackedMatrix PackAndFree(std::vector<float>& v, int32_t rows, WeightType type) {
  const int32_t cols = static_cast<int32_t>(v.size() / rows);
  PackedMatrix m = PackedMatrix::Pack(v.data(), rows, cols, type);
  std::vector<float>().swap(v);
  return m;
}

}  // namespace

int64_t PackedWeights::bytes() const {
  int64_t n = lm_head.bytes() + embed.bytes();
  for (const PackedLayerWeights& L : layers) {
    n += L.qkv.bytes() + L.o_proj.bytes() + L.gate_up.bytes() + L.down_proj.bytes();
  }
  return n;
}

PackedWeights PackedWeights::PackAndRelease(ModelWeights& w, WeightType type) {
  const ModelConfig& c = w.config;
  const ShardShape& s = w.shape;
  const int32_t hd = c.head_dim;
  PackedWeights p;
  p.type = type;
  p.tied = w.lm_head.empty();
  if (p.tied) {
    p.lm_head = PackAndFree(w.embed, s.vocab_count, type);
  } else {
    p.lm_head = PackAndFree(w.lm_head, s.vocab_count, type);
    // A lookup table, not a GEMM operand: int8 would only cost accuracy.
    p.embed = PackAndFree(w.embed, s.vocab_count,
                          type == WeightType::kInt8 ? WeightType::kFloat32 : type);
  }
  p.layers.resize(w.layers.size());
  for (size_t i = 0; i < w.layers.size(); ++i) {
    LayerWeights& L = w.layers[i];
    PackedLayerWeights& P = p.layers[i];
    P.qkv = PackAndFree(L.qkv, (s.num_heads + 2 * s.num_kv_heads) * hd, type);
    P.o_proj = PackAndFree(L.o_proj, c.hidden_size, type);
    P.gate_up = PackAndFree(L.gate_up, 2 * s.intermediate, type);
    P.down_proj = PackAndFree(L.down_proj, c.hidden_size, type);
  }
  return p;
}

WeightType CpuWeightType(std::optional<DType> dtype, DType checkpoint_dtype,
                         bool int8_quantization) {
  if (int8_quantization) return WeightType::kInt8;
  return dtype.value_or(checkpoint_dtype) == DType::kBF16 ? WeightType::kBFloat16
                                                          : WeightType::kFloat32;
}

absl::StatusOr<std::optional<DType>> ParseCpuDtype(const std::string& name) {
  if (name.empty() || name == "auto") return std::optional<DType>();
  if (name == "float32" || name == "float" || name == "f32") return std::optional<DType>(DType::kF32);
  if (name == "bfloat16" || name == "bf16") return std::optional<DType>(DType::kBF16);
  if (name == "float16" || name == "half" || name == "f16") {
    return absl::InvalidArgumentError(
        "--dtype float16: the CPU worker stores weights as float32 or bfloat16 (auto computes "
        "an fp16 checkpoint in float32)");
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--dtype '", name, "': expected auto, float32 or bfloat16"));
}

absl::Status CheckCpuQuantization(const std::string& name) {
  if (name.empty() || name == "int8") return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--quantization '", name, "': expected int8 (weight-only, per output channel)"));
}

}  // namespace folio
