"""Shared helpers for writing (and reading back) Hugging Face model directories.

Used by tools/train_demo_model.py and tools/make_random_model.py, and by the
Python tests under tests/tools/.  Run with Debian's interpreter:
/usr/bin/python3 (python3-torch, python3-numpy).

safetensors is written by hand (no `safetensors` package on Debian bookworm):

    [8 bytes]  little-endian u64 N = length of the JSON header
    [N bytes]  UTF-8 JSON: {"__metadata__": {str: str},
                            name: {"dtype": "BF16", "shape": [...],
                                   "data_offsets": [begin, end]}, ...}
               padded with spaces so that the data starts 8-byte aligned
    [rest]     raw little-endian tensor data; offsets are relative to the
               start of this buffer, contiguous, no holes.

Tensors are laid out by element size (largest first) then by name, so each
tensor starts at a multiple of its element size (mmap-friendly).
"""

import json
import os
import struct

import numpy as np
import torch

# safetensors dtype name -> (torch dtype, numpy dtype used for the raw bytes, bytes per element)
_DTYPES = {
    "F32": (torch.float32, np.dtype("<f4"), 4),
    "F16": (torch.float16, np.dtype("<f2"), 2),
    "BF16": (torch.bfloat16, np.dtype("<i2"), 2),  # raw bits, viewed as int16
    "I64": (torch.int64, np.dtype("<i8"), 8),
    "I32": (torch.int32, np.dtype("<i4"), 4),
}

_TORCH_TO_ST = {
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.int64: "I64",
    torch.int32: "I32",
}

DTYPE_ALIASES = {
    "f32": "F32", "float32": "F32", "fp32": "F32",
    "f16": "F16", "float16": "F16", "fp16": "F16",
    "bf16": "BF16", "bfloat16": "BF16",
}

# config.json "torch_dtype" for each safetensors dtype
_HF_TORCH_DTYPE = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}


def st_dtype(name):
    """Normalises 'bf16' / 'bfloat16' / 'BF16' to the safetensors dtype name."""
    if name in _DTYPES:
        return name
    key = name.lower()
    if key not in DTYPE_ALIASES:
        raise ValueError(f"unsupported dtype {name!r}")
    return DTYPE_ALIASES[key]


def hf_torch_dtype(dtype):
    return _HF_TORCH_DTYPE[st_dtype(dtype)]


def torch_dtype(dtype):
    """The torch dtype a safetensors dtype name ('bf16', 'F32', ...) stores."""
    return _DTYPES[st_dtype(dtype)][0]


def _tensor_bytes(tensor, dtype):
    """Raw little-endian bytes of `tensor` converted to safetensors `dtype`."""
    torch_dtype, np_dtype, _ = _DTYPES[dtype]
    t = tensor.detach().to("cpu").contiguous().to(torch_dtype)
    if dtype == "BF16":
        arr = t.view(torch.int16).numpy()
    else:
        arr = t.numpy()
    return np.ascontiguousarray(arr).astype(np_dtype, copy=False).tobytes()


def round_to_dtype(tensor, dtype):
    """The float32 value of `tensor` after rounding to `dtype` (what a loader sees)."""
    torch_dtype = _DTYPES[st_dtype(dtype)][0]
    return tensor.detach().to(torch_dtype).to(torch.float32)


def save_safetensors(path, tensors, dtype="BF16", metadata=None):
    """Writes {name: torch.Tensor} to `path`, every tensor converted to `dtype`.

    `dtype` may also be a dict {name: dtype} for mixed files.
    Returns the number of data bytes written.
    """
    entries = []
    for name, t in tensors.items():
        dt = st_dtype(dtype[name] if isinstance(dtype, dict) else dtype)
        entries.append((name, dt, list(t.shape), t))
    # Largest element size first, then by name: natural alignment for every tensor.
    entries.sort(key=lambda e: (-_DTYPES[e[1]][2], e[0]))

    header = {"__metadata__": dict(metadata or {"format": "pt"})}
    blobs = []
    offset = 0
    for name, dt, shape, t in entries:
        data = _tensor_bytes(t, dt)
        expect = _DTYPES[dt][2] * int(np.prod(shape, dtype=np.int64))
        assert len(data) == expect, (name, len(data), expect)
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)

    header_bytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    header_bytes += b" " * ((8 - (8 + len(header_bytes)) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)))
        f.write(header_bytes)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)
    return offset


def read_safetensors_header(path):
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise ValueError(f"{path}: too short for a safetensors header")
        (n,) = struct.unpack("<Q", raw)
        if n > 100 * 1024 * 1024:
            raise ValueError(f"{path}: header length {n} is implausible")
        header = json.loads(f.read(n).decode("utf-8"))
    return n, header


