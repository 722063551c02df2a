#!/usr/bin/env python3
"""Writes the SentencePiece-style BPE tokenizer fixtures in tests/tokenizer/testdata/.

    apt-get install -y python3-sentencepiece bible-kjv-text nodejs npm
    mkdir -p /tmp/spm && (cd /tmp/spm && npm init -y && \\
        npm install tokenizers@0.23.2 @huggingface/transformers@3.8.1 --ignore-scripts)
    /usr/bin/python3 tools/make_spm_tokenizer_fixture.py              # reuse the committed model
    /usr/bin/python3 tools/make_spm_tokenizer_fixture.py --retrain    # train it again first

Needs Debian's python3-sentencepiece (run with /usr/bin/python3), and, for the
expectations, node with the npm packages `tokenizers` (Hugging Face's own Node
binding of the Rust `tokenizers` library, prebuilt binaries inside the npm package)
and `@huggingface/transformers` installed in --workdir (default /tmp/spm), never in
the repository. No network at test time: everything the C++ tests read is committed.

What it does:
  1. Trains (with --retrain, or when the model file is missing) a SentencePiece BPE
     model the way Llama 2's was configured (vocab 800, byte_fallback, split_digits,
     add_dummy_prefix, remove_extra_whitespaces off, the "identity" normalization,
     allow_whitespace_only_pieces, character_coverage 0.99999 (Llama: 0.99995); <unk> 0, <s> 1, </s> 2,
     the 256 byte pieces <0x00>..<0xFF> at 3..258) on the KJV (bible-kjv-text) plus
     a small deterministic supplement: every 10th verse with its reference (so there
     are digits; the KJV has none), every 20th indented by four spaces (so there are
     whitespace-only pieces), and some verses with an accented word (é, ï, ü, ñ, ç ...
     are then in the vocab; 'ß', 'Å' and the KJV's 5 'Q's are too rare for the
     coverage and fall back to bytes). The model is kept as testdata/spm_bpe800.model.
  2. Converts it to tokenizer.json as transformers' LlamaConverter does (vocab
     piece -> id, scores of the first three set to 0; merges by SentencePieceExtractor:
     every split of every piece into two vocab pieces, ordered by the piece's score,
     descending, then by (id(left), id(right)); BPE with unk "<unk>", fuse_unk,
     byte_fallback; <unk>, <s>, </s> as special added tokens, normalized false), in
     three layouts, each in its own folder with a tokenizer_config.json:
       spm_legacy           Llama 2 / TinyLlama (legacy=True): normalizer
                            Sequence[Prepend "▁", Replace " " -> "▁"], no pre-tokenizer,
                            decoder Sequence[Replace "▁" -> " ", ByteFallback, Fuse,
                            Strip(" ", 1, 0)], TemplateProcessing "<s> $A". Merges
                            written as "left right" strings (as those files have them).
       spm_metaspace        LlamaConverter with legacy=False (Mistral v0.3): no
                            normalizer, pre-tokenizer Metaspace(prepend_scheme "first",
                            split false), the same decoder and post-processor. Merges
                            written as ["left", "right"] pairs (tokenizers >= 0.20).
       spm_metaspace_split  synthetic: pre-tokenizer Metaspace("always", split true),
                            decoder Sequence[Metaspace("always", split true),
                            ByteFallback, Fuse], no post-processor; pair merges.
  3. Writes the test inputs to <workdir>/cases.json and runs
     tests/tokenizer/testdata/make_expectations.mjs (copied into the workdir so that
     its imports resolve there), which writes <variant>/expected.json:
       {"reference": ..., "encode": [{"text", "ids", "tokens"}...],
        "decode": [{"ids", "skip_special_tokens", "text"}...], ...}
     from the Rust `tokenizers` binding: encode(text, add_special_tokens=false) and
     decode(ids, skip_special_tokens) for every test string's ids and for hand-picked
     id lists. transformers.js runs the same cases; where it disagrees with the Rust
     library the entry is listed under "transformers_js_differs" (it is not the
     reference: it ignores Metaspace's split and strips only one leading space in the
     Metaspace decoder).
  4. Adds sentencepiece's own encode(text) ids ("sentencepiece_ids", informational)
     to spm_legacy/expected.json and prints how many test strings differ.
"""

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTDATA = os.path.join(REPO, "tests", "tokenizer", "testdata")
MODEL_FILE = os.path.join(TESTDATA, "spm_bpe800.model")
MJS = os.path.join(TESTDATA, "make_expectations.mjs")
SPIECE = "\u2581"
VOCAB_SIZE = 800

