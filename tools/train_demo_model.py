#!/usr/bin/env python3
"""Trains folio's demo model and writes models/folio-demo/ with an independent reference.

    nice /usr/bin/python3 tools/train_demo_model.py            # 20 minutes, 1 thread
    /usr/bin/python3 tools/train_demo_model.py --verify models/folio-demo

Needs Debian's python3-torch and python3-numpy (run with /usr/bin/python3) and the
bible-kjv-text package (the King James Bible, public domain, /usr/lib/bible.data).

What it does:
  1. Decompresses the KJV text, strips the verse references (one verse per line).
  2. Trains a byte-level BPE tokenizer (tools/bpe_tokenizer.py, 2048 tokens with
     <|begin_of_text|> and <|end_of_text|>).
  3. Trains a tiny Llama (GQA, RoPE, SwiGLU, RMSNorm, tied embeddings) written
     below as plain torch modules, AdamW, on 256-token windows that start at a
     verse and begin with <|begin_of_text|>, until the wall-clock budget is spent.
  4. Writes config.json, model.safetensors (bf16), tokenizer.json, README.md and
     reference.json: for 8 prompts, the greedy 64-token continuation and the
     log-prob of each chosen token, computed by this file's own forward pass on
     the bf16-rounded weights in float32 (whole prefix recomputed every step, no
     KV cache), so an engine that loads the bf16 file and computes in float32
     matches within ~1e-3.
  5. Reads model.safetensors back from disk and checks that it reproduces
     reference.json (the same check as --verify).

The model class and reference functions are also used by tools/make_random_model.py.
"""

import argparse
import json
import math
import os
import re
import struct
import subprocess
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe_tokenizer  # noqa: E402
import folio_model_io as mio  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KJV_DATA = "/usr/lib/bible.data"

# Candidate prompts, in order; the first 8 whose greedy continuation never has a
# near-tie between the top two logits (see --min-margin) go into reference.json.
PROMPTS = [
    "In the beginning God created",
    "And the LORD said unto Moses,",
    "The LORD is my shepherd;",
    "Blessed are the poor in spirit:",
    "And it came to pass, when the king",
    "For God so loved the world,",
    "Then Jesus said unto his disciples,",
    "Wisdom is better than",
    "Thus saith the LORD of hosts,",
    "Hear, O Israel:",
    "And the children of Israel",
    "A soft answer turneth away wrath:",
    "And Abraham said,",
    "Praise ye the LORD.",
    "And the angel of the Lord",
    "Now the serpent was more subtil than",
    "And David said to Saul,",
    "Peter answered and said unto him,",
    "The fear of the LORD is the beginning of",
    "And the word of the LORD came unto",
]


# ---------------------------------------------------------------------------
# Corpus


def load_kjv_raw(path=KJV_DATA):
    """Decompresses bible-kjv-text's data file.

    Format (from the bytes): "EC02Compressed Data File" magic, then at 0x54 big-endian
    u32s: window size (65536), window count N, N+1 file offsets.  Each window is a
    Unix compress(1) LZW stream (16 bits, block mode) without the 3-byte .Z header,
    which gzip -d decodes once the header 1f 9d 90 is put back.
    """
    with open(path, "rb") as f:
        data = f.read()
    if not data.startswith(b"EC02Compressed Data File"):
        raise ValueError(f"{path}: not a bible-kjv-text data file")
    window, count = struct.unpack(">II", data[0x54:0x5C])
    offsets = struct.unpack(f">{count + 1}I", data[0x5C:0x5C + 4 * (count + 1)])
    parts = []
    for i in range(count):
        chunk = b"\x1f\x9d\x90" + data[offsets[i]:offsets[i + 1]]
        out = subprocess.run(["gzip", "-dc"], input=chunk, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, check=True).stdout
        if i < count - 1 and len(out) != window:
            raise ValueError(f"{path}: window {i} decompressed to {len(out)} bytes")
        parts.append(out)
    return b"".join(parts).decode("ascii")


