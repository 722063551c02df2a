#!/usr/bin/env python3
"""Writes a random-weight model directory of any shape, in the Hugging Face layout.

    /usr/bin/python3 tools/make_random_model.py --out /tmp/m --hidden-size 1024 \\
        --layers 2 --heads 32 --kv-heads 8 --head-dim 128 --tie --dtype bf16

    # Qwen2 (QKV bias), sharded in 3 files, f16, with a reference.json
    /usr/bin/python3 tools/make_random_model.py --out /tmp/q --qwen2 --shards 3 \\
        --dtype f16 --reference 4

    # Llama 3.x rope scaling, eos as a list
    /usr/bin/python3 tools/make_random_model.py --out /tmp/l3 --llama3-rope-scaling \\
        --eos-token-id 2047,2046

    # yarn rope scaling (Qwen2): factor 4 over an original context of 32, so folio
    # serves 128 positions (original * factor) though max_position_embeddings is 32;
    # prompts of up to 90 tokens run past the original context
    /usr/bin/python3 tools/make_random_model.py --out /tmp/y --qwen2 --rope-type yarn \\
        --rope-factor 4 --rope-original-max 32 --max-position-embeddings 32 \\
        --rope-theta 1000000 --prompt-len 20,40,60,90 --reference 4

    # transformers v5 layout ("rope_parameters" holds rope_type, rope_theta and the rest):
    # yarn with DeepSeek-style mscale / mscale_all_dim; linear scaling by 2 (128 positions)
    /usr/bin/python3 tools/make_random_model.py --out /tmp/y5 --config-layout v5 \\
        --rope-type yarn --rope-factor 8 --rope-original-max 16 --rope-mscale 1 \\
        --rope-mscale-all-dim 0.5 --prompt-len 10,30,60,100 --reference 4
    /usr/bin/python3 tools/make_random_model.py --out /tmp/l5 --config-layout v5 \\
        --rope-type linear --rope-factor 2 --rope-theta 500000 \\
        --max-position-embeddings 64 --prompt-len 10,50,80,100 --reference 4

    # sliding-window attention: Mistral, window 6 on every layer; Qwen2, window 5 on
    # layers >= 1 only; prompts of 10-20 tokens so that every sequence outgrows the window
    /usr/bin/python3 tools/make_random_model.py --out /tmp/mw --mistral --sliding-window 6 \\
        --prompt-len 10,14,18,20 --reference 4
    /usr/bin/python3 tools/make_random_model.py --out /tmp/qw --qwen2 --layers 2 \\
        --sliding-window 5 --max-window-layers 1 --prompt-len 10,14,18,20 --reference 4

Files: config.json, model.safetensors (or model-0000K-of-0000N.safetensors plus
model.safetensors.index.json with --shards N), tokenizer.json, and with
--reference N a reference.json in the demo model's format (prompts are random
token ids, by default of 1, 7, 16, 17, 33, 5, 64, 12 tokens after BOS in turn, or
--prompt-len's; greedy continuations and log-probs from tools/train_demo_model.py's
torch forward pass on the stored, dtype-rounded weights in float32, with the
sliding window applied as Hugging Face transformers does: see
train_demo_model.layer_sliding_windows, and the rope scaling as transformers
computes it: see train_demo_model.rope_inv_freq). Every reference sequence
(BOS, prompt, continuation) must fit in the context a server takes from the config
(folio_model_io.served_context: max_position_embeddings, times the factor of linear
rope scaling; original_max_position_embeddings times the factor for yarn).

With --device (cpu, cuda, ...) the tensors are drawn one at a time on that device in
the stored dtype, never as a float32 torch model: an 8B-parameter model in seconds on
a GPU (tests/gpu/run_serving_gpu.sh), from a different random stream than the default
path, and without --reference.

The tokenizer is models/folio-demo/tokenizer.json when it exists (its first merges
only, if --vocab-size is below 2048; specials always take the last two ids of the
tokenizer), otherwise a plain byte-level one without merges.
"""

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe_tokenizer  # noqa: E402
import folio_model_io as mio  # noqa: E402
import train_demo_model as tdm  # noqa: E402