# ---------------------------------------------------------------------------
# Test inputs

ENCODE_TEXTS = [
    # plain KJV
    "In the beginning God created the heaven and the earth.",
    "And God said, Let there be light: and there was light.",
    "Jesus wept.",
    "The LORD is my shepherd; I shall not want.",
    "For God so loved the world, that he gave his only begotten Son, that whosoever "
    "believeth in him should not perish, but have everlasting life.",
    "AND THE LORD SPAKE UNTO MOSES",
    # single words
    "Hello",
    "hello",
    "the",
    "a",
    # empty and whitespace
    "",
    " ",
    "   ",
    " leading space",
    "   three leading spaces",
    "trailing space ",
    "trailing spaces   ",
    "multiple   spaces    between  words",
    "    indented like the training text",
    # newlines and tabs
    "line one\nline two",
    "\n",
    "ends with a newline\n",
    "\n\nblank lines\n\n",
    "tab\tseparated\tvalues",
    "\tstarts with a tab",
    " \n \t mixed",
    "windows\r\nline end",
    # digits and punctuation
    "Genesis 1:1 and 31102 verses; 2024-06-30",
    "3.14159 and 1,000,000",
    "Hello, world! (Really?) Yes... 'single' \"double\" -- dash; colon: [x] {y} #@$%^&*_+=|~`",
    # non-ASCII in the vocab, and characters that fall back to bytes
    "café naïve über señor façade",
    "Zürich résumé",
    "Quite a Quiet Queen",  # 'Q' is below the character coverage
    "Straße and Ångström",
    "日本語のテキスト",
    "emoji 😀 here 🙏🏽",
    "\u00a0non-breaking\u00a0space",
    "e\u0301 combining accent",
    "\u0000nul and \u007f del",
    # the space character itself and byte-token look-alikes
    SPIECE,
    SPIECE + "the " + SPIECE + SPIECE + "x",
    "<0x41> is not a byte token in text",
    # added tokens inside text
    "<s>",
    "</s>",
    "<unk>",
    "<s>Hello",
    "<s> Hello",
    "Hello<s>world",
    "Hello <s> world",
    "Hello</s>",
    "a</s><s>b",
    " <s>x",
    "<s>\n",
    "<s>   spaces after",
    "<s",
    "</s >",
]


def hand_picked_decodes(pid):
    """Id lists for decode, by piece; pid(piece) -> id (None if not in the vocab)."""
    b = lambda v: f"<0x{v:02X}>"  # noqa: E731
    lists = [
        ("empty", []),
        ("é as two byte tokens", [b(0xC3), b(0xA9)]),
        ("日 as three byte tokens", [b(0xE6), b(0x97), b(0xA5)]),
        ("😀 as four byte tokens", [b(0xF0), b(0x9F), b(0x98), b(0x80)]),
        ("truncated UTF-8: 2 of 3 bytes", [b(0xE6), b(0x97)]),
        ("valid é then a stray lead byte, one run", [b(0xC3), b(0xA9), b(0xE6)]),
        ("lone continuation byte", [b(0x80)]),
        ("byte run split by a token", [b(0xC3), SPIECE + "the", b(0xA9)]),
        ("newline byte then ▁the", [b(0x0A), SPIECE + "the"]),
        ("lone ▁", [SPIECE]),
        ("two ▁ tokens", [SPIECE, SPIECE]),
        ("▁the: one leading space stripped", [SPIECE + "the"]),
        ("▁the ▁LORD", [SPIECE + "the", SPIECE + "L", "ORD"]),
        ("▁▁ th e", [SPIECE * 2, "th", "e"]),
        ("▁▁▁▁ then ▁the", [SPIECE * 4, SPIECE + "the"]),
        ("▁ then ▁the", [SPIECE, SPIECE + "the"]),
        ("<s> ▁the", ["<s>", SPIECE + "the"]),
        ("<s> ▁▁ th e", ["<s>", SPIECE * 2, "th", "e"]),
        ("</s> alone", ["</s>"]),
        ("<unk> alone", ["<unk>"]),
        ("<unk> between words", [SPIECE + "the", "<unk>", SPIECE + "the"]),
        ("▁the </s> <s> ▁the", [SPIECE + "the", "</s>", "<s>", SPIECE + "the"]),
        ("byte tokens first, then <s>", [b(0x20), b(0x41), "<s>"]),
        ("<0x20> byte token, a space", [b(0x20), "th", "e"]),
        ("th e ▁LORD, no ▁ first", ["th", "e", SPIECE + "LORD"]),
    ]
    out = []
    for name, pieces in lists:
        ids = [pid(p) for p in pieces]
        if any(i is None for i in ids):
            print(f"note: decode case {name!r} skipped, a piece is not in the vocab: "
                  f"{[p for p, i in zip(pieces, ids) if i is None]}", file=sys.stderr)
            continue
        out.append({"name": name, "ids": ids})
    return out