def load_safetensors(path, as_float32=False):
    """Reads a safetensors file written by anyone; returns ({name: tensor}, metadata).

    Checks the layout strictly (contiguous offsets, sizes matching shapes), so it
    doubles as a validator in tests.  With as_float32 every floating tensor is
    upcast to float32 (exact for F16/BF16).
    """
    n, header = read_safetensors_header(path)
    metadata = header.pop("__metadata__", {})
    with open(path, "rb") as f:
        f.seek(8 + n)
        buf = f.read()
    spans = []
    out = {}
    for name, info in header.items():
        dt = info["dtype"]
        if dt not in _DTYPES:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {dt}")
        torch_dtype, np_dtype, size = _DTYPES[dt]
        begin, end = info["data_offsets"]
        shape = info["shape"]
        count = int(np.prod(shape, dtype=np.int64))
        if end - begin != count * size:
            raise ValueError(f"{path}: tensor {name}: {end - begin} bytes for shape {shape} {dt}")
        if end > len(buf):
            raise ValueError(f"{path}: tensor {name}: data past end of file")
        spans.append((begin, end))
        arr = np.frombuffer(buf, dtype=np_dtype, count=count, offset=begin).reshape(shape)
        t = torch.from_numpy(arr.copy())
        if dt == "BF16":
            t = t.view(torch.bfloat16)
        if as_float32 and t.is_floating_point():
            t = t.to(torch.float32)
        out[name] = t
    spans.sort()
    pos = 0
    for begin, end in spans:
        if begin != pos:
            raise ValueError(f"{path}: hole or overlap in data at byte {pos}")
        pos = end
    if pos != len(buf):
        raise ValueError(f"{path}: {len(buf) - pos} trailing bytes after the last tensor")
    return out, metadata