DEMO_TOKENIZER = os.path.join(tdm.REPO, "models", "folio-demo", "tokenizer.json")
DEFAULT_PROMPT_LENGTHS = (1, 7, 16, 17, 33, 5, 64, 12)
YARN_EXTRAS = ("--rope-attention-factor", "--rope-mscale", "--rope-mscale-all-dim",
               "--rope-beta-fast", "--rope-beta-slow")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output directory (created)")
    ap.add_argument("--hidden-size", type=int, default=256)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=None, help="default: --heads (no GQA)")
    ap.add_argument("--head-dim", type=int, default=None, help="default: hidden / heads")
    ap.add_argument("--intermediate-size", type=int, default=None, help="default: about 8/3 hidden")
    ap.add_argument("--vocab-size", type=int, default=2048)
    ap.add_argument("--tie", "--tie-word-embeddings", dest="tie", action="store_true")
    arch = ap.add_mutually_exclusive_group()
    arch.add_argument("--qwen2", action="store_true", help="Qwen2ForCausalLM with QKV bias")
    arch.add_argument("--mistral", action="store_true", help="MistralForCausalLM")
    ap.add_argument("--sliding-window", type=int, default=None, metavar="N",
                    help="sliding-window attention of N tokens (needs --mistral or --qwen2; "
                         "Mistral: every layer)")
    ap.add_argument("--max-window-layers", type=int, default=None, metavar="K",
                    help="Qwen2 only: layers >= K use the window (default 0 with "
                         "--sliding-window: every layer)")
    ap.add_argument("--no-head-dim-in-config", action="store_true",
                    help="omit head_dim from config.json (as Qwen2 configs do); needs head_dim == hidden/heads")
    ap.add_argument("--rope-type", choices=["llama3", "linear", "yarn"], default=None,
                    help="rope scaling (default none). llama3: low 1, high 4, factor 8 and "
                         "original 8192 unless given; linear: needs --rope-factor; yarn: "
                         "--rope-factor and/or --rope-original-max, and the optional extras")
    ap.add_argument("--llama3-rope-scaling", action="store_true",
                    help="same as --rope-type llama3")
    ap.add_argument("--rope-factor", type=float, default=None)
    ap.add_argument("--rope-original-max", type=int, default=None,
                    help="original_max_position_embeddings (llama3, yarn)")
    yarn_extras = ap.add_argument_group("yarn extras, written only when given")
    for flag in YARN_EXTRAS:
        yarn_extras.add_argument(flag, type=float, default=None)
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--config-layout", choices=["v4", "v5"], default="v4",
                    help="v4: top-level rope_theta and rope_scaling; v5 (transformers v5): "
                         "rope_parameters with rope_theta inside, and neither of those")
    ap.add_argument("--rms-norm-eps", type=float, default=1e-5)
    ap.add_argument("--max-position-embeddings", type=int, default=2048)
    ap.add_argument("--eos-token-id", default=None,
                    help="override: an id or a comma list (written as a JSON list)")
    ap.add_argument("--dtype", default="bf16", choices=["f32", "f16", "bf16"])
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--std", type=float, default=0.02, help="weight init std")
    ap.add_argument("--tokenizer", default=None,
                    help=f"tokenizer.json to reuse (default {DEMO_TOKENIZER} when present)")
    ap.add_argument("--reference", type=int, default=0, metavar="N",
                    help="also write reference.json for N random prompts")
    ap.add_argument("--reference-tokens", type=int, default=16)
    ap.add_argument("--prompt-len", default=None, metavar="N[,N...]",
                    help="random prompt lengths (tokens after BOS), used in turn "
                         f"(default {','.join(map(str, DEFAULT_PROMPT_LENGTHS))})")
    ap.add_argument("--min-margin", type=float, default=1e-3,
                    help="skip random prompts whose greedy top-2 logits come closer than this")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default=None,
                    help="draw each tensor on this torch device (cpu, cuda) in the stored dtype, "
                         "without building the float32 model (big shapes; no --reference)")
    a = ap.parse_args(argv)
    if a.device and a.reference:
        ap.error("--reference needs the float32 model: leave out --device")
    if a.sliding_window is not None:
        if not (a.mistral or a.qwen2):
            ap.error("--sliding-window needs --mistral or --qwen2")
        if a.sliding_window < 1:
            ap.error("--sliding-window must be at least 1")
    if a.max_window_layers is not None:
        if not a.qwen2:
            ap.error("--max-window-layers needs --qwen2")
        if a.max_window_layers < 0:
            ap.error("--max-window-layers must be at least 0")
    elif a.qwen2 and a.sliding_window is not None:
        a.max_window_layers = 0
    if a.llama3_rope_scaling:
        if a.rope_type not in (None, "llama3"):
            ap.error(f"--llama3-rope-scaling contradicts --rope-type {a.rope_type}")
        a.rope_type = "llama3"
    a.rope_extras = {flag[len("--rope-"):].replace("-", "_"): getattr(a, flag[2:].replace("-", "_"))
                     for flag in YARN_EXTRAS}
    a.rope_extras = {k: v for k, v in a.rope_extras.items() if v is not None}
    if a.rope_type is None and (a.rope_factor is not None or a.rope_original_max is not None):
        ap.error("--rope-factor / --rope-original-max need --rope-type")
    if a.rope_extras and a.rope_type != "yarn":
        ap.error("--rope-attention-factor, --rope-mscale, --rope-mscale-all-dim, "
                 "--rope-beta-fast and --rope-beta-slow need --rope-type yarn")
    if a.rope_type == "linear":
        if a.rope_factor is None:
            ap.error("--rope-type linear needs --rope-factor")
        if a.rope_original_max is not None:
            ap.error("--rope-original-max is not a linear rope scaling field")
    if a.rope_type == "yarn" and a.rope_factor is None and a.rope_original_max is None:
        ap.error("--rope-type yarn needs --rope-factor and/or --rope-original-max")
    if a.prompt_len is None:
        a.prompt_lengths = list(DEFAULT_PROMPT_LENGTHS)
    else:
        try:
            a.prompt_lengths = [int(x) for x in a.prompt_len.split(",")]
        except ValueError:
            ap.error(f"--prompt-len: not a comma list of ints: {a.prompt_len!r}")
        if not a.prompt_lengths or min(a.prompt_lengths) < 0:
            ap.error("--prompt-len: lengths must be >= 0")
    return a


