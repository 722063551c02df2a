#ifndef FOLIO_WORKER_PACKED_WEIGHTS_H_
#define FOLIO_WORKER_PACKED_WEIGHTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/dtype.h"
#include "kernels/cpu/packed_gemm.h"
#include "worker/model_weights.h"

namespace folio {

// What the CPU runner keeps of a layer's linear weights: each matrix laid
// out once for PackedGemm (kernels/cpu/packed_gemm.h), never repacked.
struct PackedLayerWeights {
  kernels::cpu::PackedMatrix qkv, o_proj, gate_up, down_proj;
};

// The CPU runner's GEMM weights for one rank, in one stored type.
struct PackedWeights {
  kernels::cpu::WeightType type = kernels::cpu::WeightType::kFloat32;
  std::vector<PackedLayerWeights> layers;
  kernels::cpu::PackedMatrix lm_head;  // this rank's vocabulary rows
  // The embedding table this rank looks tokens up in: the LM head itself
  // when the model ties them (one copy), else its own matrix, stored in the
  // model's dtype (int8 quantization leaves an untied embedding alone).
  const kernels::cpu::PackedMatrix& embedding() const { return tied ? lm_head : embed; }
  bool tied = false;
  kernels::cpu::PackedMatrix embed;
  int64_t bytes() const;  // all packed matrices

  // Packs w's embedding, LM head and every layer's qkv / o / gate-up / down
  // as `type` and frees those fp32 vectors in `w` as it goes (so peak memory
  // stays near the fp32 model's), leaving the norms and biases there.
  static PackedWeights PackAndRelease(ModelWeights& w, kernels::cpu::WeightType type);
};

// The weight type the CPU worker stores: --quantization int8 wins; then
// --dtype (nullopt = "auto": the checkpoint's torch_dtype). bf16 stays bf16;
// fp16 is widened to fp32 (no fp16 kernels on the CPU; fp32 holds every fp16
// value exactly); fp32 stays fp32.
kernels::cpu::WeightType CpuWeightType(std::optional<DType> dtype, DType checkpoint_dtype,
                                       bool int8_quantization);

// vLLM's --dtype spellings for the CPU worker: "auto" or "" (nullopt: the
// checkpoint's), "float32" / "float" / "f32", "bfloat16" / "bf16". Anything
// else (float16 included: no fp16 kernels on the CPU) is INVALID_ARGUMENT
// naming the flag.
absl::StatusOr<std::optional<DType>> ParseCpuDtype(const std::string& name);

// --quantization: "" (none) or "int8"; anything else is INVALID_ARGUMENT.
absl::Status CheckCpuQuantization(const std::string& name);

}  // namespace folio

#endif  // FOLIO_WORKER_PACKED_WEIGHTS_H_