def load_corpus():
    """The KJV as plain text: one verse per line, references removed, single spaces."""
    verses = []
    for line in load_kjv_raw().split("\n"):
        m = re.match(r"^[1-3]?[A-Za-z]+\d+:\d+ (.*)$", line)
        if m:  # skips the title line and the empty last line
            verses.append(re.sub(r"\s+", " ", m.group(1)).strip())
    if len(verses) != 31102:
        print(f"warning: expected 31102 verses, got {len(verses)}", file=sys.stderr)
    return "\n".join(verses) + "\n"


# ---------------------------------------------------------------------------
# The model: plain torch modules whose parameter names are the HF tensor names.


def rope_theta_and_scaling(config):
    """(rope_theta, scaling dict or None) of a config.json dict.

    transformers v5 keeps both in "rope_parameters" (rope_theta inside it; rope_type
    "default" is no scaling); v4 has a top-level "rope_theta" and "rope_scaling"."""
    params = config.get("rope_parameters") or {}
    theta = params.get("rope_theta", config.get("rope_theta", 10000.0))
    return theta, mio.config_rope_scaling(config)


def _yarn_get_mscale(scale, mscale=1.0):
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def _yarn_factor_and_original(rope_scaling, max_position_embeddings):
    """transformers' _compute_yarn_parameters: (factor, original context length)."""
    original = rope_scaling.get("original_max_position_embeddings")
    factor = rope_scaling.get("factor")
    if factor is None:
        if original is None:
            raise ValueError("yarn needs a factor or original_max_position_embeddings")
        factor = max_position_embeddings / original
    return factor, original or max_position_embeddings


def rope_attention_factor(rope_scaling, max_position_embeddings=None):
    """The factor on cos and sin: 1 but for yarn (its attention_factor, as transformers
    derives it from mscale / mscale_all_dim / the factor when not given)."""
    if not rope_scaling or rope_scaling.get("rope_type", rope_scaling.get("type")) != "yarn":
        return 1.0
    factor, _ = _yarn_factor_and_original(rope_scaling, max_position_embeddings)
    attention_factor = rope_scaling.get("attention_factor")
    if attention_factor is not None:
        return attention_factor
    mscale, mscale_all_dim = rope_scaling.get("mscale"), rope_scaling.get("mscale_all_dim")
    if mscale and mscale_all_dim:
        return _yarn_get_mscale(factor, mscale) / _yarn_get_mscale(factor, mscale_all_dim)
    return _yarn_get_mscale(factor)