def load_tokenizer(a):
    path = a.tokenizer or (DEMO_TOKENIZER if os.path.exists(DEMO_TOKENIZER) else None)
    if path:
        tok = bpe_tokenizer.ByteLevelBPE.load(path)
        if tok.vocab_size > a.vocab_size:
            tok = tok.truncated(a.vocab_size)
        return tok
    tok = bpe_tokenizer.ByteLevelBPE([])
    if tok.vocab_size > a.vocab_size:
        raise SystemExit(f"--vocab-size must be at least {tok.vocab_size} (bytes and specials)")
    return tok


def make_config(a, tok):
    head_dim = a.head_dim or a.hidden_size // a.heads
    inter = a.intermediate_size or ((a.hidden_size * 8 // 3 + 63) // 64) * 64
    eos = tok.eos_id
    if a.eos_token_id:
        ids = [int(x) for x in a.eos_token_id.split(",")]
        eos = ids if len(ids) > 1 or "," in a.eos_token_id else ids[0]
    arch = "Qwen2ForCausalLM" if a.qwen2 else "MistralForCausalLM" if a.mistral else "LlamaForCausalLM"
    scaling = None
    if a.rope_type == "llama3":
        scaling = mio.llama3_rope_scaling(
            factor=8.0 if a.rope_factor is None else a.rope_factor,
            original_max_position_embeddings=a.rope_original_max or 8192)
    elif a.rope_type == "linear":
        scaling = mio.linear_rope_scaling(a.rope_factor)
    elif a.rope_type == "yarn":
        scaling = mio.yarn_rope_scaling(a.rope_factor, a.rope_original_max, **a.rope_extras)
    return mio.make_hf_config(
        hidden_size=a.hidden_size, intermediate_size=inter, num_hidden_layers=a.layers,
        num_attention_heads=a.heads, num_key_value_heads=a.kv_heads or a.heads, head_dim=head_dim,
        vocab_size=a.vocab_size, max_position_embeddings=a.max_position_embeddings,
        rms_norm_eps=a.rms_norm_eps, rope_theta=a.rope_theta, rope_scaling=scaling,
        tie_word_embeddings=a.tie, bos_token_id=tok.bos_id, eos_token_id=eos,
        torch_dtype=mio.hf_torch_dtype(a.dtype), architecture=arch,
        write_head_dim=not a.no_head_dim_in_config, sliding_window=a.sliding_window,
        max_window_layers=a.max_window_layers, config_layout=a.config_layout)


def initial_values(name, normal, std):
    """A tensor's values from standard normal draws: norms 1 + N(0, 0.1), biases
    N(0, 0.1), matrices N(0, std): every tensor matters."""
    if name.endswith("norm.weight"):
        return 1.0 + 0.1 * normal
    if name.endswith(".bias"):
        return 0.1 * normal
    return std * normal


def random_weights(model, std, generator):
    """initial_values for every parameter of the float32 torch model."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(initial_values(name, torch.randn(p.shape, generator=generator), std))


def random_tensors(cfg, dtype, std, seed, device):
    """initial_values for every tensor, each drawn on `device` and stored in `dtype`
    right away: memory for one float32 tensor at a time, not the whole model."""
    g = torch.Generator(device=device).manual_seed(seed)
    out = {}
    for name, shape in mio.hf_tensor_shapes(cfg).items():
        normal = torch.randn(shape, generator=g, device=device, dtype=torch.float32)
        out[name] = initial_values(name, normal, std).to(mio.torch_dtype(dtype)).cpu()
    return out


def random_reference(model, tok, cfg, count, max_tokens, generator, min_margin=1e-3,
                     lengths=DEFAULT_PROMPT_LENGTHS):
    """reference.json's dict: prompts of BOS + lengths[k] random ids, taking lengths in turn."""
    hi = min(cfg["vocab_size"], tok.num_regular)
    cases = []
    tries = 0
    while len(cases) < count and tries < 8 * count:
        n = lengths[tries % len(lengths)]
        tries += 1
        prompt = [tok.bos_id] + torch.randint(0, hi, (n,), generator=generator).tolist()
        out, lps, margins, tops = tdm.greedy_reference(model, prompt, max_tokens)
        if min(margins) < min_margin:
            continue
        decodable = all(i < tok.vocab_size for i in out)
        # Prompt scoring: each prompt token's log-prob given those before it,
        # with the top 5 there, from one forward pass over the prompt.
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([prompt]))[0].to(torch.float32), dim=-1)
        prompt_logprobs = []
        for i in range(len(prompt) - 1):
            tl, ti = torch.topk(logp[i], 5)
            prompt_logprobs.append({
                "token_id": prompt[i + 1],
                "logprob": float(logp[i, prompt[i + 1]]),
                "top_logprobs": [[int(t), float(v)] for v, t in zip(tl, ti)],
            })
        cases.append({
            "prompt_token_ids": prompt,
            "output_token_ids": out,
            "output_text": tok.decode(out) if decodable else None,
            "logprobs": lps,
            "top_logprobs": tops,
            "prompt_logprobs": prompt_logprobs,
            "min_top2_logit_margin": min(margins),
        })
    if len(cases) < count:
        raise SystemExit(f"only {len(cases)} random prompts without near-ties; try another --seed")
    return {
        "description": "Random-weight model; greedy continuations of random prompts from "
                       "tools/train_demo_model.py's torch forward pass (float32 math on the "
                       "stored weights). prompt_token_ids include the BOS id.",
        "weights_dtype": mio.st_dtype(cfg["torch_dtype"]).lower(),
        "compute_dtype": "float32",
        "sampling": "greedy",
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "add_bos": True,
        "logprob_tolerance": 1e-3,
        "torch_version": torch.__version__,
        "cases": cases,
    }