def save_sharded(model_dir, tensors, dtype="BF16", shards=1, metadata=None):
    """Writes model.safetensors, or N shards plus model.safetensors.index.json.

    Tensors are assigned to shards in HF order (embeddings, layer 0, 1, ...) in
    contiguous runs of roughly equal byte size.  Returns the list of files.
    """
    if shards <= 1:
        path = os.path.join(model_dir, "model.safetensors")
        save_safetensors(path, tensors, dtype, metadata)
        return [path]
    names = sorted(tensors, key=hf_tensor_sort_key)
    sizes = [_DTYPES[st_dtype(dtype)][2] * tensors[n].numel() for n in names]
    total = sum(sizes)
    if shards > len(names):
        raise ValueError(f"{shards} shards for only {len(names)} tensors")
    # Contiguous runs of roughly total/shards bytes; every shard gets a tensor.
    groups = [[]]
    acc = 0
    for i, (name, size) in enumerate(zip(names, sizes)):
        shards_left = shards - len(groups)
        names_left = len(names) - i
        if groups[-1] and shards_left > 0 and (acc >= total * len(groups) / shards
                                               or names_left == shards_left):
            groups.append([])
        groups[-1].append(name)
        acc += size
    assert len(groups) == shards, (len(groups), shards)
    files = []
    weight_map = {}
    for g, group in enumerate(groups):
        fname = f"model-{g + 1:05d}-of-{shards:05d}.safetensors"
        save_safetensors(os.path.join(model_dir, fname), {n: tensors[n] for n in group},
                         dtype, metadata)
        files.append(os.path.join(model_dir, fname))
        for n in group:
            weight_map[n] = fname
    index = {"metadata": {"total_size": total},
             "weight_map": {n: weight_map[n] for n in sorted(weight_map, key=hf_tensor_sort_key)}}
    with open(os.path.join(model_dir, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")
    return files


def load_model_dir_tensors(model_dir, as_float32=True):
    """All tensors of a model directory (single file or sharded)."""
    index_path = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index_path):
        with open(index_path) as f:
            index = json.load(f)
        out = {}
        for fname in sorted(set(index["weight_map"].values())):
            part, _ = load_safetensors(os.path.join(model_dir, fname), as_float32)
            for name in part:
                if index["weight_map"].get(name) != fname:
                    raise ValueError(f"{fname}: tensor {name} not mapped to this shard in the index")
            out.update(part)
        missing = set(index["weight_map"]) - set(out)
        if missing:
            raise ValueError(f"{model_dir}: tensors in the index but in no shard: {sorted(missing)}")
        return out
    out, _ = load_safetensors(os.path.join(model_dir, "model.safetensors"), as_float32)
    return out


# ---------------------------------------------------------------------------
# Hugging Face names and config


def hf_tensor_names(num_layers, tie_word_embeddings, qkv_bias=False):
    """The tensor names of a Llama/Mistral/Qwen2 checkpoint, in HF order."""
    names = ["model.embed_tokens.weight"]
    for i in range(num_layers):
        p = f"model.layers.{i}."
        names += [p + "input_layernorm.weight"]
        for proj in ("q_proj", "k_proj", "v_proj"):
            names.append(p + f"self_attn.{proj}.weight")
            if qkv_bias:
                names.append(p + f"self_attn.{proj}.bias")
        names += [p + "self_attn.o_proj.weight",
                  p + "post_attention_layernorm.weight",
                  p + "mlp.gate_proj.weight",
                  p + "mlp.up_proj.weight",
                  p + "mlp.down_proj.weight"]
    names.append("model.norm.weight")
    if not tie_word_embeddings:
        names.append("lm_head.weight")
    return names


def hf_tensor_shapes(cfg):
    """{name: shape} for a config dict as written by make_hf_config."""
    h = cfg["hidden_size"]
    d = cfg.get("head_dim") or h // cfg["num_attention_heads"]
    nq = cfg["num_attention_heads"] * d
    nkv = cfg["num_key_value_heads"] * d
    inter = cfg["intermediate_size"]
    vocab = cfg["vocab_size"]
    qkv_bias = cfg.get("architectures", [""])[0] == "Qwen2ForCausalLM" or cfg.get("attention_bias", False)
    shapes = {}
    for name in hf_tensor_names(cfg["num_hidden_layers"], cfg["tie_word_embeddings"], qkv_bias):
        leaf = name.split(".")[-2] + "." + name.split(".")[-1]
        shapes[name] = {
            "embed_tokens.weight": [vocab, h],
            "lm_head.weight": [vocab, h],
            "norm.weight": [h],
            "input_layernorm.weight": [h],
            "post_attention_layernorm.weight": [h],
            "q_proj.weight": [nq, h],
            "k_proj.weight": [nkv, h],
            "v_proj.weight": [nkv, h],
            "q_proj.bias": [nq],
            "k_proj.bias": [nkv],
            "v_proj.bias": [nkv],
            "o_proj.weight": [h, nq],
            "gate_proj.weight": [inter, h],
            "up_proj.weight": [inter, h],
            "down_proj.weight": [h, inter],
        }[leaf]
    return shapes


def hf_tensor_sort_key(name):
    parts = name.split(".")
    if name == "model.embed_tokens.weight":
        return (0, 0, 0)
    if parts[:2] == ["model", "layers"]:
        order = ["input_layernorm", "self_attn", "post_attention_layernorm", "mlp"]
        sub = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
        a = order.index(parts[3]) if parts[3] in order else 9
        b = sub.index(parts[4]) if len(parts) > 5 and parts[4] in sub else 0
        return (1, int(parts[2]), a * 100 + b * 2 + (parts[-1] == "bias"))
    if name == "model.norm.weight":
        return (2, 0, 0)
    return (3, 0, 0)


def make_hf_config(*, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
                   num_key_value_heads, head_dim, vocab_size, max_position_embeddings,
                   rms_norm_eps=1e-5, rope_theta=10000.0, rope_scaling=None,
                   tie_word_embeddings=False, bos_token_id=None, eos_token_id=None,
                   torch_dtype="bfloat16", architecture="LlamaForCausalLM",
                   write_head_dim=True, sliding_window=None, max_window_layers=None,
                   config_layout="v4"):
    """A config.json dict for LlamaForCausalLM / MistralForCausalLM / Qwen2ForCausalLM.

    eos_token_id may be an int or a list of ints (Llama 3.x style).
    rope_scaling: None or a dict such as llama3_rope_scaling(), linear_rope_scaling() or
    yarn_rope_scaling().
    config_layout: "v4" writes top-level "rope_theta" and "rope_scaling"; "v5" (transformers
    v5) writes neither but "rope_parameters": the scaling dict with rope_theta inside, or
    {"rope_type": "default", "rope_theta": T} without scaling.
    sliding_window: None or a window size W (Mistral, Qwen2 only).  Mistral writes it as
    "sliding_window" (every layer windowed); Qwen2 writes use_sliding_window true,
    sliding_window W and max_window_layers (layers i >= max_window_layers are windowed).
    max_window_layers: Qwen2 only; default num_hidden_layers (no layer windowed).
    """
    if sliding_window is not None:
        if architecture not in ("MistralForCausalLM", "Qwen2ForCausalLM"):
            raise ValueError(f"sliding_window needs MistralForCausalLM or Qwen2ForCausalLM, "
                             f"not {architecture}")
        if not isinstance(sliding_window, int) or sliding_window < 1:
            raise ValueError(f"sliding_window must be a positive int, not {sliding_window!r}")
    if config_layout not in ("v4", "v5"):
        raise ValueError(f"config_layout must be 'v4' or 'v5', not {config_layout!r}")
    if max_window_layers is not None:
        if architecture != "Qwen2ForCausalLM":
            raise ValueError("max_window_layers is a Qwen2ForCausalLM setting")
        if not isinstance(max_window_layers, int) or max_window_layers < 0:
            raise ValueError(f"max_window_layers must be an int >= 0, not {max_window_layers!r}")
    model_type = {"LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral",
                  "Qwen2ForCausalLM": "qwen2"}[architecture]
    cfg = {
        "architectures": [architecture],
        "model_type": model_type,
        "hidden_size": hidden_size,
        "intermediate_size": intermediate_size,
        "num_hidden_layers": num_hidden_layers,
        "num_attention_heads": num_attention_heads,
        "num_key_value_heads": num_key_value_heads,
    }
    if write_head_dim:
        cfg["head_dim"] = head_dim
    elif head_dim != hidden_size // num_attention_heads:
        raise ValueError("head_dim must be written when it is not hidden_size / num_attention_heads")
    cfg.update({"hidden_act": "silu", "rms_norm_eps": rms_norm_eps})
    if config_layout == "v5":
        params = dict(rope_scaling or {"rope_type": "default"})
        kind = params.pop("rope_type", params.pop("type", "default"))
        cfg["rope_parameters"] = {"rope_type": kind, "rope_theta": rope_theta, **params}
    else:
        cfg.update({"rope_theta": rope_theta, "rope_scaling": rope_scaling})
    cfg.update({
        "max_position_embeddings": max_position_embeddings,
        "vocab_size": vocab_size,
        "tie_word_embeddings": tie_word_embeddings,
        "bos_token_id": bos_token_id,
        "eos_token_id": eos_token_id,
        "torch_dtype": torch_dtype,
        "initializer_range": 0.02,
        "use_cache": True,
    })
    if architecture == "Qwen2ForCausalLM":
        cfg["use_sliding_window"] = sliding_window is not None
        cfg["sliding_window"] = sliding_window
        cfg["max_window_layers"] = (num_hidden_layers if max_window_layers is None
                                    else max_window_layers)
    else:
        cfg["attention_bias"] = False
        cfg["mlp_bias"] = False
    if architecture == "MistralForCausalLM":
        cfg["sliding_window"] = sliding_window
    return cfg


def llama3_rope_scaling(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                        original_max_position_embeddings=8192):
    return {"rope_type": "llama3", "factor": factor, "low_freq_factor": low_freq_factor,
            "high_freq_factor": high_freq_factor,
            "original_max_position_embeddings": original_max_position_embeddings}


def config_rope_scaling(cfg):
    """The rope scaling dict of a config dict (v5 "rope_parameters" or v4 "rope_scaling"),
    None when absent or of type "default"."""
    scaling = cfg.get("rope_parameters") if "rope_parameters" in cfg else cfg.get("rope_scaling")
    if scaling and scaling.get("rope_type", scaling.get("type")) in (None, "default"):
        return None
    return scaling or None


def served_context(cfg):
    """The longest sequence a server takes from the config, as vLLM derives it:
    max_position_embeddings, times the factor for linear rope scaling; for yarn,
    original_max_position_embeddings (else max_position_embeddings) times the factor."""
    n = cfg["max_position_embeddings"]
    scaling = config_rope_scaling(cfg)
    if not scaling:
        return n
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind == "linear":
        return int(n * scaling["factor"])
    if kind == "yarn":
        original = scaling.get("original_max_position_embeddings")
        factor = scaling.get("factor")
        if factor is None:
            factor = n / original
        return int((original or n) * factor)
    return n


def linear_rope_scaling(factor):
    return {"rope_type": "linear", "factor": factor}


def yarn_rope_scaling(factor=None, original_max_position_embeddings=None, **extras):
    """{"rope_type": "yarn", ...} with only the fields given (not None): factor,
    original_max_position_embeddings and extras among attention_factor, mscale,
    mscale_all_dim, beta_fast, beta_slow, truncate."""
    allowed = {"attention_factor", "mscale", "mscale_all_dim", "beta_fast", "beta_slow", "truncate"}
    unknown = set(extras) - allowed
    if unknown:
        raise ValueError(f"unknown yarn fields {sorted(unknown)}")
    out = {"rope_type": "yarn"}
    fields = {"factor": factor,
              "original_max_position_embeddings": original_max_position_embeddings, **extras}
    out.update({k: v for k, v in fields.items() if v is not None})
    if "factor" not in out and "original_max_position_embeddings" not in out:
        raise ValueError("yarn needs a factor or original_max_position_embeddings")
    return out


def write_json(path, obj, indent=2):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=indent, ensure_ascii=False)
        f.write("\n")
    os.replace(tmp, path)


def dir_size(path):
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path)
               if os.path.isfile(os.path.join(path, f)))