# ---------------------------------------------------------------------------
# Corpus and training


def training_lines():
    sys.path.insert(0, os.path.join(REPO, "tools"))
    import train_demo_model  # noqa: E402  (imports torch; only its KJV reader is used)

    verses = []  # (reference, text)
    for line in train_demo_model.load_kjv_raw().split("\n"):
        m = re.match(r"^([1-3]?[A-Za-z]+)(\d+:\d+) (.*)$", line)
        if m:
            verses.append((m.group(1) + " " + m.group(2),
                           re.sub(r"\s+", " ", m.group(3)).strip()))
    lines = [text for _, text in verses]
    lines += [f"{ref} {text}" for ref, text in verses[::10]]
    lines += ["    " + text for _, text in verses[5::20]]
    rng = random.Random(2024)
    common = ["café", "naïve", "über", "señor", "façade", "Zürich", "résumé", "crème",
              "brûlée", "jalapeño", "coöperate", "São"]
    for i in range(1200):
        words = verses[(i * 37) % len(verses)][1].split(" ")
        words.insert(rng.randrange(len(words) + 1), rng.choice(common))
        lines.append(" ".join(words))
    lines += ["Ångström measured the Straße."] * 2
    return lines


def train(workdir):
    import sentencepiece as spm

    corpus = os.path.join(workdir, "spm_corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write("\n".join(training_lines()) + "\n")
    prefix = os.path.join(workdir, "spm_bpe800")
    spm.SentencePieceTrainer.train(
        input=corpus, model_prefix=prefix, model_type="bpe", vocab_size=VOCAB_SIZE,
        character_coverage=0.99999, byte_fallback=True, split_digits=True,
        add_dummy_prefix=True, remove_extra_whitespaces=False,
        normalization_rule_name="identity", allow_whitespace_only_pieces=True,
        split_by_unicode_script=True, split_by_number=True, split_by_whitespace=True,
        treat_whitespace_as_suffix=False, max_sentence_length=4192,
        shuffle_input_sentence=False, input_sentence_size=0, num_threads=4,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        unk_piece="<unk>", bos_piece="<s>", eos_piece="</s>", minloglevel=2)
    os.makedirs(TESTDATA, exist_ok=True)
    shutil.copyfile(prefix + ".model", MODEL_FILE)


# ---------------------------------------------------------------------------
# Conversion (transformers' LlamaConverter / SpmConverter / SentencePieceExtractor)


def load_sp(path):
    import sentencepiece as spm

    return spm.SentencePieceProcessor(model_file=path)


def convert_vocab(sp):
    n = sp.get_piece_size()
    assert sp.id_to_piece(0) == "<unk>" and sp.id_to_piece(1) == "<s>" and sp.id_to_piece(2) == "</s>"
    for i in range(256):
        assert sp.id_to_piece(3 + i) == f"<0x{i:02X}>" and sp.is_byte(3 + i), i
    # LlamaConverter.vocab: the first three with score 0.0, then (piece, score).
    vocab_scores = [(sp.id_to_piece(i), 0.0) for i in range(3)]
    vocab_scores += [(sp.id_to_piece(i), sp.get_score(i)) for i in range(3, n)]
    return vocab_scores


def generate_merges(vocab, vocab_scores):
    """transformers.convert_slow_tokenizer.generate_merges, with vocab_scores given."""
    scores = dict(vocab_scores)
    merges = []
    for merge, piece_score in scores.items():
        local = []
        for index in range(1, len(merge)):
            piece_l, piece_r = merge[:index], merge[index:]
            if piece_l in vocab and piece_r in vocab:
                local.append((piece_l, piece_r, piece_score))
        local = sorted(local, key=lambda x: (vocab[x[0]], vocab[x[1]]))
        merges.extend(local)
    merges = sorted(merges, key=lambda val: val[2], reverse=True)
    return [(val[0], val[1]) for val in merges]


def added_token(i, content):
    return {"id": i, "content": content, "single_word": False, "lstrip": False,
            "rstrip": False, "normalized": False, "special": True}


LLAMA_POST_PROCESSOR = {  # LlamaTokenizerFast.update_post_processor, add_bos_token=True
    "type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
               {"Sequence": {"id": "A", "type_id": 0}}],
    "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
             {"Sequence": {"id": "A", "type_id": 0}},
             {"SpecialToken": {"id": "<s>", "type_id": 1}},
             {"Sequence": {"id": "B", "type_id": 1}}],
    "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}},
}

