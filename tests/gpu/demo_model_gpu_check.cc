// GPU check: the CUDA model core (worker/cuda/) runs the committed demo model
// (models/folio-demo) and reproduces models/folio-demo/reference.json, the
// greedy continuations of the trainer's own torch forward pass.
//
//  1. fp32 weights + fp32 cache, each case alone: prefill of the prompt, then
//     one token per step (decode kernel). Tokens must equal the reference
//     exactly and every logprob (host log_softmax of the copied logits row)
//     be within the reference's logprob_tolerance.               [gate]
//  2. bf16 weights + bf16 cache, each case alone: how many tokens agree with
//     the reference (report only; bf16 rounding may flip near-ties).
//  3. fp32, continuous batching: case k is admitted (prefilled) at step k
//     while the earlier ones decode in the same batch (mixed batches run the
//     prefill kernel, decode-only batches the decode kernel); halfway, case 0
//     is swapped out to the host pool and back in to other device blocks and
//     case 1's blocks are copied (copy-on-write path) to fresh ones
//     (CudaKvCache::ExecuteBlockOps). Tokens must equal the reference. [gate]
//  4. ProfileKvBlocks on the bf16 runner: prints the breakdown; must succeed
//     with a positive block count.                                     [gate]
//
// Usage: demo_model_gpu_check [model_dir]   (else $FOLIO_DEMO_MODEL, else
// the source tree's models/folio-demo). Exit 0 pass, 1 fail, 77 no CUDA device.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/gpu/demo_model_loader.h"
#include "tests/gpu/gpu_check_util.h"
#include "worker/cuda/cuda_kv_cache.h"
#include "worker/cuda/cuda_model.h"
#include "worker/cuda/memory_profile.h"

#ifndef FOLIO_DEMO_MODEL_DIR
#define FOLIO_DEMO_MODEL_DIR "models/folio-demo"
#endif

namespace folio::gpu_test {
namespace {

using gpu::CudaKvCache;
using gpu::CudaModelRunner;
using gpu::CudaStatus;
using kernels::BlockPair;

constexpr int32_t kBlockSize = 16;
constexpr int32_t kDeviceBlocks = 256;
constexpr int32_t kHostBlocks = 64;

// "PASS <name>" or "FAIL <name>: <failure>".
constexpr auto& Report = gpu_check::ReportFailure;

struct Case {
  std::vector<int32_t> prompt, expected;
  std::vector<double> logprobs;
};

struct Reference {
  int32_t max_tokens = 0;
  double tolerance = 0.0;
  std::vector<Case> cases;
};

bool LoadReference(const std::string& path, Reference* r, std::string* error) {
  std::ifstream f(path);
  if (!f) {
    *error = "cannot open " + path;
    return false;
  }
  try {
    const nlohmann::json j = nlohmann::json::parse(f);
    r->max_tokens = j.at("max_tokens").get<int32_t>();
    r->tolerance = j.at("logprob_tolerance").get<double>();
    for (const auto& c : j.at("cases")) {
      Case x;
      x.prompt = c.at("prompt_token_ids").get<std::vector<int32_t>>();
      x.expected = c.at("output_token_ids").get<std::vector<int32_t>>();
      x.logprobs = c.at("logprobs").get<std::vector<double>>();
      r->cases.push_back(std::move(x));
    }
  } catch (const std::exception& e) {
    *error = path + ": " + e.what();
    return false;
  }
  return true;
}

// The device pool's free list.
class BlockAllocator {
 public:
  explicit BlockAllocator(int32_t n) {
    for (int32_t i = n - 1; i >= 0; --i) free_.push_back(i);
  }
  int32_t Take() {
    if (free_.empty()) return -1;
    const int32_t b = free_.back();
    free_.pop_back();
    return b;
  }
  void Give(int32_t b) { free_.push_back(b); }

