#!/usr/bin/python3
"""Writes the seed corpora of the fuzz targets: tests/fuzz/corpus/<target>/.

Run with Debian's /usr/bin/python3 (python3-protobuf for the proto seeds)
from anywhere; it rewrites the corpus directories it owns and leaves
tests/fuzz/regressions/ alone. The seeds are small real inputs: the demo
model's files, the configs and chat templates the unit tests use, cut-down
copies of the test tokenizers, and a few requests and plans of every shape.

  /usr/bin/python3 tests/fuzz/make_corpus.py
"""

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "corpus")


def out_dir(target):
    d = os.path.join(CORPUS, target)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def write(target, name, data):
    if isinstance(data, str):
        data = data.encode("utf-8")
    with open(os.path.join(CORPUS, target, name), "wb") as f:
        f.write(data)


def read(rel, mode="r"):
    with open(os.path.join(ROOT, rel), mode) as f:
        return f.read()


def raw_strings(rel):
    """name -> text of the `constexpr char kName[] = R"(...)";` of a test file."""
    text = read(rel)
    return dict(re.findall(r'constexpr char (k\w+)\[\] = R"\((.*?)\)";', text, re.S))


# --- safetensors_header ------------------------------------------------------

def safetensors(tensors, metadata=None, pad_to=None):
    header = {}
    data = b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, payload in tensors:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(payload)]}
        data += payload
    h = json.dumps(header, separators=(",", ":")).encode()
    if pad_to:
        h += b" " * (-len(h) % pad_to)
    return struct.pack("<Q", len(h)) + h + data


def make_safetensors():
    t = "safetensors_header"
    out_dir(t)
    write(t, "small.safetensors", safetensors(
        [("model.embed_tokens.weight", "F32", [2, 3], struct.pack("<6f", *range(6))),
         ("model.norm.weight", "BF16", [3], b"\x80\x3f" * 3),
         ("lm_head.weight", "F16", [1, 2], b"\x00\x3c" * 2)],
        metadata={"format": "pt"}, pad_to=8))
    write(t, "scalar_empty.safetensors", safetensors(
        [("scalar", "F32", [], b"\x00\x00\x80\x3f"), ("empty", "F16", [0, 4], b"")]))
    write(t, "empty_header.safetensors", safetensors([]))
    # The demo model's real header (its tensors' bytes left out, so the
    # offsets run past the end: an error path with a real-sized header).
    with open(os.path.join(ROOT, "models/folio-demo/model.safetensors"), "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        write(t, "demo_header_only.safetensors", struct.pack("<Q", n) + f.read(n))


# --- model_config / generation_config -----------------------------------------

def make_configs():
    t = "model_config"
    out_dir(t)
    write(t, "folio_demo.json", read("models/folio-demo/config.json"))
    for name, text in raw_strings("tests/common/model_config_test.cc").items():
        write(t, name[1:].lower() + ".json", text)
    base = json.loads(raw_strings("tests/common/model_config_test.cc")["kMinimal"])
    variants = {
        "yarn": {"rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                  "original_max_position_embeddings": 32768,
                                  "beta_fast": 32, "beta_slow": 1, "mscale": 1.0}},
        "linear": {"rope_scaling": {"type": "linear", "factor": 2.0}},
        "dynamic": {"rope_scaling": {"type": "dynamic", "factor": 2.0}},
        "rope_parameters_v5": {"rope_parameters": {"rope_type": "default", "rope_theta": 1e6}},
        "qwen2_layer_types": {"architectures": ["Qwen2ForCausalLM"], "use_sliding_window": True,
                              "sliding_window": 128,
                              "layer_types": ["full_attention", "sliding_attention"]},
        "model_type_only": {"architectures": None, "model_type": "mistral", "sliding_window": None,
                            "dtype": "float16", "eos_token_id": [1, 2]},
    }
    for name, patch in variants.items():
        c = dict(base)
        c.update(patch)
        if c.get("architectures") is None:
            c.pop("architectures")
        write(t, name + ".json", json.dumps(c, indent=1))

    t = "generation_config"
    out_dir(t)
    for name, text in raw_strings("tests/common/generation_defaults_test.cc").items():
        write(t, name[1:].lower() + ".json", text)
    write(t, "qwen2_5.json", json.dumps({
        "bos_token_id": 151643, "pad_token_id": 151643, "do_sample": True,
        "eos_token_id": [151645, 151643], "repetition_penalty": 1.05, "temperature": 0.7,
        "top_p": 0.8, "top_k": 20, "transformers_version": "4.37.0"}, indent=2))
    write(t, "greedy_max_new_tokens.json", json.dumps(
        {"temperature": 0, "max_new_tokens": 256, "min_p": 0.05, "eos_token_id": 2}))
    write(t, "hf_defaults_null.json", json.dumps(
        {"temperature": 1.0, "top_p": 1.0, "top_k": 50, "repetition_penalty": None}))