LLAMA_DECODER = {
    "type": "Sequence",
    "decoders": [
        {"type": "Replace", "pattern": {"String": SPIECE}, "content": " "},
        {"type": "ByteFallback"},
        {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0},
    ],
}

VARIANTS = {
    "spm_legacy": {
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": SPIECE},
            {"type": "Replace", "pattern": {"String": " "}, "content": SPIECE}]},
        "pre_tokenizer": None,
        "post_processor": LLAMA_POST_PROCESSOR,
        "decoder": LLAMA_DECODER,
        "merges_as_pairs": False,
        "legacy": True,
    },
    "spm_metaspace": {
        "normalizer": None,
        "pre_tokenizer": {"type": "Metaspace", "replacement": SPIECE,
                          "prepend_scheme": "first", "split": False},
        "post_processor": LLAMA_POST_PROCESSOR,
        "decoder": LLAMA_DECODER,
        "merges_as_pairs": True,
        "legacy": False,
    },
    "spm_metaspace_split": {
        "normalizer": None,
        "pre_tokenizer": {"type": "Metaspace", "replacement": SPIECE,
                          "prepend_scheme": "always", "split": True},
        "post_processor": None,
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Metaspace", "replacement": SPIECE, "prepend_scheme": "always",
             "split": True},
            {"type": "ByteFallback"},
            {"type": "Fuse"}]},
        "merges_as_pairs": True,
        "legacy": False,
    },
}


def dumps(value):
    return json.dumps(value, ensure_ascii=False)