 private:
  std::vector<int32_t> free_;
};

struct Seq {
  std::vector<int32_t> tokens;  // prompt, then generated
  int32_t prompt_len = 0;
  int32_t cached = 0;  // tokens whose K/V are in the cache
  std::vector<int32_t> blocks;
  std::vector<int32_t> generated;
  std::vector<double> logprobs;
  bool done(int32_t max_tokens) const { return int32_t(generated.size()) >= max_tokens; }
};

// Greedy pick of a logits row: argmax (lowest index on ties) and its
// log_softmax, in double.
void Pick(const float* logits, int32_t vocab, int32_t* token, double* logprob) {
  int32_t best = 0;
  for (int32_t i = 1; i < vocab; ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  double sum = 0.0;
  for (int32_t i = 0; i < vocab; ++i) sum += std::exp(double(logits[i]) - double(logits[best]));
  *token = best;
  *logprob = -std::log(sum);
}

// Runs one step over `seqs` (each processes every token it has not cached
// yet) and appends each one's greedy next token. Error text or empty.
std::string Step(CudaModelRunner& runner, CudaKvCache& cache, BlockAllocator& alloc,
                 const std::vector<Seq*>& seqs) {
  std::vector<int32_t> ids, positions, query_start{0}, context_lens, tables, rows;
  std::vector<int64_t> slots;
  int32_t max_blocks = 0;
  for (Seq* s : seqs) {
    const int32_t total = int32_t(s->tokens.size());
    while (int32_t(s->blocks.size()) * kBlockSize < total) {
      const int32_t b = alloc.Take();
      if (b < 0) return "out of cache blocks";
      s->blocks.push_back(b);
    }
    max_blocks = std::max(max_blocks, int32_t(s->blocks.size()));
    for (int32_t p = s->cached; p < total; ++p) {
      ids.push_back(s->tokens[p]);
      positions.push_back(p);
      slots.push_back(int64_t{s->blocks[p / kBlockSize]} * kBlockSize + p % kBlockSize);
    }
    query_start.push_back(int32_t(ids.size()));
    context_lens.push_back(total);
    rows.push_back(int32_t(ids.size()) - 1);
  }
  for (Seq* s : seqs) {
    for (int32_t i = 0; i < max_blocks; ++i) {
      tables.push_back(i < int32_t(s->blocks.size()) ? s->blocks[i] : -1);
    }
  }
  gpu::CudaForwardBatch b;
  b.token_ids = ids;
  b.positions = positions;
  b.slot_mapping = slots;
  b.query_start = query_start;
  b.context_lens = context_lens;
  b.block_tables = tables;
  b.max_blocks_per_seq = max_blocks;
  b.logits_rows = rows;
  if (CudaStatus st = runner.Forward(b, cache); !st.ok()) return "Forward: " + st.ToString();
  std::vector<float> logits;
  if (CudaStatus st = runner.CopyLogitsToHost(&logits); !st.ok()) {
    return "CopyLogitsToHost: " + st.ToString();
  }
  const int32_t vocab = runner.vocab_size();
  if (logits.size() != seqs.size() * size_t(vocab)) return "wrong logits size";
  for (size_t i = 0; i < seqs.size(); ++i) {
    Seq* s = seqs[i];
    int32_t token;
    double lp;
    Pick(&logits[i * vocab], vocab, &token, &lp);
    s->cached = int32_t(s->tokens.size());
    s->tokens.push_back(token);
    s->generated.push_back(token);
    s->logprobs.push_back(lp);
  }
  return "";
}

Seq NewSeq(const Case& c) {
  Seq s;
  s.tokens = c.prompt;
  s.prompt_len = int32_t(c.prompt.size());
  return s;
}

// Each case alone: prefill, then one token per step.
std::string RunAlone(CudaModelRunner& runner, CudaKvCache& cache, const Reference& ref,
                     std::vector<Seq>* out) {
  out->clear();
  for (const Case& c : ref.cases) {
    BlockAllocator alloc(cache.num_device_blocks());
    Seq s = NewSeq(c);
    while (!s.done(ref.max_tokens)) {
      if (std::string e = Step(runner, cache, alloc, {&s}); !e.empty()) return e;
    }
    out->push_back(std::move(s));
  }
  return "";
}

// Continuous batching with a swap round trip and a block copy halfway.
std::string RunBatched(CudaModelRunner& runner, CudaKvCache& cache, const Reference& ref,
                       std::vector<Seq>* out, int32_t* steps, int32_t* max_batch) {
  BlockAllocator alloc(cache.num_device_blocks());
  std::vector<Seq> seqs;
  seqs.reserve(ref.cases.size());
  *steps = 0;
  *max_batch = 0;
  const int32_t moves_at = ref.max_tokens / 2;
  for (int32_t step = 0;; ++step) {
    if (step < int32_t(ref.cases.size())) seqs.push_back(NewSeq(ref.cases[step]));
    if (step == moves_at && seqs.size() >= 2) {
      // Case 0: device -> host -> other device blocks. Case 1: copy to fresh blocks.
      std::vector<BlockPair> out_pairs, in_pairs, copies;
      // Fresh blocks are taken before any old one is freed, so no block is
      // both a source and a destination.
      Seq& a = seqs[0];
      Seq& b = seqs[1];
      std::vector<int32_t> old = a.blocks;
      old.insert(old.end(), b.blocks.begin(), b.blocks.end());
      for (size_t i = 0; i < a.blocks.size(); ++i) {
        const int32_t fresh = alloc.Take();
        if (fresh < 0 || int32_t(i) >= kHostBlocks) return "out of blocks for the swap";
        out_pairs.push_back({a.blocks[i], int64_t(i)});
        in_pairs.push_back({int64_t(i), fresh});
        a.blocks[i] = fresh;
      }
      for (int32_t& blk : b.blocks) {
        const int32_t fresh = alloc.Take();
        if (fresh < 0) return "out of blocks for the copy";
        copies.push_back({blk, fresh});
        blk = fresh;
      }
      if (CudaStatus st = cache.ExecuteBlockOps(out_pairs, in_pairs, copies, runner.stream());
          !st.ok()) {
        return "ExecuteBlockOps: " + st.ToString();
      }
      for (int32_t blk : old) alloc.Give(blk);
    }
    std::vector<Seq*> batch;
    for (Seq& s : seqs) {
      if (!s.done(ref.max_tokens)) batch.push_back(&s);
    }
    if (batch.empty()) break;
    *max_batch = std::max(*max_batch, int32_t(batch.size()));
    if (std::string e = Step(runner, cache, alloc, batch); !e.empty()) return e;
    ++*steps;
  }
  *out = std::move(seqs);
  return "";
}

std::string CreateAll(const DemoModel& model, gpu::ComputeDtype dtype,
                      kernels::CacheDtype cache_dtype, std::unique_ptr<CudaModelRunner>* runner,
                      std::unique_ptr<CudaKvCache>* cache) {
  CudaModelRunner::Options ro;
  ro.compute_dtype = dtype;
  ro.max_num_tokens = 1024;
  ro.max_num_seqs = 64;
  ro.max_model_len = model.config.max_position;
  if (CudaStatus st = CudaModelRunner::Create(model.View(), ro, runner); !st.ok()) {
    return "CudaModelRunner::Create: " + st.ToString();
  }
  CudaKvCache::Options co;
  co.num_layers = model.config.num_layers;
  co.num_kv_heads = model.config.num_kv_heads;
  co.head_dim = model.config.head_dim;
  co.block_size = kBlockSize;
  co.num_device_blocks = kDeviceBlocks;
  co.num_host_blocks = kHostBlocks;
  co.dtype = cache_dtype;
  if (CudaStatus st = CudaKvCache::Create(co, cache); !st.ok()) {
    return "CudaKvCache::Create: " + st.ToString();
  }
  return "";
}

// Exact tokens and logprobs within tolerance; "" when they match.
std::string Compare(const Reference& ref, const std::vector<Seq>& got, bool check_logprobs,
                    double* max_diff) {
  *max_diff = 0.0;
  std::ostringstream why;
  for (size_t c = 0; c < ref.cases.size(); ++c) {
    const Case& want = ref.cases[c];
    const Seq& s = got[c];
    for (size_t i = 0; i < want.expected.size() && i < s.generated.size(); ++i) {
      if (s.generated[i] != want.expected[i]) {
        why << "case " << c << " token " << i << ": got " << s.generated[i] << ", want "
            << want.expected[i];
        return why.str();
      }
      const double diff = std::fabs(s.logprobs[i] - want.logprobs[i]);
      *max_diff = std::max(*max_diff, diff);
      if (check_logprobs && diff > ref.tolerance) {
        why << "case " << c << " token " << i << ": logprob " << s.logprobs[i] << ", want "
            << want.logprobs[i] << " (tolerance " << ref.tolerance << ")";
        return why.str();
      }
    }
    if (s.generated.size() != want.expected.size()) {
      why << "case " << c << ": " << s.generated.size() << " tokens, want " << want.expected.size();
      return why.str();
    }
  }
  return "";
}

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int Main(int argc, char** argv) {
  if (gpu_check::DeviceCountOrSkip("SKIP demo_model_gpu_check: no CUDA device") == 0) {
    return gpu_check::kExitSkip;
  }
  std::string dir = FOLIO_DEMO_MODEL_DIR;
  if (const char* env = std::getenv("FOLIO_DEMO_MODEL"); env != nullptr && *env) dir = env;
  if (argc > 1) dir = argv[1];
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("device 0: %s (sm_%d%d); model %s\n", prop.name, prop.major, prop.minor,
              dir.c_str());

  DemoModel model;
  Reference ref;
  std::string error;
  if (!LoadDemoModel(dir, &model, &error) || !LoadReference(dir + "/reference.json", &ref, &error)) {
    Report("load", error);
    return gpu_check::kExitFail;
  }
  const int32_t total_tokens = ref.max_tokens * int32_t(ref.cases.size());

  // 1. fp32, each case alone.
  {
    std::unique_ptr<CudaModelRunner> runner;
    std::unique_ptr<CudaKvCache> cache;
    std::string e = CreateAll(model, gpu::ComputeDtype::kFloat32, kernels::CacheDtype::kFloat32,
                              &runner, &cache);
    std::vector<Seq> got;
    const auto t0 = std::chrono::steady_clock::now();
    if (e.empty()) e = RunAlone(*runner, *cache, ref, &got);
    const double secs = Seconds(t0);
    double max_diff = 0.0;
    if (e.empty()) e = Compare(ref, got, /*check_logprobs=*/true, &max_diff);
    if (e.empty()) {
      std::printf("  fp32 alone: %zu cases x %d tokens exact, max |logprob diff| %.2e "
                  "(tolerance %.0e), %.2f s (%.0f tokens/s)\n",
                  ref.cases.size(), ref.max_tokens, max_diff, ref.tolerance, secs,
                  total_tokens / secs);
    }
    Report("fp32 weights + fp32 cache, greedy, each case alone", e);

    // 3. fp32, continuous batching (same runner, fresh cache contents).
    int32_t steps = 0, max_batch = 0;
    const auto t1 = std::chrono::steady_clock::now();
    e = runner ? RunBatched(*runner, *cache, ref, &got, &steps, &max_batch) : "no runner";
    const double bsecs = Seconds(t1);
    if (e.empty()) e = Compare(ref, got, /*check_logprobs=*/false, &max_diff);
    if (e.empty()) {
      std::printf("  fp32 batched: %d steps, up to %d sequences per batch, max |logprob diff| "
                  "%.2e, %.2f s (%.0f tokens/s)\n",
                  steps, max_batch, max_diff, bsecs, total_tokens / bsecs);
    }
    Report("fp32 continuous batching (+ swap out/in and block copy) tokens identical", e);
  }

  // 2. bf16 weights + bf16 cache (report), 4. profiling.
  {
    std::unique_ptr<CudaModelRunner> runner;
    std::unique_ptr<CudaKvCache> cache;
    std::string e = CreateAll(model, gpu::ComputeDtype::kBFloat16, kernels::CacheDtype::kBFloat16,
                              &runner, &cache);
    std::vector<Seq> got;
    if (e.empty()) e = RunAlone(*runner, *cache, ref, &got);
    if (e.empty()) {
      int32_t agree = 0, prefix = 0;
      for (size_t c = 0; c < ref.cases.size(); ++c) {
        bool same = true;
        for (size_t i = 0; i < got[c].generated.size(); ++i) {
          const bool eq = got[c].generated[i] == ref.cases[c].expected[i];
          agree += eq;
          same = same && eq;
          prefix += same;
        }
      }
      std::printf("  bf16: %d / %d tokens agree with the fp32 reference (%d in the common "
                  "prefixes before the first divergence)\n",
                  agree, total_tokens, prefix);
    }
    Report("bf16 weights + bf16 cache runs (agreement reported, not gated)", e);

    gpu::KvProfile profile;
    if (runner) {
      cache.reset();
      gpu::KvProfileOptions po;
      po.max_num_batched_tokens = 1024;
      po.max_num_seqs = 64;
      if (CudaStatus st = gpu::ProfileKvBlocks(*runner, po, &profile); !st.ok()) {
        e = st.ToString();
      } else if (profile.num_blocks <= 0) {
        e = "no KV blocks fit: " + profile.ToString();
      } else {
        e = "";
        std::printf("  profile: %s\n", profile.ToString().c_str());
      }
    }
    Report("ProfileKvBlocks", e);
  }

  std::printf("== demo_model_gpu_check: %s\n",
              gpu_check::ExitCode() == gpu_check::kExitPass ? "all passed" : "FAILED");
  return gpu_check::ExitCode();
}

}  // namespace
}  // namespace folio::gpu_test

int main(int argc, char** argv) { return folio::gpu_test::Main(argc, argv); }