def rope_inv_freq(head_dim, theta, rope_scaling=None, max_position_embeddings=None):
    """HF's inverse frequencies (float64 math), with the configured scaling: "llama3",
    "linear" or "yarn" as transformers' _compute_*_parameters.  max_position_embeddings
    (the config's) is only read by yarn, for a missing factor or original length."""
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    if not rope_scaling:
        return inv
    kind = rope_scaling.get("rope_type", rope_scaling.get("type"))
    if kind in (None, "default", "dynamic"):
        # dynamic NTK: transformers grows the base only past max_position_embeddings,
        # beyond what folio serves
        return inv
    if kind == "linear":
        return inv / rope_scaling["factor"]
    if kind == "yarn":
        factor, original = _yarn_factor_and_original(rope_scaling, max_position_embeddings)
        beta_fast = rope_scaling.get("beta_fast") or 32
        beta_slow = rope_scaling.get("beta_slow") or 1
        truncate = rope_scaling.get("truncate", True)

        def correction_dim(rotations):
            return head_dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(theta))

        low, high = correction_dim(beta_fast), correction_dim(beta_slow)
        if truncate:
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, head_dim - 1)
        if low == high:
            high += 0.001  # transformers: "prevent singularity"
        ramp = ((torch.arange(head_dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
        pos_freqs = theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        extrapolation, interpolation = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
        extrapolation_factor = 1 - ramp
        return interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor
    if kind != "llama3":
        raise ValueError(f"unsupported rope scaling {kind}")
    factor = rope_scaling["factor"]
    low, high = rope_scaling["low_freq_factor"], rope_scaling["high_freq_factor"]
    old_len = rope_scaling["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old_len / low, old_len / high
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > low_wavelen, inv / factor, inv)
    smooth = (old_len / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, scaled)


def rope_cos_sin(positions, inv_freq, attention_factor=1.0):
    """cos, sin of shape [T, head_dim] (HF layout: the half-frequencies repeated), both
    times attention_factor (yarn's; 1 otherwise)."""
    freqs = positions.to(torch.float64)[:, None] * inv_freq[None, :]
    emb = torch.cat([freqs, freqs], dim=-1)
    return ((emb.cos() * attention_factor).to(torch.float32),
            (emb.sin() * attention_factor).to(torch.float32))


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        x32 = x.float()
        return self.weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps))


def layer_sliding_windows(config):
    """Per layer, the sliding-window size W (int) or None, as Hugging Face transformers decides.

    With window W the query at sequence index i sees keys j with i - W < j <= i (W tokens,
    itself included; HF's mask keeps kv_idx > q_idx - sliding_window).
      - MistralForCausalLM: every layer, when "sliding_window" is a positive int (null: no
        window; absent: HF's MistralConfig default 4096).
      - Qwen2ForCausalLM: only when "use_sliding_window" is true; the window is
        "sliding_window" (HF's Qwen2Config default 4096 when absent; null: no window).
        Layer i is windowed iff i >= "max_window_layers" (HF default 28), unless the config
        has a "layer_types" list ("sliding_attention" / "full_attention"), which then decides.
      - LlamaForCausalLM (and anything else): never.
    """
    n = config["num_hidden_layers"]
    arch = config["architectures"][0]

    def positive(w):
        return w if isinstance(w, int) and not isinstance(w, bool) and w > 0 else None

    if arch == "MistralForCausalLM":
        return [positive(config.get("sliding_window", 4096))] * n
    if arch == "Qwen2ForCausalLM":
        if not config.get("use_sliding_window", False):
            return [None] * n
        w = positive(config.get("sliding_window", 4096))
        types = config.get("layer_types")
        if types is not None:
            if len(types) != n:
                raise ValueError(f"layer_types has {len(types)} entries for {n} layers")
            for t in types:
                if t not in ("sliding_attention", "full_attention"):
                    raise ValueError(f"unsupported layer type {t!r}")
            return [w if t == "sliding_attention" else None for t in types]
        first = config.get("max_window_layers", 28)
        return [w if i >= first else None for i in range(n)]
    return [None] * n


class Attention(nn.Module):
    def __init__(self, c, qkv_bias, sliding_window=None):
        super().__init__()
        self.h, self.kv, self.d = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        self.sliding_window = sliding_window
        hid = c["hidden_size"]
        self.q_proj = nn.Linear(hid, self.h * self.d, bias=qkv_bias)
        self.k_proj = nn.Linear(hid, self.kv * self.d, bias=qkv_bias)
        self.v_proj = nn.Linear(hid, self.kv * self.d, bias=qkv_bias)
        self.o_proj = nn.Linear(self.h * self.d, hid, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.h, self.d).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv, self.d).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv, self.d).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.h // self.kv  # query head j reads KV head j // rep (HF repeat_kv)
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(self.d)
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        if self.sliding_window is not None:
            # Also hide keys W or more tokens back: keep i - W < j <= i.  Indices are
            # positions within the sequence run here (every token's key is in x: no KV
            # cache), HF's cache_position; `positions` only feed RoPE.
            causal = causal | torch.ones(t, t, dtype=torch.bool,
                                         device=x.device).tril(-self.sliding_window)
        scores = scores.masked_fill(causal, float("-inf"))
        probs = torch.softmax(scores.float(), dim=-1)
        out = (probs @ v).transpose(1, 2).reshape(b, t, self.h * self.d)
        return self.o_proj(out)


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate_proj = nn.Linear(c["hidden_size"], c["intermediate_size"], bias=False)
        self.up_proj = nn.Linear(c["hidden_size"], c["intermediate_size"], bias=False)
        self.down_proj = nn.Linear(c["intermediate_size"], c["hidden_size"], bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, c, qkv_bias, sliding_window=None):
        super().__init__()
        self.input_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.self_attn = Attention(c, qkv_bias, sliding_window)
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.mlp = MLP(c)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Backbone(nn.Module):
    def __init__(self, c, qkv_bias):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList(DecoderLayer(c, qkv_bias, w) for w in layer_sliding_windows(c))
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])


