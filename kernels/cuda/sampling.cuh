// Batched token sampling on the GPU, the twin of kernels/cpu/sampling.h
// (tested against it by tests/gpu/sampling_gpu_check.cu): full logits rows
// stay in device memory and only O(samples) bytes come back to the host.
// Prompt scoring uses the same kernels: a row can report a given token's
// raw log-prob and its top list without drawing anything.
//
// The algorithm is the CPU core's, step for step (see kernels/cpu/sampling.h):
// raw log-softmax for reported log-probs; the processed logits = logit
// biases (x += bias in float, -inf bans a token), then penalties; greedy =
// argmax of the processed logits, lowest id among equal maxima; otherwise
// candidates sorted by processed logit descending (ties: lower id first),
// top-k, softmax at T, top-p, min-p, u = (key >> 11) * 2^-53 * total and a
// cumulative search; top-N raw log-probs best first (ties: lower id first);
// beam candidates = the best of the processed log-softmax. Greedy tokens and
// beam/top-N id lists are identical to the CPU's unless two values are within
// float rounding of each other (the biases and penalties round as on the
// CPU: no FMA); sampled tokens are identical unless rounding of the
// (differently ordered) sums moves u across a boundary; log-probs agree to
// ~1e-6.
//
// How rows run: one CTA per row computes the raw log-softmax statistics and
// the processed row (biases, then penalties; only for rows that have either),
// and finishes greedy rows (argmax) at once. Rows drawing with
// top_k in [1, kGpuSelectMax] and beam rows with num_samples <= kGpuSelectMax
// select their candidates with a block-level top-N (no sort); other drawing
// rows are sorted with cub::DeviceSegmentedRadixSort (stable: ids ascending
// in, lower id first among equal logits out). A batch of greedy rows without
// top log-probs runs one kernel.
//
// Plain C++ header (no device code). Asynchronous on `stream`; returns
// cudaErrorInvalidValue, enqueuing nothing, when a host-side check fails.
// Logits must not contain NaN (as on the CPU, the result is then unspecified).
#ifndef FOLIO_KERNELS_CUDA_SAMPLING_CUH_
#define FOLIO_KERNELS_CUDA_SAMPLING_CUH_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include "kernels/cpu/sampling.h"