# --- tokenizers ------------------------------------------------------------------

def spell(raw):
    """GPT-2's byte -> unicode spelling."""
    printable = [b for b in range(256)
                 if ord("!") <= b <= ord("~") or 0xA1 <= b <= 0xAC or b >= 0xAE]
    table, n = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + n)
            n += 1
    return "".join(table[b] for b in raw)


def added(i, content, special=True, normalized=False, lstrip=False, rstrip=False, single_word=False):
    return {"id": i, "content": content, "single_word": single_word, "lstrip": lstrip,
            "rstrip": rstrip, "normalized": normalized, "special": special}


def byte_level_tokenizer(merges, added_tokens, pre_tokenizer, normalizer=None,
                         ignore_merges=False, post_processor=None, pairs=False):
    vocab = {spell(bytes([b])): b for b in range(256)}
    nxt = 256
    ms = []
    for a, b in merges:
        merged = spell(a + b)
        if merged not in vocab:
            vocab[merged] = nxt
            nxt += 1
        ms.append([spell(a), spell(b)] if pairs else spell(a) + " " + spell(b))
    return {"version": "1.0", "truncation": None, "padding": None,
            "added_tokens": [added(nxt + i, c, **kw) for i, (c, kw) in enumerate(added_tokens)],
            "normalizer": normalizer, "pre_tokenizer": pre_tokenizer,
            "post_processor": post_processor,
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                        "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None,
                      "continuing_subword_prefix": None, "end_of_word_suffix": None,
                      "fuse_unk": False, "byte_fallback": False, "ignore_merges": ignore_merges,
                      "vocab": vocab, "merges": ms}}


# Raw bytes; each merge's parts are single bytes or earlier merges' results.
MERGES = [(b"t", b"h"), (b"th", b"e"), (b" ", b"t"), (b" t", b"h"), (b" th", b"e"),
          (b"i", b"n"), (b" ", b"a"), (b"e", b"r"), (b"o", b"n"), (b"r", b"e"), (b" ", b"w"),
          (b"l", b"l"), (b"h", b"e"), (b"he", b"ll"), (b"hell", b"o"), (b"1", b"2"),
          (b"\xc3", b"\xa9"), (b"\xe6", b"\x97")]


def cut_spm(rel, keep):
    """The SentencePiece-style test tokenizer cut to its special, byte and
    one-character tokens plus its first `keep` pieces, with the merges among
    those."""
    j = json.loads(read(rel))
    vocab = j["model"]["vocab"]
    items = sorted(vocab.items(), key=lambda kv: kv[1])
    kept = {}
    for piece, i in items:
        if (i < 3 or re.fullmatch(r"<0x[0-9A-F]{2}>", piece) or len(piece) == 1
                or len(kept) < 259 + keep):
            kept[piece] = len(kept)
    merges = []
    for m in j["model"]["merges"]:
        a, b = m.split(" ") if isinstance(m, str) else m
        if a in kept and b in kept and a + b in kept:
            merges.append(m)
    j["model"]["vocab"] = kept
    j["model"]["merges"] = merges
    for t in j["added_tokens"]:
        t["id"] = kept[t["content"]]
    pp = j.get("post_processor") or {}
    for st in (pp.get("special_tokens") or {}).values():
        st["ids"] = [kept[x] for x in st["tokens"]]
    return j


