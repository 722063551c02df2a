// GPU check: batched GPU sampling (kernels/cuda/sampling.cuh) against the CPU
// core (kernels/cpu/sampling.h) on random logits with ties, vocabularies up to
// 151936, and every class of parameters: greedy, temperature, top-k (select
// and sort paths), top-p, min-p, penalties, logit biases (-inf bans, boosts
// that move the argmax or tie it exactly, many biases, ids outside the
// vocabulary; with and without penalties; allowed_only rows), several
// samples per row, top-N
// log-probs, beam candidates (select and sort paths); prompt-scoring rows
// (a given token's log-prob and the top list, nothing drawn) mixed into a
// batch of sampling rows.
//  - greedy tokens, top-N and beam id lists: identical (except entries whose
//    CPU values tie within 1e-6, reported); greedy rows with bans or boosts
//    must not pick the raw argmax (the biases bite);
//  - sampled tokens: identical in >= 99% of the draws (count reported);
//  - log-probs within 1e-4;
//  - one row drawn with 20000 keys: the histogram matches the CPU's
//    distribution (chi-square), nothing outside its support.
// Exit: 0 all passed, 1 any failure, 77 no CUDA device (ctest: skipped).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/sampling.h"
#include "kernels/cuda/sampling.cuh"
#include "tests/gpu/gpu_check_util.h"
#include "tests/gpu/sampling_gpu_rows.h"