class LlamaForCausalLM(nn.Module):
    """Llama / Mistral / Qwen2 (QKV bias) decoder; state_dict keys are the HF names.

    Sliding-window attention per layer as layer_sliding_windows(config) says."""

    def __init__(self, config):
        super().__init__()
        c = dict(config)
        c.setdefault("head_dim", c["hidden_size"] // c["num_attention_heads"])
        self.config = c
        qkv_bias = c["architectures"][0] == "Qwen2ForCausalLM" or c.get("attention_bias", False)
        self.model = Backbone(c, qkv_bias)
        self.tied = bool(c["tie_word_embeddings"])
        if not self.tied:
            self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)
        theta, scaling = rope_theta_and_scaling(c)
        max_pos = c.get("max_position_embeddings")
        self.register_buffer("inv_freq", rope_inv_freq(c["head_dim"], theta, scaling, max_pos),
                             persistent=False)
        self.rope_attention_factor = rope_attention_factor(scaling, max_pos)

    def init_weights(self, std=0.02):
        n_layers = self.config["num_hidden_layers"]
        for name, p in self.named_parameters():
            if name.endswith("layernorm.weight") or name == "model.norm.weight":
                nn.init.ones_(p)
            elif name.endswith(".bias"):
                nn.init.zeros_(p)
            elif name.endswith(("o_proj.weight", "down_proj.weight")):
                nn.init.normal_(p, 0.0, std / math.sqrt(2 * n_layers))
            else:
                nn.init.normal_(p, 0.0, std)

    def forward(self, ids, positions=None):
        """ids [B, T] -> logits [B, T, vocab] in float32."""
        t = ids.shape[1]
        if positions is None:
            positions = torch.arange(t)
        cos, sin = rope_cos_sin(positions, self.inv_freq, self.rope_attention_factor)
        x = self.model.embed_tokens(ids)
        for layer in self.model.layers:
            x = layer(x, cos, sin)
        x = self.model.norm(x)
        w = self.model.embed_tokens.weight if self.tied else self.lm_head.weight
        return x @ w.t()

    def hf_state_dict(self):
        return {k: v.detach() for k, v in self.state_dict().items()}


def model_from_dir(model_dir):
    """Loads config.json + safetensors (any dtype) into a float32 LlamaForCausalLM."""
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    model = LlamaForCausalLM(cfg)
    tensors = mio.load_model_dir_tensors(model_dir, as_float32=True)
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    if missing or unexpected:
        raise ValueError(f"{model_dir}: missing {missing}, unexpected {unexpected}")
    return model.eval(), cfg


def bf16_rounded_copy(model, dtype="BF16"):
    """A float32 copy whose weights are exactly the values stored in the file."""
    twin = LlamaForCausalLM(model.config)
    twin.load_state_dict({k: mio.round_to_dtype(v, dtype) for k, v in model.state_dict().items()})
    return twin.eval()


# ---------------------------------------------------------------------------
# Reference generation


@torch.no_grad()
def greedy_reference(model, prompt_ids, max_tokens, top_n=5):
    """Greedy decoding recomputing the whole prefix every step, float32 throughout."""
    ids = list(prompt_ids)
    out_ids, logprobs, margins, tops = [], [], [], []
    for _ in range(max_tokens):
        logits = model(torch.tensor([ids]))[0, -1].to(torch.float32)
        logp = torch.log_softmax(logits, dim=-1)
        top_l, top_i = torch.topk(logits, 2)
        tok = int(torch.argmax(logits))
        out_ids.append(tok)
        logprobs.append(float(logp[tok]))
        margins.append(float(top_l[0] - top_l[1]))
        tl, ti = torch.topk(logp, top_n)
        tops.append([[int(i), float(v)] for v, i in zip(tl, ti)])
        ids.append(tok)
    return out_ids, logprobs, margins, tops