def tokenizer_json_text(variant, vocab, merges):
    """tokenizer.json in tokenizers' key order; one vocab entry / merge per line."""
    spec = VARIANTS[variant]
    head = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [added_token(0, "<unk>"), added_token(1, "<s>"), added_token(2, "</s>")],
        "normalizer": spec["normalizer"],
        "pre_tokenizer": spec["pre_tokenizer"],
        "post_processor": spec["post_processor"],
        "decoder": spec["decoder"],
    }
    model_head = {"type": "BPE", "dropout": None, "unk_token": "<unk>",
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": True, "byte_fallback": True, "ignore_merges": False}
    out = ["{"]
    for k, v in head.items():
        out.append(f"  {dumps(k)}: {json.dumps(v, ensure_ascii=False, indent=2)}"
                   .replace("\n", "\n  ") + ",")
    out.append('  "model": {')
    for k, v in model_head.items():
        out.append(f"    {dumps(k)}: {dumps(v)},")
    out.append('    "vocab": {')
    items = sorted(vocab.items(), key=lambda kv: kv[1])
    out += [f"      {dumps(p)}: {i}" + ("," if n + 1 < len(items) else "")
            for n, (p, i) in enumerate(items)]
    out.append("    },")
    out.append('    "merges": [')
    for n, (left, right) in enumerate(merges):
        m = dumps([left, right]) if spec["merges_as_pairs"] else dumps(f"{left} {right}")
        out.append(f"      {m}" + ("," if n + 1 < len(merges) else ""))
    out.append("    ]")
    out.append("  }")
    out.append("}")
    return "\n".join(out) + "\n"


def tokenizer_config(variant):
    return {
        "add_bos_token": True,
        "add_eos_token": False,
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "pad_token": None,
        "clean_up_tokenization_spaces": False,
        "legacy": VARIANTS[variant]["legacy"],
        "model_max_length": 2048,
        "tokenizer_class": "LlamaTokenizer",
    }


def write_variants(sp):
    vocab_scores = convert_vocab(sp)
    vocab = {p: i for i, (p, _) in enumerate(vocab_scores)}
    assert len(vocab) == len(vocab_scores)
    merges = generate_merges(vocab, vocab_scores)
    # The brief's description (merged piece's id, then the pair's ids) orders them the
    # same way whenever scores fall strictly with the id; say so when they do not.
    by_id = sorted(merges, key=lambda m: (vocab[m[0] + m[1]], vocab[m[0]], vocab[m[1]]))
    if by_id != merges:
        print("note: merges ordered by score differ from the order by merged id",
              file=sys.stderr)
    for variant in VARIANTS:
        d = os.path.join(TESTDATA, variant)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
            f.write(tokenizer_json_text(variant, vocab, merges))
        with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            f.write(json.dumps(tokenizer_config(variant), ensure_ascii=False, indent=2) + "\n")
    return vocab, merges


# ---------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", default="/tmp/spm",
                    help="scratch folder holding node_modules (default /tmp/spm)")
    ap.add_argument("--retrain", action="store_true",
                    help="train the SentencePiece model again (else reuse spm_bpe800.model)")
    ap.add_argument("--node", default="node")
    ap.add_argument("--skip-expectations", action="store_true",
                    help="only write the tokenizer files")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)

    if args.retrain or not os.path.exists(MODEL_FILE):
        print("training the SentencePiece model", flush=True)
        train(args.workdir)
    sp = load_sp(MODEL_FILE)
    vocab, merges = write_variants(sp)
    print(f"vocab {len(vocab)}, merges {len(merges)}")
    not_covered = [c for c in "Qß\u00c5\u00e9\u00ef\u00fc\u00f1\u00e7\t\n0123456789-V"
                   if c not in vocab]
    print("characters not in the vocab (byte fallback):", [c for c in not_covered])
    if args.skip_expectations:
        return

    cases = {
        "encode": ENCODE_TEXTS,
        "decode": hand_picked_decodes(lambda p: vocab.get(p)),
        "variants": list(VARIANTS),
    }
    cases_path = os.path.join(args.workdir, "cases.json")
    with open(cases_path, "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False, indent=1)
    mjs = os.path.join(args.workdir, "make_expectations.mjs")
    shutil.copyfile(MJS, mjs)
    subprocess.run([args.node, mjs, cases_path, TESTDATA], check=True)

    # sentencepiece's own ids for the legacy variant (informational).
    path = os.path.join(TESTDATA, "spm_legacy", "expected.json")
    with open(path, encoding="utf-8") as f:
        expected = json.load(f)
    spm_ids, differ = [], []
    for e in expected["encode"]:
        ids = sp.encode(e["text"])
        spm_ids.append({"text": e["text"], "ids": ids})
        if ids != e["ids"]:
            differ.append(e["text"])
    expected["sentencepiece_ids"] = spm_ids
    expected["sentencepiece_differs"] = differ
    with open(path, "w", encoding="utf-8") as f:
        f.write(format_expected(expected))
    print(f"sentencepiece vs tokenizers (spm_legacy): {len(differ)} of {len(spm_ids)} "
          f"strings differ: {differ!r}")


def format_expected(expected):
    """JSON with one case per line."""
    out = ["{"]
    keys = list(expected)
    for n, k in enumerate(keys):
        v = expected[k]
        comma = "," if n + 1 < len(keys) else ""
        if isinstance(v, list) and v and isinstance(v[0], dict):
            out.append(f"  {dumps(k)}: [")
            out += [f"    {dumps(e)}" + ("," if m + 1 < len(v) else "") for m, e in enumerate(v)]
            out.append("  ]" + comma)
        else:
            out.append(f"  {dumps(k)}: {dumps(v)}{comma}")
    out.append("}")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