namespace folio::kernels {
namespace {

using namespace sampling_check;
using gpu_check::DeviceArray;
using gpu_check::Report;

// Runs `rows` (all of one vocabulary) through SampleRows; per row, the
// samples (beam: min(n, vocab) candidates) and top list.
void RunGpu(const std::string& name, const std::vector<Row>& rows, int32_t vocab,
            std::vector<RowResult>* results, bool* ok) {
  *ok = false;
  gpu::GpuSamplingBatch batch;
  for (const Row& r : rows) {
    if (r.score_target >= 0) {
      batch.AddScoring(r.score_target, r.p.num_top_logprobs);
    } else {
      batch.Add(r.p);
    }
  }
  std::vector<float> logits;
  for (const Row& r : rows) logits.insert(logits.end(), r.logits.begin(), r.logits.end());
  const int32_t n_rows = static_cast<int32_t>(rows.size());
  const int32_t total = batch.num_samples();
  const int32_t max_top = batch.max_top;

  DeviceArray<float> d_logits, d_logprobs, d_top_lp, d_bias_values, d_token_lp;
  DeviceArray<gpu::GpuSamplingRow> d_rows;
  DeviceArray<int32_t> d_history, d_tokens, d_top_ids, d_bias_ids;
  DeviceArray<uint64_t> d_keys;
  DeviceArray<uint8_t> d_ws;
  CHECK_CUDA(d_logits.AllocAndUpload(logits));
  CHECK_CUDA(d_rows.AllocAndUpload(batch.rows));
  CHECK_CUDA(d_history.AllocAndUpload(batch.history));
  CHECK_CUDA(d_keys.AllocAndUpload(batch.keys));
  CHECK_CUDA(d_bias_ids.AllocAndUpload(batch.bias_ids));
  CHECK_CUDA(d_bias_values.AllocAndUpload(batch.bias_values));
  CHECK_CUDA(d_tokens.Alloc(total));
  CHECK_CUDA(d_logprobs.Alloc(total));
  CHECK_CUDA(d_top_ids.Alloc(size_t(n_rows) * max_top));
  CHECK_CUDA(d_top_lp.Alloc(size_t(n_rows) * max_top));
  CHECK_CUDA(d_token_lp.Alloc(n_rows));
  const size_t ws_bytes = gpu::SamplingWorkspaceBytes(n_rows, vocab);
  if (ws_bytes == 0) {
    Report(name, false, "SamplingWorkspaceBytes returned 0");
    return;
  }
  CHECK_CUDA(d_ws.Alloc(ws_bytes));
  // Poison the outputs: every slot must be written.
  CHECK_CUDA(cudaMemset(d_tokens.data(), 0x7f, d_tokens.bytes()));
  CHECK_CUDA(cudaMemset(d_top_ids.data(), 0x7f, d_top_ids.bytes()));
  CHECK_CUDA(cudaMemset(d_token_lp.data(), 0x7f, d_token_lp.bytes()));

  gpu::GpuSamplingInputs in;
  in.logits = d_logits.data();
  in.vocab = vocab;
  in.rows = batch.rows;
  in.rows_dev = d_rows.data();
  in.history_dev = d_history.data();
  in.history_size = static_cast<int64_t>(batch.history.size());
  in.keys_dev = d_keys.data();
  in.num_samples = total;
  in.bias_ids_dev = d_bias_ids.data();
  in.bias_values_dev = d_bias_values.data();
  in.num_biases = batch.num_biases();
  gpu::GpuSamplingOutputs out;
  out.tokens = d_tokens.data();
  out.logprobs = d_logprobs.data();
  out.top_ids = d_top_ids.data();
  out.top_logprobs = d_top_lp.data();
  out.max_top = max_top;
  out.token_logprobs = d_token_lp.data();

  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  CHECK_CUDA(gpu::SampleRows(in, d_ws.data(), ws_bytes, out, stream));
  std::vector<int32_t> tokens(total), top_ids(size_t(n_rows) * max_top);
  std::vector<float> lps(total), top_lps(size_t(n_rows) * max_top), token_lps(n_rows);
  CHECK_CUDA(gpu::CopySamplingOutputsToHost(out, n_rows, total, tokens.data(), lps.data(),
                                            top_ids.data(), top_lps.data(), stream,
                                            token_lps.data()));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  CHECK_CUDA(cudaStreamDestroy(stream));

  results->assign(rows.size(), {});
  for (int32_t r = 0; r < n_rows; ++r) {
    const gpu::GpuSamplingRow& g = batch.rows[r];
    RowResult& res = (*results)[r];
    if (g.score_token >= 0) res.token_logprob = token_lps[r];
    for (int32_t s = 0; s < g.num_samples; ++s) {
      const int32_t slot = g.sample_offset + s;
      if (tokens[slot] == -1 && g.mode == 1) continue;  // beam slot past the vocabulary
      res.samples.push_back({tokens[slot], lps[slot]});
    }
    for (int32_t j = 0; j < max_top; ++j) {
      const int32_t id = top_ids[size_t(r) * max_top + j];
      if (id == -1) continue;
      res.top.push_back({id, top_lps[size_t(r) * max_top + j]});
    }
  }
  *ok = true;
}

void CheckBatch(int32_t vocab, bool coarse, int reps, std::mt19937& rng, Tally* total) {
  const std::string name = "batch vocab=" + std::to_string(vocab) + (coarse ? " ties" : "");
  std::vector<Row> rows;
  uint64_t seed = 1000;
  for (int rep = 0; rep < reps; ++rep) {
    for (const Combo& c : kCombos) rows.push_back(MakeRow(c, vocab, coarse, seed++, rng));
    for (const BiasCombo& c : kBiasCombos) {
      rows.push_back(MakeRow(c.combo, vocab, coarse, seed++, rng, c.biases));
    }
  }
  std::vector<RowResult> got;
  bool ok = false;
  RunGpu(name, rows, vocab, &got, &ok);
  if (!ok) return;
  Tally t;
  cpu::RowSampler sampler;
  std::map<std::string, int64_t> bad_by_label;
  int64_t unmoved = 0;  // greedy rows whose bans/boosts did not bite (a check bug)
  for (size_t r = 0; r < rows.size(); ++r) {
    RowResult want;
    sampler.Sample(rows[r].logits, rows[r].p, &want.samples, &want.top);
    if (BiasMustMoveGreedy(rows[r]) &&
        (want.samples.empty() || want.samples[0].token == cpu::ArgMax(rows[r].logits))) {
      ++unmoved;
      ++bad_by_label[rows[r].label + " unmoved"];
    }
    const Tally before = t;
    CompareRow(rows[r], want, got[r], &t);
    const int64_t bad = (t.bad_list - before.bad_list) + (t.bad_greedy - before.bad_greedy) +
                        (t.bad_logprob - before.bad_logprob) + (t.bad_range - before.bad_range) +
                        ((t.drawn - before.drawn) - (t.drawn_same - before.drawn_same));
    if (bad > 0) bad_by_label[rows[r].label] += bad;
  }
  std::string detail = "rows=" + std::to_string(rows.size()) + " greedy_same=" +
                       std::to_string(t.greedy_same) + "/" + std::to_string(t.greedy) +
                       " drawn_same=" + std::to_string(t.drawn_same) + "/" +
                       std::to_string(t.drawn) + " list_same=" + std::to_string(t.listed_same) +
                       "/" + std::to_string(t.listed) + " (ties " + std::to_string(t.listed_tie) +
                       ") bad_list=" + std::to_string(t.bad_list) + " bad_logprob=" +
                       std::to_string(t.bad_logprob) + " bad_range=" + std::to_string(t.bad_range) +
                       " max_logprob_err=" + std::to_string(t.max_lp_err) +
                       " bias_unmoved=" + std::to_string(unmoved);
  for (const auto& [label, n] : bad_by_label) detail += " [" + label + ": " + std::to_string(n) + "]";
  const bool pass = t.bad_greedy == 0 && t.bad_list == 0 && t.bad_logprob == 0 &&
                    t.bad_range == 0 && t.drawn_same * 100 >= t.drawn * 99 && unmoved == 0;
  Report(name, pass, detail);
  total->greedy += t.greedy;
  total->greedy_same += t.greedy_same;
  total->drawn += t.drawn;
  total->drawn_same += t.drawn_same;
}

// A batch of greedy rows without top log-probs: the one-kernel fast path.
void CheckGreedyFastPath(int32_t vocab, std::mt19937& rng) {
  const std::string name = "greedy_fast_path vocab=" + std::to_string(vocab);
  std::vector<Row> rows;
  const BiasKind kinds[] = {BiasKind::kNone, BiasKind::kBan, BiasKind::kBoost, BiasKind::kMixed,
                            BiasKind::kOutOfRange};
  for (int i = 0; i < 64; ++i) {
    Combo c = kCombos[0];
    c.penalties = i % 2 == 1;
    rows.push_back(MakeRow(c, vocab, i % 3 == 0, i, rng, kinds[(i / 2) % 5]));
  }
  std::vector<RowResult> got;
  bool ok = false;
  RunGpu(name, rows, vocab, &got, &ok);
  if (!ok) return;
  Tally t;
  cpu::RowSampler sampler;
  for (size_t r = 0; r < rows.size(); ++r) {
    RowResult want;
    sampler.Sample(rows[r].logits, rows[r].p, &want.samples, &want.top);
    CompareRow(rows[r], want, got[r], &t);
  }
  Report(name, t.bad_greedy == 0 && t.bad_logprob == 0 && t.bad_range == 0 && t.greedy == 64,
         "greedy_same=" + std::to_string(t.greedy_same) + "/" + std::to_string(t.greedy) +
             " max_logprob_err=" + std::to_string(t.max_lp_err) + " (rows with biases: " +
             std::to_string(std::count_if(rows.begin(), rows.end(),
                                          [](const Row& r) { return !r.biases.empty(); })) +
             ")");
}

// One row drawn with `draws` different keys: GPU histogram vs the CPU's
// distribution (chi-square over bins of expected count >= 5, the rest
// pooled; bound df + 6 sqrt(2 df)), nothing outside the CPU's support, and
// token-for-token agreement with the CPU's draws.
void CheckDistribution(int32_t vocab, const Combo& c, int32_t draws, std::mt19937& rng,
                       BiasKind biases = BiasKind::kNone) {
  const std::string name = std::string("distribution ") + c.label + " vocab=" +
                           std::to_string(vocab) + " draws=" + std::to_string(draws);
  Combo many = c;
  many.num_samples = draws;
  std::vector<Row> rows;
  rows.push_back(MakeRow(many, vocab, false, 77, rng));
  std::normal_distribution<float> normal(0.0f, 1.5f);
  for (float& x : rows[0].logits) x = normal(rng);  // no masked/planted values here
  if (biases != BiasKind::kNone) {  // made for the new logits
    rows[0].bias_kind = biases;
    rows[0].biases = MakeBiases(biases, rows[0].logits, rng);
    rows[0].p.biases = rows[0].biases;
  }
  std::vector<RowResult> got;
  bool ok = false;
  RunGpu(name, rows, vocab, &got, &ok);
  if (!ok) return;
  const Row& row = rows[0];
  std::vector<float> pen = row.logits;
  cpu::ProcessLogits(row.p, pen);
  cpu::DrawDistribution dist;
  cpu::PrepareDraw(pen, row.p, &dist);
  std::vector<double> expected(vocab, 0.0);
  for (int32_t i = 0; i < dist.keep; ++i) expected[dist.order[i]] = dist.probs[i] / dist.total;
  std::vector<int64_t> counts(vocab, 0);
  int64_t outside = 0, same = 0;
  for (size_t i = 0; i < got[0].samples.size(); ++i) {
    const int32_t t = got[0].samples[i].token;
    if (t < 0 || t >= vocab || expected[t] == 0.0) {
      ++outside;
      continue;
    }
    ++counts[t];
    same += t == cpu::DrawToken(dist, row.keys[i]);
  }
  double chi2 = 0.0, pooled_obs = 0.0, pooled_exp = 0.0;
  int bins = 0;
  for (int32_t t = 0; t < vocab; ++t) {
    const double e = expected[t] * draws;
    if (e == 0.0) continue;
    if (e >= 5.0) {
      chi2 += (counts[t] - e) * (counts[t] - e) / e;
      ++bins;
    } else {
      pooled_obs += counts[t];
      pooled_exp += e;
    }
  }
  if (pooled_exp >= 5.0) {
    chi2 += (pooled_obs - pooled_exp) * (pooled_obs - pooled_exp) / pooled_exp;
    ++bins;
  }
  const double df = std::max(1, bins - 1);
  const double bound = df + 6.0 * std::sqrt(2.0 * df);
  const bool pass = static_cast<int32_t>(got[0].samples.size()) == draws && outside == 0 &&
                    chi2 <= bound && same * 100 >= int64_t{draws} * 99;
  Report(name, pass,
         "support=" + std::to_string(dist.keep) + " chi2=" + std::to_string(chi2) + " df=" +
             std::to_string(int(df)) + " bound=" + std::to_string(bound) + " outside=" +
             std::to_string(outside) + " same_as_cpu=" + std::to_string(same) + "/" +
             std::to_string(draws));
}

// Prompt-scoring rows (random targets, top lists of 0..20) interleaved with
// greedy and drawing rows in one batch: each target's log-prob and the top
// lists as the CPU's log-softmax and TopTokens, the sampling rows as before.
void CheckScoring(int32_t vocab, std::mt19937& rng) {
  const std::string name = "prompt_scoring vocab=" + std::to_string(vocab);
  std::vector<Row> rows;
  const int32_t tops[] = {0, 1, 5, 20};
  for (int i = 0; i < 48; ++i) {
    if (i % 4 == 3) {  // a sampling row between the scoring rows
      const Combo& c = kCombos[(i / 4) % 2 == 0 ? 0 : 4];  // greedy, T1+topk40
      rows.push_back(MakeRow(c, vocab, false, 1000 + i, rng));
      continue;
    }
    Row row;
    row.logits = MakeLogits(vocab, i % 5 == 0, rng);
    // Targets: the best token, a masked one, or anywhere.
    const int32_t argmax = static_cast<int32_t>(
        std::max_element(row.logits.begin(), row.logits.end()) - row.logits.begin());
    row.score_target = i % 6 == 0 ? argmax : static_cast<int32_t>(rng() % vocab);
    row.p.num_top_logprobs = std::min(tops[i % 4], vocab);
    row.label = "score";
    rows.push_back(std::move(row));
  }
  std::vector<RowResult> got;
  bool ok = false;
  RunGpu(name, rows, vocab, &got, &ok);
  if (!ok) return;
  Tally t;
  int64_t scored = 0, bad_target = 0;
  double max_target_err = 0.0;
  cpu::RowSampler sampler;
  std::vector<float> raw(vocab);
  std::vector<int32_t> order;
  for (size_t r = 0; r < rows.size(); ++r) {
    RowResult want;
    if (rows[r].score_target < 0) {
      sampler.Sample(rows[r].logits, rows[r].p, &want.samples, &want.top);
      CompareRow(rows[r], want, got[r], &t);
      continue;
    }
    cpu::LogSoftmax(rows[r].logits, raw);
    if (rows[r].p.num_top_logprobs > 0) {
      cpu::TopTokens(raw, rows[r].p.num_top_logprobs, &order, &want.top);
    }
    CompareList(want.top, got[r].top, raw, &t);
    if (!got[r].samples.empty()) ++t.bad_list;
    ++scored;
    const double e = LogprobErr(got[r].token_logprob, raw[rows[r].score_target]);
    max_target_err = std::max(max_target_err, e);
    if (!(e <= 1e-4)) ++bad_target;
  }
  Report(name,
         bad_target == 0 && t.bad_list == 0 && t.bad_logprob == 0 && t.bad_range == 0 &&
             t.bad_greedy == 0 && scored == 36,
         "scored=" + std::to_string(scored) + " max_target_err=" +
             std::to_string(max_target_err) + " listed_same=" + std::to_string(t.listed_same) +
             "/" + std::to_string(t.listed) + " ties=" + std::to_string(t.listed_tie) +
             " max_logprob_err=" + std::to_string(t.max_lp_err));
}

void CheckInvalidArgs() {
  const std::string name = "invalid_args";
  gpu::GpuSamplingRow row;
  gpu::GpuSamplingInputs in;
  in.logits = reinterpret_cast<const float*>(uintptr_t{256});
  in.vocab = 100;
  in.rows = {&row, 1};
  in.rows_dev = reinterpret_cast<const gpu::GpuSamplingRow*>(uintptr_t{256});
  in.keys_dev = reinterpret_cast<const uint64_t*>(uintptr_t{256});
  in.num_samples = 1;
  gpu::GpuSamplingOutputs out;
  out.tokens = reinterpret_cast<int32_t*>(uintptr_t{256});
  out.logprobs = reinterpret_cast<float*>(uintptr_t{256});
  void* ws = reinterpret_cast<void*>(uintptr_t{256});
  const size_t bytes = gpu::SamplingWorkspaceBytes(1, 100);
  bool ok = bytes > 0 && gpu::SamplingWorkspaceBytes(0, 100) == 0 &&
            gpu::SamplingWorkspaceBytes(1, 0) == 0 &&
            gpu::SamplingWorkspaceBytes(65536, 10) == 0 &&
            gpu::SamplingWorkspaceBytes(2, INT32_MAX) == 0;
  auto expect_invalid = [&](auto mutate) {
    gpu::GpuSamplingRow r = row;
    gpu::GpuSamplingInputs i = in;
    gpu::GpuSamplingOutputs o = out;
    size_t b = bytes;
    mutate(r, i, o, b);
    i.rows = {&r, 1};
    return gpu::SampleRows(i, ws, b, o, nullptr) == cudaErrorInvalidValue;
  };
  using R = gpu::GpuSamplingRow;
  using I = gpu::GpuSamplingInputs;
  using O = gpu::GpuSamplingOutputs;
  ok = ok && expect_invalid([](R&, I&, O&, size_t& b) { b -= 1; });
  ok = ok && expect_invalid([](R& r, I&, O&, size_t&) { r.temperature = -1.0f; });
  ok = ok && expect_invalid([](R& r, I&, O&, size_t&) { r.temperature = NAN; });
  ok = ok && expect_invalid([](R& r, I&, O&, size_t&) { r.num_samples = 2; });
  ok = ok && expect_invalid([](R& r, I&, O&, size_t&) { r.mode = 2; });
  ok = ok && expect_invalid([](R& r, I&, O&, size_t&) { r.num_top_logprobs = 1; });
  ok = ok && expect_invalid([](R&, I&, O& o, size_t&) { o.max_top = gpu::kGpuMaxTopLogprobs + 1; });
  ok = ok && expect_invalid([](R& r, I&, O&, size_t&) {
    r.repetition_penalty = 1.2f;
    r.num_prompt_tokens = 3;  // history_size is 0
  });
  ok = ok && expect_invalid([](R&, I& i, O&, size_t&) { i.keys_dev = nullptr; });
  ok = ok && expect_invalid([](R&, I& i, O&, size_t&) { i.logits = nullptr; });
  ok = ok && expect_invalid([](R&, I&, O& o, size_t&) { o.tokens = nullptr; });
  // Scoring: a token inside the vocabulary, somewhere to write its log-prob.
  float* token_lp = reinterpret_cast<float*>(uintptr_t{768});
  ok = ok && expect_invalid([&](R& r, I&, O& o, size_t&) {
    r.score_token = 100;  // == vocab
    o.token_logprobs = token_lp;
  });
  ok = ok && expect_invalid([&](R& r, I&, O& o, size_t&) {
    r.score_token = -2;
    o.token_logprobs = token_lp;
  });
  ok = ok && expect_invalid([](R& r, I&, O&, size_t&) { r.score_token = 3; });  // output null
  // Biases: ranges within in.num_biases, device arrays when any.
  const int32_t* ids = reinterpret_cast<const int32_t*>(uintptr_t{256});
  const float* values = reinterpret_cast<const float*>(uintptr_t{512});
  ok = ok && expect_invalid([](R& r, I&, O&, size_t&) { r.num_biases = 1; });  // in.num_biases 0
  ok = ok && expect_invalid([](R& r, I&, O&, size_t&) { r.num_biases = -1; });
  ok = ok && expect_invalid([](R&, I& i, O&, size_t&) { i.num_biases = -1; });
  ok = ok && expect_invalid([](R&, I& i, O&, size_t&) { i.num_biases = 2; });  // null arrays
  ok = ok && expect_invalid([&](R&, I& i, O&, size_t&) {
    i.num_biases = 2;
    i.bias_ids_dev = ids;  // values null
  });
  ok = ok && expect_invalid([&](R&, I& i, O&, size_t&) {
    i.num_biases = 2;
    i.bias_values_dev = values;  // ids null
  });
  ok = ok && expect_invalid([&](R& r, I& i, O&, size_t&) {
    i.num_biases = 2;
    i.bias_ids_dev = ids;
    i.bias_values_dev = values;
    r.bias_offset = 1;
    r.num_biases = 2;  // past the end
  });
  ok = ok && expect_invalid([&](R& r, I& i, O&, size_t&) {
    i.num_biases = 2;
    i.bias_ids_dev = ids;
    i.bias_values_dev = values;
    r.bias_offset = -1;
    r.num_biases = 1;
  });
  Report(name, ok, "");
}

int Run() {
  if (gpu_check::DeviceCountOrSkip() == 0) return gpu_check::kExitSkip;
  gpu_check::PrintDevice(0);
  std::mt19937 rng(20240603);
  CheckInvalidArgs();

  Tally total;
  CheckBatch(50, /*coarse=*/false, 3, rng, &total);  // beam100 > vocab: all of it
  CheckBatch(1000, /*coarse=*/true, 3, rng, &total);
  CheckBatch(32000, /*coarse=*/false, 3, rng, &total);
  CheckBatch(32000, /*coarse=*/true, 2, rng, &total);
  CheckBatch(151936, /*coarse=*/false, 2, rng, &total);
  CheckBatch(151936, /*coarse=*/true, 1, rng, &total);
  CheckGreedyFastPath(32000, rng);
  CheckGreedyFastPath(151936, rng);
  CheckScoring(50, rng);
  CheckScoring(32000, rng);
  CheckScoring(151936, rng);

  CheckDistribution(1000, {"T1", 1.0f, 0, 1.0f, 0.0f, false, 0, SamplingMode::kSample, 0},
                    20000, rng);
  CheckDistribution(1000, {"T0.8+topp0.9+pen", 0.8f, 0, 0.9f, 0.0f, true, 0,
                           SamplingMode::kSample, 0}, 20000, rng);
  CheckDistribution(32000, {"T1+topk50+minp0.05", 1.0f, 50, 1.0f, 0.05f, false, 0,
                            SamplingMode::kSample, 0}, 20000, rng);
  CheckDistribution(1000, {"T1+mixed_biases", 1.0f, 0, 1.0f, 0.0f, false, 0,
                           SamplingMode::kSample, 0}, 20000, rng, BiasKind::kMixed);
  CheckDistribution(32000, {"T0.8+topk50+pen+boost", 0.8f, 50, 1.0f, 0.0f, true, 0,
                            SamplingMode::kSample, 0}, 20000, rng, BiasKind::kBoost);

  std::printf("sampling_gpu_check: greedy identical %lld/%lld, sampled identical %lld/%lld\n",
              static_cast<long long>(total.greedy_same), static_cast<long long>(total.greedy),
              static_cast<long long>(total.drawn_same), static_cast<long long>(total.drawn));
  return gpu_check::Summary("sampling_gpu_check");
}

}  // namespace
}  // namespace folio::kernels

int main() { return folio::kernels::Run(); }