def make_tokenizers():
    t = "tokenizer_json"
    out_dir(t)
    gpt2 = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    llama3_split = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex":
            r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"},
         "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
    bos_template = {"type": "TemplateProcessing",
                    "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                               {"Sequence": {"id": "A", "type_id": 0}}],
                    "pair": [], "special_tokens": {"<|begin_of_text|>": {
                        "id": "<|begin_of_text|>", "ids": [271], "tokens": ["<|begin_of_text|>"]}}}
    specials = [("<|endoftext|>", {}), ("<|begin_of_text|>", {}),
                ("<|im_start|>", {"lstrip": True}), ("[word]", {"special": False, "single_word": True})]
    write(t, "gpt2_bytelevel.json", json.dumps(
        byte_level_tokenizer(MERGES, specials[:1], gpt2), ensure_ascii=False))
    tok = byte_level_tokenizer(MERGES, specials, llama3_split, ignore_merges=True, pairs=True)
    tok["added_tokens"][1]["id"] = 271
    write(t, "llama3_style.json", json.dumps(dict(tok, post_processor=bos_template), ensure_ascii=False))
    write(t, "qwen2_nfc_digits.json", json.dumps(byte_level_tokenizer(
        MERGES, specials[:3], {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True},
            {"type": "Split", "pattern": {"String": "\n"}, "behavior": "Removed", "invert": False},
            gpt2]}, normalizer={"type": "NFC"}), ensure_ascii=False))
    write(t, "spm_legacy_small.json", json.dumps(
        cut_spm("tests/tokenizer/testdata/spm_legacy/tokenizer.json", 60), ensure_ascii=False))
    write(t, "spm_metaspace_small.json", json.dumps(
        cut_spm("tests/tokenizer/testdata/spm_metaspace/tokenizer.json", 60), ensure_ascii=False))
    write(t, "spm_metaspace_split_small.json", json.dumps(
        cut_spm("tests/tokenizer/testdata/spm_metaspace_split/tokenizer.json", 40), ensure_ascii=False))

    t = "tokenizer_roundtrip"
    out_dir(t)
    texts = [
        "Hello, world! The quick brown fox jumps over the lazy dog.",
        "  spaces\tand\nnewlines\r\n  ",
        "caf\u00e9 na\u00efve \u65e5\u672c\u8a9e \U0001F600 e\u0301",
        "<|begin_of_text|>Question: what?<|end_of_text|> <s>[INST] hi [/INST]</s>",
        "1234567890 3.14 it's we'll they'd",
    ]
    for k, name in enumerate(["demo", "spm_legacy", "spm_metaspace", "spm_metaspace_split"]):
        for i, text in enumerate(texts):
            write(t, f"{name}_{i}.txt", bytes([k]) + text.encode())
    write(t, "demo_invalid_utf8.bin", b"\x00abc\xff\xfe\xc3(\xed\xa0\x80 \xf0\x9f\x98")
    write(t, "spm_invalid_utf8.bin", b"\x01abc\xff\xfe\xc3(\xed\xa0\x80 \xf0\x9f\x98")


# --- chat templates and HTTP bodies -------------------------------------------------