namespace folio::kernels::gpu {

// Largest top_k / beam width served by the block-level selection; larger
// ones go through the full sort.
inline constexpr int32_t kGpuSelectMax = 64;
// Largest GpuSamplingOutputs::max_top.
inline constexpr int32_t kGpuMaxTopLogprobs = kGpuSelectMax;

// One row's parameters: cpu::SamplingRowParams as a POD for the device.
struct GpuSamplingRow {
  float temperature = 1.0f;  // 0 = greedy; REQUIRES finite, >= 0
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int32_t mode = 0;  // cpu::SamplingMode: 0 sample, 1 beam
  // history[history_offset, + num_prompt_tokens) is the prompt, the
  // num_output_tokens after it the output (only read when a penalty is set).
  int64_t history_offset = 0;
  int32_t num_prompt_tokens = 0;
  int32_t num_output_tokens = 0;
  // Logit biases: GpuSamplingInputs::bias_ids_dev/bias_values_dev[bias_offset,
  // + num_biases), applied before the penalties. REQUIRES distinct ids; ids
  // outside [0, vocab) are ignored; bias_offset is not read when num_biases
  // is 0.
  int32_t bias_offset = 0;
  int32_t num_biases = 0;
  // 1: every token without a bias entry is banned (allowed_token_ids).
  int32_t allowed_only = 0;
  // Outputs tokens/logprobs[sample_offset, + num_samples) and keys at the
  // same indices (kSample with temperature > 0 reads them).
  int32_t num_samples = 1;
  int32_t sample_offset = 0;
  int32_t num_top_logprobs = 0;  // kSample only; <= GpuSamplingOutputs::max_top
  // Prompt scoring: when in [0, vocab), this token's raw log-prob goes to
  // GpuSamplingOutputs::token_logprobs[row]; -1: none.
  int32_t score_token = -1;
};
static_assert(std::is_trivially_copyable_v<GpuSamplingRow> &&
              std::is_standard_layout_v<GpuSamplingRow>);

// Device outputs.
//  - tokens/logprobs [num_samples]: per row, kSample: the drawn tokens and
//    their RAW log-probs; kBeam: the candidates best first with their
//    PROCESSED (biased and penalized) log-probs; slots past
//    min(num_samples, vocab) of a beam row get token -1, log-prob -inf.
//  - top_ids/top_logprobs [rows][max_top]: the min(num_top_logprobs, vocab)
//    best raw log-probs of a kSample row, best first; the remaining slots
//    (all of a kBeam row's) get id -1, log-prob -inf. May be null when
//    max_top is 0.
//  - token_logprobs [rows]: the raw log-prob of each row's score_token
//    (rows without one: not written). May be null when no row has one.
struct GpuSamplingOutputs {
  int32_t* tokens = nullptr;
  float* logprobs = nullptr;
  int32_t* top_ids = nullptr;
  float* top_logprobs = nullptr;
  int32_t max_top = 0;  // in [0, kGpuMaxTopLogprobs]
  float* token_logprobs = nullptr;
};

struct GpuSamplingInputs {
  const float* logits = nullptr;  // device [rows][vocab], fp32
  int32_t vocab = 0;
  // The rows twice: on the host (validated and planned there) and the same
  // bytes on the device (what the kernels read). REQUIRES identical contents.
  std::span<const GpuSamplingRow> rows;
  const GpuSamplingRow* rows_dev = nullptr;
  const int32_t* history_dev = nullptr;  // device, history_size tokens
  int64_t history_size = 0;
  const uint64_t* keys_dev = nullptr;    // device, num_samples keys
  int32_t num_samples = 0;               // size of keys and of tokens/logprobs
  // Device, num_biases entries each: the rows' logit biases (token, bias).
  const int32_t* bias_ids_dev = nullptr;
  const float* bias_values_dev = nullptr;
  int32_t num_biases = 0;
};

// Scratch bytes SampleRows needs for `rows` x `vocab` (about 16 bytes per
// logit for the sort, plus CUB's storage, which CUB sizes for the current
// device). 0 when rows or vocab are out of range (rows in [1, 65535],
// vocab >= 1, rows * vocab <= INT32_MAX) or CUB's query fails (no device).
size_t SamplingWorkspaceBytes(int32_t rows, int32_t vocab);

// Samples every row of in.logits; see GpuSamplingOutputs for what is written.
// workspace: device memory of at least SamplingWorkspaceBytes(rows, vocab)
// bytes, not used by anything else until the work on `stream` is done.
cudaError_t SampleRows(const GpuSamplingInputs& in, void* workspace, size_t workspace_bytes,
                       const GpuSamplingOutputs& out, cudaStream_t stream);

// Enqueues the copies of the outputs into host memory (pinned for the copies
// to be asynchronous): tokens/logprobs [num_samples], top_ids/top_logprobs
// [rows][out.max_top] (skipped when null or max_top is 0), token_logprobs
// [rows] (skipped when null on either side). The caller synchronizes
// `stream` before reading them.
cudaError_t CopySamplingOutputsToHost(const GpuSamplingOutputs& out, int32_t rows,
                                      int32_t num_samples, int32_t* tokens, float* logprobs,
                                      int32_t* top_ids, float* top_logprobs, cudaStream_t stream,
                                      float* token_logprobs = nullptr);

// Host-side packing of a batch from the CPU core's per-row parameters (the
// keys come in cpu::SamplingRowParams::keys, made by cpu::SamplingKey, so
// the GPU draws with the CPU's keys). Upload rows, history, keys and biases
// as they are; GpuSamplingInputs::rows can point at `rows`.
struct GpuSamplingBatch {
  std::vector<GpuSamplingRow> rows;
  std::vector<int32_t> history;  // only rows with a penalty add theirs
  std::vector<uint64_t> keys;    // one per output slot (0 where unused)
  // Every row's p.biases in order (ids as given: the kernels skip those
  // outside [0, vocab)).
  std::vector<int32_t> bias_ids;
  std::vector<float> bias_values;
  int32_t max_top = 0;           // largest num_top_logprobs of a kSample row

  void Clear();
  // Appends a row whose outputs follow the previous rows'. REQUIRES:
  // p.keys.size() >= p.num_samples when p samples with temperature > 0.
  void Add(const cpu::SamplingRowParams& p);
  // Appends a prompt-scoring row: draws nothing, reports `target`'s raw
  // log-prob (token_logprobs) and the num_top best raw log-probs.
  void AddScoring(int32_t target, int32_t num_top);
  int32_t num_samples() const { return static_cast<int32_t>(keys.size()); }
  int32_t num_biases() const { return static_cast<int32_t>(bias_ids.size()); }
};

}  // namespace folio::kernels::gpu

#endif  // FOLIO_KERNELS_CUDA_SAMPLING_CUH_
