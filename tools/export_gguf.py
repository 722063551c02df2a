#!/usr/bin/env python3
"""Writes a folio Llama model directory (safetensors + tokenizer.json) as an
f32 GGUF, so that llama.cpp runs the very same weights folio does, for the
benchmarks in docs/performance.md.

llama.cpp's convert_hf_to_gguf.py needs transformers (not in Debian); this
writes the same file with llama.cpp's own gguf-py writer, whose directory
comes with --gguf-py (tools/build_llama_cpp.sh prints it):

    /usr/bin/python3 tools/export_gguf.py --gguf-py /tmp/llama.cpp/src/gguf-py \\
        --model /tmp/m/llama7m --out /tmp/m/llama7m.gguf

Only the Llama architecture (no biases, no rope scaling) and byte-level BPE
tokenizers, which is what tools/make_random_model.py writes; anything else is
refused. q_proj and k_proj are permuted as convert_hf_to_gguf.py does:
Hugging Face rotates the two halves of each head, llama.cpp pairs
neighbouring values.
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import folio_model_io as mio  # noqa: E402


def permute_for_rope(w, n_head):
    """convert_hf_to_gguf.py's LlamaModel.permute."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="folio / Hugging Face model directory")
    ap.add_argument("--out", required=True, help="the .gguf to write")
    ap.add_argument("--gguf-py", required=True, help="llama.cpp's gguf-py directory")
    args = ap.parse_args()
    sys.path.insert(0, args.gguf_py)
    import gguf

    with open(os.path.join(args.model, "config.json")) as f:
        cfg = json.load(f)
    if cfg.get("model_type") != "llama":
        sys.exit(f"{args.model}: model_type {cfg.get('model_type')!r}, only llama is exported")
    if cfg.get("rope_scaling") or cfg.get("attention_bias") or cfg.get("mlp_bias"):
        sys.exit(f"{args.model}: rope scaling and biases are not exported")
    with open(os.path.join(args.model, "tokenizer.json")) as f:
        tok = json.load(f)
    if tok["model"]["type"] != "BPE":
        sys.exit(f"{args.model}: tokenizer model {tok['model']['type']}, only BPE is exported")

    n_head, n_kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hidden, n_layer = cfg["hidden_size"], cfg["num_hidden_layers"]
    head_dim = cfg.get("head_dim") or hidden // n_head
    vocab_size = cfg["vocab_size"]

    # Token strings by id: the BPE vocabulary, then the added (special) tokens.
    tokens = [None] * vocab_size
    types = [gguf.TokenType.NORMAL] * vocab_size
    for text, i in tok["model"]["vocab"].items():
        tokens[i] = text
    for added in tok.get("added_tokens", []):
        tokens[added["id"]] = added["content"]
        types[added["id"]] = gguf.TokenType.CONTROL if added.get("special") else gguf.TokenType.USER_DEFINED
    for i, t in enumerate(tokens):
        if t is None:
            tokens[i] = f"[PAD{i}]"
            types[i] = gguf.TokenType.UNUSED
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"].get("merges", [])]

    w = gguf.GGUFWriter(args.out, gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.LLAMA])
    w.add_name(os.path.basename(os.path.normpath(args.model)))
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(hidden)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(n_head)
    w.add_head_count_kv(n_kv)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(cfg.get("rope_theta", 10000.0))
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_vocab_size(vocab_size)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(cfg["bos_token_id"])
    eos = cfg["eos_token_id"]
    w.add_eos_token_id(eos[0] if isinstance(eos, list) else eos)
    w.add_add_bos_token(False)

    t = {k: v.float().numpy() for k, v in mio.load_model_dir_tensors(args.model).items()}
    out = {"token_embd.weight": t["model.embed_tokens.weight"],
           "output_norm.weight": t["model.norm.weight"]}
    if not cfg.get("tie_word_embeddings"):
        out["output.weight"] = t["lm_head.weight"]
    for i in range(n_layer):
        p = f"model.layers.{i}."
        out.update({
            f"blk.{i}.attn_norm.weight": t[p + "input_layernorm.weight"],
            f"blk.{i}.attn_q.weight": permute_for_rope(t[p + "self_attn.q_proj.weight"], n_head),
            f"blk.{i}.attn_k.weight": permute_for_rope(t[p + "self_attn.k_proj.weight"], n_kv),
            f"blk.{i}.attn_v.weight": t[p + "self_attn.v_proj.weight"],
            f"blk.{i}.attn_output.weight": t[p + "self_attn.o_proj.weight"],
            f"blk.{i}.ffn_norm.weight": t[p + "post_attention_layernorm.weight"],
            f"blk.{i}.ffn_gate.weight": t[p + "mlp.gate_proj.weight"],
            f"blk.{i}.ffn_up.weight": t[p + "mlp.up_proj.weight"],
            f"blk.{i}.ffn_down.weight": t[p + "mlp.down_proj.weight"],
        })
    for name, array in out.items():
        w.add_tensor(name, np.ascontiguousarray(array, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"{args.out}: {len(out)} tensors, {sum(a.size for a in out.values()) * 4 / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