def main(argv=None):
    a = parse_args(argv)
    torch.set_num_threads(a.threads)
    tok = load_tokenizer(a)
    cfg = make_config(a, tok)
    if cfg["num_attention_heads"] % cfg["num_key_value_heads"]:
        raise SystemExit("--heads must be a multiple of --kv-heads")
    os.makedirs(a.out, exist_ok=True)
    for f in os.listdir(a.out):  # stale weights from an earlier run would confuse a loader
        if f.endswith(".safetensors") or f in ("model.safetensors.index.json", "reference.json"):
            os.remove(os.path.join(a.out, f))

    dtype = mio.st_dtype(a.dtype)
    if a.device:
        state = random_tensors(cfg, dtype, a.std, a.seed, a.device)
    else:
        g = torch.Generator().manual_seed(a.seed)
        model = tdm.LlamaForCausalLM(cfg)
        random_weights(model, a.std, g)
        state = {k: mio.round_to_dtype(v, dtype) for k, v in model.state_dict().items()}
    shapes = mio.hf_tensor_shapes(cfg)
    assert set(state) == set(shapes), set(state) ^ set(shapes)
    for k, v in state.items():
        assert list(v.shape) == shapes[k], (k, v.shape, shapes[k])

    mio.write_json(os.path.join(a.out, "config.json"), cfg)
    files = mio.save_sharded(a.out, state, dtype, a.shards)
    tok.save(os.path.join(a.out, "tokenizer.json"))
    if a.reference:
        longest = 1 + max(a.prompt_lengths[:8 * a.reference]) + a.reference_tokens
        if longest > mio.served_context(cfg):
            raise SystemExit(f"a reference sequence of {longest} tokens outgrows the model's "
                             f"context of {mio.served_context(cfg)} positions")
        model.load_state_dict(state)
        model.eval()
        ref = random_reference(model, tok, cfg, a.reference, a.reference_tokens, g, a.min_margin,
                               a.prompt_lengths)
        mio.write_json(os.path.join(a.out, "reference.json"), ref, indent=1)
    n_params = sum(v.numel() for v in state.values())
    windows = tdm.layer_sliding_windows(cfg)
    window = ("" if not any(windows) else
              ", sliding window " + ",".join("-" if w is None else str(w) for w in windows))
    print(f"{a.out}: {cfg['architectures'][0]}, {n_params:,} parameters, {dtype}, "
          f"{len(files)} safetensors file(s), {mio.dir_size(a.out):,} bytes{window}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