@torch.no_grad()
def sample(model, prompt_ids, max_tokens, temperature=0.8, top_k=40, generator=None):
    ids = list(prompt_ids)
    for _ in range(max_tokens):
        logits = model(torch.tensor([ids]))[0, -1] / temperature
        v, i = torch.topk(logits, top_k)
        p = torch.softmax(v, dim=-1)
        ids.append(int(i[torch.multinomial(p, 1, generator=generator)]))
    return ids[len(prompt_ids):]


def build_reference(model, tok, prompts, max_tokens=64, count=8, min_margin=1e-2, log=print):
    """reference.json's dict; keeps the first `count` prompts without near-ties."""
    cases = []
    for prompt in prompts:
        pids = tok.encode(prompt, add_bos=True)
        out, lps, margins, tops = greedy_reference(model, pids, max_tokens)
        if min(margins) < min_margin:
            log(f"  reference: skipping {prompt!r}: top-2 logit margin {min(margins):.2e}")
            continue
        if any(i in tok.special_ids for i in out):
            log(f"  reference: skipping {prompt!r}: generates a special token")
            continue
        cases.append({
            "prompt": prompt,
            "prompt_token_ids": pids,
            "output_token_ids": out,
            "output_text": tok.decode(out),
            "logprobs": lps,
            "top_logprobs": tops,
            "min_top2_logit_margin": min(margins),
        })
        if len(cases) == count:
            break
    if len(cases) < count:
        raise RuntimeError(f"only {len(cases)} prompts without near-ties")
    return {
        "description": "Greedy continuations computed by tools/train_demo_model.py's own torch "
                       "forward pass (float32 math on the bf16 weights of model.safetensors, the "
                       "whole prefix recomputed each step). prompt_token_ids include "
                       "<|begin_of_text|>. logprobs[i] is log_softmax(logits)[output_token_ids[i]]; "
                       "top_logprobs[i] lists [token_id, logprob] for the 5 most likely tokens.",
        "weights_dtype": "bf16",
        "compute_dtype": "float32",
        "sampling": "greedy",
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "add_bos": True,
        "logprob_tolerance": 1e-3,
        "torch_version": torch.__version__,
        "cases": cases,
    }


def verify_dir(model_dir, log=print):
    """Recomputes reference.json from the files on disk; returns the worst log-prob error."""
    model, cfg = model_from_dir(model_dir)
    tok = bpe_tokenizer.ByteLevelBPE.load(os.path.join(model_dir, "tokenizer.json"))
    with open(os.path.join(model_dir, "reference.json")) as f:
        ref = json.load(f)
    worst = 0.0
    for case in ref["cases"]:
        name = repr(case.get("prompt", case["prompt_token_ids"][:8]))
        pids = case["prompt_token_ids"]
        if "prompt" in case and tok.encode(case["prompt"], add_bos=True) != pids:
            raise AssertionError(f"{name}: prompt ids {tok.encode(case['prompt'], add_bos=True)} "
                                 f"!= {pids}")
        out, lps, _, _ = greedy_reference(model, pids, ref["max_tokens"])
        if out != case["output_token_ids"]:
            raise AssertionError(f"{name}: greedy tokens differ")
        if case.get("output_text") is not None and tok.decode(out) != case["output_text"]:
            raise AssertionError(f"{name}: decoded text differs")
        err = max(abs(a - b) for a, b in zip(lps, case["logprobs"]))
        worst = max(worst, err)
        log(f"  verify: {name}: {len(out)} tokens identical, max |dlogprob| {err:.2e}")
    if worst > 1e-5:
        raise AssertionError(f"log-probs differ by {worst}")
    return worst