def make_chat():
    t = "chat_template"
    out_dir(t)
    src = os.path.join(ROOT, "tests/common/chat_templates")
    for name in sorted(os.listdir(src)):
        if name.endswith(".jinja"):
            shutil.copy(os.path.join(src, name), os.path.join(CORPUS, t, name))
    demo = json.loads(read("models/folio-demo/tokenizer_config.json"))
    write(t, "folio-demo.jinja", demo["chat_template"])
    write(t, "expressions.jinja",
          "{% set ns = namespace(n=0) %}{% for m in messages | selectattr('role', 'equalto', 'user') %}"
          "{% set ns.n = ns.n + 1 %}{{ loop.index }}:{{ m.content | string | upper | truncate(20) }}"
          "{% endfor %}{{ ns.n * 2 ** 3 // 3 % 5 }}{{ tools | tojson }}{{ '%s-%d' % ('a', 1) }}"
          "{{ messages[0]['content'][1:5] ~ (messages | length) }}{% macro f(x, y=2) %}{{ x + y }}"
          "{% endmacro %}{{ f(1) }}{{ raise_exception('stop') if false }}{{ strftime_now('%Y') }}")

    t = "openai_request"
    out_dir(t)
    convs = json.loads(read("tests/common/chat_templates/conversations.json"))
    for c in convs[:6]:
        write(t, "chat_" + c["name"] + ".json",
              json.dumps({"model": "folio-demo", "messages": c["messages"], "max_tokens": 16}))
    write(t, "chat_options.json", json.dumps({
        "messages": [{"role": "system", "content": "Be brief."},
                     {"role": "user", "content": [{"type": "text", "text": "Hi"},
                                                  {"type": "text", "text": "there"}]},
                     {"role": "assistant", "content": "Answer: hello"}],
        "continue_final_message": True, "add_generation_prompt": False, "stream": True,
        "stream_options": {"include_usage": True}, "logprobs": True, "top_logprobs": 3,
        "temperature": 0.7, "top_p": 0.9, "seed": 7, "stop": ["\n"], "n": 2,
        "chat_template_kwargs": {"enable_thinking": False}, "max_completion_tokens": 20}))
    write(t, "chat_tools_none.json", json.dumps({
        "messages": [{"role": "user", "content": "weather?"}], "tool_choice": "none",
        "tools": [{"type": "function", "function": {"name": "w", "parameters": {}}}]}))
    write(t, "completion_text.json", json.dumps({
        "model": "folio-demo", "prompt": "Question: what is a block table?", "max_tokens": 8,
        "temperature": 0, "logit_bias": {"5": -100, "17": 2.5}, "bad_words": ["the"],
        "stop_token_ids": [2047], "allowed_token_ids": [1, 2, 3, 2047], "min_tokens": 1}))
    write(t, "completion_batch.json", json.dumps({
        "prompt": ["a", "b c", [1, 2, 3]], "echo": True, "logprobs": 2, "best_of": 3, "n": 2,
        "top_k": -1, "min_p": 0.1, "repetition_penalty": 1.1, "presence_penalty": 0.5,
        "frequency_penalty": -0.5, "truncate_prompt_tokens": 4, "prompt_logprobs": 1,
        "skip_special_tokens": False, "include_stop_str_in_output": True, "priority": 0,
        "cache_salt": "s", "request_id": "req-1", "user": "u", "ignore_eos": True}))
    write(t, "completion_ids.json", json.dumps({"prompt": [2046, 10, 20, 30], "max_tokens": 1}))
    write(t, "completion_refused.json", json.dumps({
        "prompt": "x", "suffix": "y", "response_format": {"type": "json_object"}}))


# --- protos ------------------------------------------------------------------------