# ---------------------------------------------------------------------------
# Training


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(REPO, "models", "folio-demo"))
    ap.add_argument("--minutes", type=float, default=20.0, help="wall-clock training budget")
    ap.add_argument("--steps", type=int, default=0,
                    help="train exactly this many steps, learning-rate schedule by step, instead "
                         "of the time budget (then the run repeats bit for bit on one thread)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1: leave a core free)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--vocab-size", type=int, default=2048)
    ap.add_argument("--hidden-size", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--intermediate-size", type=int, default=688)
    ap.add_argument("--untied", action="store_true", help="separate lm_head (default: tied)")
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--min-lr-ratio", type=float, default=0.1)
    ap.add_argument("--warmup-steps", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--eval-every-minutes", type=float, default=4.0)
    ap.add_argument("--min-margin", type=float, default=1e-2,
                    help="skip reference prompts whose greedy top-2 logits come closer than this")
    ap.add_argument("--verify", metavar="DIR", help="only re-check DIR/reference.json and exit")
    return ap.parse_args(argv)


def make_config(a, tok):
    return mio.make_hf_config(
        hidden_size=a.hidden_size, intermediate_size=a.intermediate_size,
        num_hidden_layers=a.layers, num_attention_heads=a.heads, num_key_value_heads=a.kv_heads,
        head_dim=a.head_dim, vocab_size=tok.vocab_size, max_position_embeddings=512,
        rms_norm_eps=1e-5, rope_theta=10000.0, rope_scaling=None,
        tie_word_embeddings=not a.untied, bos_token_id=tok.bos_id, eos_token_id=tok.eos_id,
        torch_dtype="bfloat16", architecture="LlamaForCausalLM")


class Batches:
    """Windows of seq_len tokens: <|begin_of_text|> then text from a verse start."""

    def __init__(self, ids, starts, bos, seq_len, batch_size, generator):
        self.ids = torch.tensor(ids, dtype=torch.long)
        self.starts = torch.tensor([s for s in starts if s + seq_len <= len(ids)], dtype=torch.long)
        self.bos, self.seq_len, self.batch_size, self.g = bos, seq_len, batch_size, generator

    def get(self):
        pick = self.starts[torch.randint(len(self.starts), (self.batch_size,), generator=self.g)]
        offs = pick[:, None] + torch.arange(self.seq_len)[None, :]
        y = self.ids[offs]
        x = torch.cat([torch.full((self.batch_size, 1), self.bos), y[:, :-1]], dim=1)
        return x, y


@torch.no_grad()
def evaluate(model, batches, n=8):
    model.eval()
    total = 0.0
    for _ in range(n):
        x, y = batches.get()
        total += float(F.cross_entropy(model(x).flatten(0, 1), y.flatten()))
    model.train()
    return total / n


def lr_at(a, step, progress):
    if step < a.warmup_steps:
        return a.lr * (step + 1) / a.warmup_steps
    cos = 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
    return a.lr * (a.min_lr_ratio + (1 - a.min_lr_ratio) * cos)


def write_readme(out, cfg, n_params, stats, command, steps, by_steps):
    repro = ("(learning-rate schedule by step: the run repeats bit for bit on one thread)."
             if by_steps else
             f"(learning-rate schedule by the clock; `--steps {steps}` runs as many\n  steps "
             "on a step schedule, bit-reproducible but not identical to this run).")
    text = f"""# folio-demo

A tiny Llama-architecture model for folio's demos and end-to-end tests, trained from
scratch by `tools/train_demo_model.py` on the King James Bible (public domain; Debian
package `bible-kjv-text`), one verse per line, verse references removed.

- Architecture: LlamaForCausalLM, {cfg['num_hidden_layers']} layers, hidden {cfg['hidden_size']},
  {cfg['num_attention_heads']} query heads / {cfg['num_key_value_heads']} KV heads (GQA), head_dim {cfg['head_dim']},
  SwiGLU intermediate {cfg['intermediate_size']}, RoPE theta {cfg['rope_theta']:g}, RMSNorm eps {cfg['rms_norm_eps']:g},
  tied embeddings: {str(cfg['tie_word_embeddings']).lower()}, max_position_embeddings {cfg['max_position_embeddings']}.
  {n_params:,} parameters, stored in bf16.
- Tokenizer: byte-level BPE, {cfg['vocab_size']} tokens (256 bytes, merges, then
  `<|begin_of_text|>` = {cfg['bos_token_id']} and `<|end_of_text|>` = {cfg['eos_token_id']}), GPT-2 split regex.
  Prompts start with `<|begin_of_text|>` (the post-processor adds it).
- Training: {stats}
  Command: `{command}` {repro}
- `reference.json`: greedy continuations (64 tokens) and per-token log-probs for 8
  prompts from the script's own torch forward pass, float32 math on these bf16 weights.
  Re-check with `/usr/bin/python3 tools/train_demo_model.py --verify models/folio-demo`.

Rebuild with the command above; without `--minutes` or `--steps` the training budget is
20 minutes, plus about a minute for the corpus, the tokenizer and the reference.
"""
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write(text)


def main(argv=None):
    a = parse_args(argv)
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)

    if a.verify:
        worst = verify_dir(a.verify)
        print(f"OK: {a.verify}/reference.json reproduced (max |dlogprob| {worst:.2e})")
        return 0

    t_start = time.time()
    torch.manual_seed(a.seed)
    print("corpus: decompressing the KJV from", KJV_DATA, flush=True)
    text = load_corpus()
    print(f"corpus: {len(text):,} characters, {text.count(chr(10)):,} verses", flush=True)

    print(f"tokenizer: training byte-level BPE, vocab {a.vocab_size}", flush=True)
    tok = bpe_tokenizer.train_bpe(text, a.vocab_size)
    pieces = bpe_tokenizer.split_pretokens(text)
    if bpe_tokenizer.pcre2_available():
        same = pieces == bpe_tokenizer.pcre2_split(text)
        print(f"tokenizer: Python pre-tokenizer == PCRE2 on the corpus: {same}", flush=True)
        if not same:
            raise SystemExit("pre-tokenizer disagrees with PCRE2")
    ids = tok.encode(text)
    assert tok.decode(ids) == text, "decode(encode(corpus)) != corpus"
    print(f"tokenizer: {len(ids):,} tokens ({len(text) / len(ids):.2f} chars/token), "
          f"round trip exact", flush=True)

    newline = tok.encode("\n")
    assert newline == [10]
    starts = [0] + [i + 1 for i, t in enumerate(ids) if t == 10 and i + 1 < len(ids)]
    split = int(len(ids) * 0.98)  # the last 2% (end of Revelation) is held out
    train_starts = [s for s in starts if s < split]
    val_starts = [s - split for s in starts if s >= split]
    g = torch.Generator().manual_seed(a.seed)
    train = Batches(ids[:split], train_starts, tok.bos_id, a.seq_len, a.batch_size, g)
    val = Batches(ids[split:], val_starts, tok.bos_id, a.seq_len, a.batch_size,
                  torch.Generator().manual_seed(a.seed + 1))

    cfg = make_config(a, tok)
    model = LlamaForCausalLM(cfg)
    model.init_weights()
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params:,} parameters; {json.dumps({k: cfg[k] for k in ('hidden_size', 'num_hidden_layers', 'num_attention_heads', 'num_key_value_heads', 'head_dim', 'intermediate_size', 'vocab_size', 'tie_word_embeddings')})}", flush=True)

    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and "embed" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() == 2 and "embed" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)

    budget = a.minutes * 60
    t0 = time.time()
    last_eval = t0
    step = 0
    ema = None
    model.train()
    print(f"train: batch {a.batch_size} x {a.seq_len} tokens, "
          + (f"{a.steps} steps" if a.steps else f"budget {a.minutes:g} min")
          + f", {a.threads} thread(s)", flush=True)
    while True:
        elapsed = time.time() - t0
        # The schedule follows the step count with --steps, else the clock: the cosine
        # always ends at the budget however busy the machine is.
        progress = step / a.steps if a.steps else elapsed / budget
        if progress >= 1.0:
            break
        lr = lr_at(a, step, progress)
        for group in opt.param_groups:
            group["lr"] = lr
        x, y = train.get()
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        ema = float(loss) if ema is None else 0.95 * ema + 0.05 * float(loss)
        if step % a.log_every == 0 or step == 1:
            tps = step * a.batch_size * a.seq_len / max(1e-9, time.time() - t0)
            print(f"step {step:5d}  {elapsed / 60:5.1f} min  lr {lr:.2e}  loss {float(loss):.3f}  "
                  f"(ema {ema:.3f})  {tps:,.0f} tok/s", flush=True)
        if time.time() - last_eval > a.eval_every_minutes * 60:
            last_eval = time.time()
            print(f"eval: step {step}: held-out loss {evaluate(model, val):.3f}", flush=True)
    train_secs = time.time() - t0
    model.eval()
    val_loss = evaluate(model, val, 16)
    train_loss = evaluate(model, train, 16)
    print(f"train: {step} steps in {train_secs / 60:.1f} min; loss train {train_loss:.3f}, "
          f"held-out {val_loss:.3f}", flush=True)

    # The shipped weights are bf16: everything below uses the rounded values.
    model = bf16_rounded_copy(model)
    val_bf16 = evaluate(model, val, 16)
    print(f"bf16: held-out loss {val_bf16:.3f}", flush=True)

    print("\n== greedy samples ==")
    for prompt in PROMPTS[:4]:
        out = greedy_reference(model, tok.encode(prompt, add_bos=True), 48)[0]
        print(f"{prompt}|{tok.decode(out)}\n")
    print("== sampled (temperature 0.8, top-k 40) ==")
    gen = torch.Generator().manual_seed(a.seed)
    for prompt in ["And", "The LORD", "Jesus said,", "Now the serpent"]:
        out = sample(model, tok.encode(prompt, add_bos=True), 48, generator=gen)
        print(f"{prompt}|{tok.decode(out)}\n")

    os.makedirs(a.out, exist_ok=True)
    for stale in ("model.safetensors.index.json",):
        if os.path.exists(os.path.join(a.out, stale)):
            os.remove(os.path.join(a.out, stale))
    mio.write_json(os.path.join(a.out, "config.json"), cfg)
    mio.save_safetensors(os.path.join(a.out, "model.safetensors"), model.hf_state_dict(), "BF16")
    tok.save(os.path.join(a.out, "tokenizer.json"))
    ref = build_reference(model, tok, PROMPTS, min_margin=a.min_margin)
    mio.write_json(os.path.join(a.out, "reference.json"), ref, indent=1)
    stats = (f"AdamW (lr {a.lr:g}, cosine, weight decay {a.weight_decay:g}), batch {a.batch_size} x "
             f"{a.seq_len} tokens, seed {a.seed}, {step} steps in {train_secs / 60:.1f} min on "
             f"{a.threads} thread(s);\n  held-out loss {val_loss:.3f} (bf16 weights: {val_bf16:.3f}), "
             f"train loss {train_loss:.3f}.")
    command = "nice /usr/bin/python3 tools/train_demo_model.py" + "".join(
        " " + x for x in (sys.argv[1:] if argv is None else argv))
    write_readme(a.out, cfg, n_params, stats, command, step, bool(a.steps))

    print("\n== reference.json ==")
    for case in ref["cases"]:
        print(f"{case['prompt']}|{case['output_text']}  "
              f"(mean logprob {sum(case['logprobs']) / len(case['logprobs']):.3f}, "
              f"min margin {case['min_top2_logit_margin']:.2e})")
    print("\n== verify: reading the files back ==")
    verify_dir(a.out)
    for f in sorted(os.listdir(a.out)):
        print(f"  {f:24s} {os.path.getsize(os.path.join(a.out, f)):>10,} bytes")
    total = mio.dir_size(a.out)
    print(f"  total {total:,} bytes; everything took {(time.time() - t_start) / 60:.1f} min")
    if total > 10 * 1024 * 1024:
        raise SystemExit("models/folio-demo is over 10 MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