def make_protos():
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(["protoc", "--proto_path=" + os.path.join(ROOT, "proto"), "--python_out=" + d,
                        "folio/v1/generation.proto", "folio/v1/worker.proto"], check=True)
        sys.path.insert(0, d)
        from folio.v1 import generation_pb2, worker_pb2  # noqa: E402

        t = "generate_request"
        out_dir(t)
        r = generation_pb2.GenerateRequest(text="Question: what is paged attention?")
        r.sampling_params.max_tokens = 16
        write(t, "text.pb", r.SerializeToString())
        r = generation_pb2.GenerateRequest(request_id="r1")
        r.token_ids.ids.extend([2046, 5, 6, 7, 8])
        sp = r.sampling_params
        sp.temperature, sp.top_p, sp.top_k, sp.min_p = 0.8, 0.95, 40, 0.05
        sp.repetition_penalty, sp.presence_penalty, sp.frequency_penalty = 1.1, 0.2, -0.2
        sp.seed, sp.n, sp.best_of, sp.max_tokens, sp.min_tokens = 42, 2, 3, 32, 2
        sp.stop.extend(["\n\n", "Question:"])
        sp.stop_token_ids.append(2047)
        sp.logit_bias[10] = 5.0
        sp.logit_bias[11] = -100.0
        sp.allowed_token_ids.extend([5, 6, 7, 2047])
        sp.bad_words.extend(["block", " table"])
        sp.logprobs, sp.prompt_logprobs, sp.skip_special_tokens = 2, 1, False
        sp.truncate_prompt_tokens, sp.cache_salt, sp.include_stop_str_in_output = 3, "salt", True
        write(t, "token_ids_all_fields.pb", r.SerializeToString())
        r = generation_pb2.GenerateRequest(text="beam me up")
        r.sampling_params.beam_width, r.sampling_params.n = 4, 2
        r.sampling_params.length_penalty = 0.8
        r.sampling_params.ignore_eos = True
        r.sampling_params.priority = 0
        write(t, "beam.pb", r.SerializeToString())

        t = "step_plan"
        out_dir(t)
        p = worker_pb2.StepPlan(step_id=1)
        n = p.new_sequences.add(seq_id=3, request_id=1, sequence_index=0, num_computed_tokens=0)
        n.prompt_token_ids.extend(range(1, 21))
        n.block_ids.extend([0, 1])
        s = n.sampling
        s.temperature, s.top_p, s.repetition_penalty = 0.7, 0.9, 1.0
        s.n, s.best_of, s.beam_width, s.max_tokens, s.length_penalty = 1, 1, 1, 16, 1.0
        s.stop_token_ids.append(2047)
        s.end_token_ids.append(2047)
        s.logit_bias_tokens.append(5)
        s.logit_bias_values.append(1.5)
        s.bad_words.add().ids.extend([9, 10])
        w = p.scheduled.add(seq_id=3, start_position=0, sample_mode=1, num_samples=1,
                            prompt_logprobs=True)
        w.token_ids.extend(range(1, 21))
        p.num_scheduled_tokens = 20
        write(t, "prefill.pb", p.SerializeToString())
        p = worker_pb2.StepPlan(step_id=2, num_scheduled_tokens=1)
        n = p.new_sequences.add(seq_id=3, request_id=1, sequence_index=1, num_computed_tokens=31)
        n.prompt_token_ids.extend(range(1, 21))
        n.output_token_ids.extend(range(100, 111))
        n.block_ids.extend([0, 1])
        n.sampling.CopyFrom(s)
        n.sampling.beam_width, n.sampling.n, n.sampling.best_of = 4, 1, 1
        c = p.cached_sequences.add(seq_id=3, block_table_offset=2, num_computed_tokens=31)
        c.block_ids.append(5)
        p.scheduled.add(seq_id=3, start_position=31, sample_mode=2, num_samples=4).token_ids.append(77)
        p.swap_out.add(src=1, dst=0)
        p.swap_in.add(src=2, dst=7)
        p.copies.add(src=5, dst=6)
        p.finished_seq_ids.append(1)
        p.preempted_seq_ids.append(2)
        write(t, "decode_diff_cache_ops.pb", p.SerializeToString())
        res = worker_pb2.StepResult(step_id=2, rank=0, forward_seconds=0.01)
        sm = res.samples.add(seq_id=3)
        tok = sm.tokens.add(token_id=77, logprob=-0.5)
        tok.top_logprobs.add(token_id=78, logprob=-1.5)
        pl = res.prompt_logprobs.add(seq_id=3, first_index=1)
        pl.tokens.add(token_id=2, logprob=-2.0)
        res.status.code = 3
        res.status.message = "bad plan"
        write(t, "step_result.pb", res.SerializeToString())


def main():
    make_safetensors()
    make_configs()
    make_tokenizers()
    make_chat()
    make_protos()
    total = 0
    for target in sorted(os.listdir(CORPUS)):
        files = os.listdir(os.path.join(CORPUS, target))
        size = sum(os.path.getsize(os.path.join(CORPUS, target, f)) for f in files)
        total += size
        print(f"{target}: {len(files)} seeds, {size} bytes")
    print(f"total: {total} bytes")


if __name__ == "__main__":
    main()
