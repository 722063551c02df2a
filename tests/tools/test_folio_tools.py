"""Tests for tools/: safetensors I/O, the BPE tokenizer, random models, the demo model.

Run with Debian's interpreter (python3-torch, python3-numpy):

    /usr/bin/python3 -m unittest discover -s tests/tools -v

PCRE2 checks use libpcre2-8 through ctypes (libpcre2-dev is a build dependency)
and are skipped when the library is missing.
"""

import contextlib
import io
import json
import math
import os
import shutil
import struct
import sys
import tempfile
import unittest

import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tools"))

import bpe_tokenizer as bpe  # noqa: E402
import folio_model_io as mio  # noqa: E402
import make_random_model  # noqa: E402
import train_demo_model as tdm  # noqa: E402

DEMO = os.path.join(REPO, "models", "folio-demo")
HAVE_DEMO = os.path.exists(os.path.join(DEMO, "model.safetensors"))
HAVE_PCRE2 = bpe.pcre2_available()

torch.set_num_threads(1)

TRICKY = [
    "",
    "Hello world",
    "  leading and trailing spaces   ",
    "tabs\tand\nnewlines\r\n\r\nand  double  spaces\n\n\n",
    "I'm sure you'll say they've 'd 's 't 're 'S 'LL it's",
    "'said 'tis ''s '",
    "numbers 12345 and 3.14159, 1,000,000 and x2 ²³ ½ Ⅻ ١٢٣",
    "punctuation!!! ... ?!? (parens) [brackets] {braces} <angles> @#$%^&*",
    "我很感谢你的热情",
    "mixed 我很 感谢 café naïve Ελληνικά русский עברית العربية",
    "emoji 😀👍🏽 and 🇫🇷 flags",
    "no\u00a0break\u2028line\u2029para\u3000ideographic\u0085nel\u200bzwsp",
    "combining e\u0301 a\u0308 and marks \u0915\u093f",
    " ",
    "\n",
    "a",
    "  \n  x",
    "end with space ",
    "trailing newline\n",
    "\x00\x01 control \x1f\x7f chars",
    "<|begin_of_text|>special<|end_of_text|> inside",
]


class SafetensorsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_round_trip_each_dtype(self):
        g = torch.Generator().manual_seed(0)
        tensors = {"a.weight": torch.randn(3, 5, generator=g), "b": torch.randn(7, generator=g),
                   "c.scalar_like": torch.randn(1, 1, generator=g) * 1e4}
        for dtype in ("F32", "F16", "BF16"):
            path = os.path.join(self.tmp, f"{dtype}.safetensors")
            mio.save_safetensors(path, tensors, dtype)
            back, meta = mio.load_safetensors(path)
            self.assertEqual(meta, {"format": "pt"})
            for k, v in tensors.items():
                self.assertEqual(back[k].dtype, {"F32": torch.float32, "F16": torch.float16,
                                                 "BF16": torch.bfloat16}[dtype])
                self.assertTrue(torch.equal(back[k].float(), mio.round_to_dtype(v, dtype)), (dtype, k))

    def test_layout(self):
        path = os.path.join(self.tmp, "x.safetensors")
        mio.save_safetensors(path, {"w": torch.ones(2, 3), "h": torch.ones(4)}, "BF16",
                             metadata={"format": "pt", "note": "x"})
        with open(path, "rb") as f:
            raw = f.read()
        (n,) = struct.unpack("<Q", raw[:8])
        self.assertEqual((8 + n) % 8, 0)  # data 8-byte aligned
        header = json.loads(raw[8:8 + n])
        self.assertEqual(header["__metadata__"], {"format": "pt", "note": "x"})
        self.assertEqual(header["h"], {"dtype": "BF16", "shape": [4], "data_offsets": [0, 8]})
        self.assertEqual(header["w"]["data_offsets"], [8, 20])
        self.assertEqual(len(raw), 8 + n + 20)
        # bf16 of 1.0 is 0x3f80, little-endian
        self.assertEqual(raw[8 + n:8 + n + 2], b"\x80\x3f")
        # a mixed file: wider elements first, so every tensor is naturally aligned
        mio.save_safetensors(path, {"a16": torch.ones(3), "z32": torch.ones(3)},
                             {"a16": "F16", "z32": "F32"})
        _, header = mio.read_safetensors_header(path)
        self.assertEqual(header["z32"]["data_offsets"], [0, 12])
        self.assertEqual(header["a16"]["data_offsets"], [12, 18])

    def test_bf16_bits(self):
        t = torch.tensor([1.0, -2.0, 0.1])
        path = os.path.join(self.tmp, "b.safetensors")
        mio.save_safetensors(path, {"t": t}, "BF16")
        n, _ = mio.read_safetensors_header(path)
        with open(path, "rb") as f:
            f.seek(8 + n)
            data = f.read()
        bits = struct.unpack("<3H", data)
        # 0.1 = 0x3dcccccd in f32: round-to-nearest-even to bf16 is 0x3dcd
        self.assertEqual(bits, (0x3F80, 0xC000, 0x3DCD))

    def test_reader_rejects_holes(self):
        path = os.path.join(self.tmp, "bad.safetensors")
        header = json.dumps({"t": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}).encode()
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(header)) + header + b"\0" * 8)
        with self.assertRaises(ValueError):
            mio.load_safetensors(path)

    def test_sharded(self):
        cfg = mio.make_hf_config(hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                                 num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                                 vocab_size=50, max_position_embeddings=64,
                                 architecture="Qwen2ForCausalLM")
        tensors = {k: torch.randn(s) for k, s in mio.hf_tensor_shapes(cfg).items()}
        for shards in (2, 3, 7):
            d = os.path.join(self.tmp, f"s{shards}")
            os.makedirs(d)
            files = mio.save_sharded(d, tensors, "F16", shards)
            self.assertEqual(len(files), shards)
            with open(os.path.join(d, "model.safetensors.index.json")) as f:
                index = json.load(f)
            self.assertEqual(set(index["weight_map"]), set(tensors))
            self.assertEqual(index["metadata"]["total_size"], 2 * sum(t.numel() for t in tensors.values()))
            back = mio.load_model_dir_tensors(d)
            for k, v in tensors.items():
                self.assertTrue(torch.equal(back[k], mio.round_to_dtype(v, "F16")), k)

    def test_names_and_shapes(self):
        names = mio.hf_tensor_names(2, tie_word_embeddings=True)
        self.assertNotIn("lm_head.weight", names)
        self.assertIn("model.layers.1.mlp.down_proj.weight", names)
        self.assertEqual(len(names), 1 + 2 * 9 + 1)
        cfg = mio.make_hf_config(hidden_size=64, intermediate_size=96, num_hidden_layers=1,
                                 num_attention_heads=4, num_key_value_heads=1, head_dim=32,
                                 vocab_size=10, max_position_embeddings=8)
        shapes = mio.hf_tensor_shapes(cfg)
        self.assertEqual(shapes["model.layers.0.self_attn.q_proj.weight"], [128, 64])
        self.assertEqual(shapes["model.layers.0.self_attn.k_proj.weight"], [32, 64])
        self.assertEqual(shapes["model.layers.0.self_attn.o_proj.weight"], [64, 128])
        self.assertEqual(shapes["lm_head.weight"], [10, 64])


class PreTokenizerTest(unittest.TestCase):
    def test_pieces_cover_text(self):
        for s in TRICKY:
            self.assertEqual("".join(bpe.split_pretokens(s)), s)

    def test_known_splits(self):
        self.assertEqual(bpe.split_pretokens("Hello world's  end\n\nAnd 42!"),
                         ["Hello", " world", "'s", " ", " end", "\n", "\n", "And", " 42", "!"])
        self.assertEqual(bpe.split_pretokens("a   b"), ["a", "  ", " b"])
        self.assertEqual(bpe.split_pretokens("x \n"), ["x", " \n"])

    @unittest.skipUnless(HAVE_PCRE2, "libpcre2-8 not found")
    def test_matches_pcre2_on_tricky_strings(self):
        for s in TRICKY:
            self.assertEqual(bpe.split_pretokens(s), bpe.pcre2_split(s), repr(s))

    @unittest.skipUnless(HAVE_PCRE2, "libpcre2-8 not found")
    def test_matches_pcre2_on_every_code_point(self):
        # each character alone, after a space and before a letter, through both splitters
        chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000]
        # characters whose category Python's and PCRE2's Unicode versions may disagree on
        # (unassigned in Python) are left out
        chars = [c for c in chars if bpe.unicodedata.category(c) != "Cn"]
        step = 4096
        for i in range(0, len(chars), step):
            block = chars[i:i + step]
            text = "".join(" " + c + "a'" + c + "  " for c in block)
            self.assertEqual(bpe.split_pretokens(text), bpe.pcre2_split(text),
                             f"block starting U+{ord(block[0]):04X}")

    @unittest.skipUnless(HAVE_PCRE2, "libpcre2-8 not found")
    def test_pattern_compiles_with_and_without_ucp_on_ascii(self):
        s = "And God said, Let there be light: and there was light.\n  It's 12 o'clock.\t\n"
        self.assertEqual(bpe.pcre2_split(s, options=bpe.PCRE2_UTF), bpe.split_pretokens(s))


class TokenizerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        text = ("In the beginning God created the heaven and the earth.\n"
                "And the earth was without form, and void; and darkness was upon the deep.\n"
                "I'm sure you'll see 1234 things; they've said \"hello\" 42 times.\n") * 20
        text += "我很感谢你的热情 " * 10
        cls.tok = bpe.train_bpe(text, 320)

    def test_vocab_layout(self):
        t = self.tok
        self.assertEqual(t.vocab_size, 320)
        self.assertEqual(t.bos_id, 318)
        self.assertEqual(t.eos_id, 319)
        self.assertEqual(t.id_to_token[ord("a")], "a")
        self.assertEqual(t.id_to_token[ord(" ")], "\u0120")

    def test_round_trip(self):
        for s in TRICKY:
            ids = self.tok.encode(s, parse_special=False)
            self.assertEqual(self.tok.decode(ids), s, repr(s))

    def test_specials(self):
        ids = self.tok.encode("<|begin_of_text|>hi<|end_of_text|>")
        self.assertEqual(ids[0], self.tok.bos_id)
        self.assertEqual(ids[-1], self.tok.eos_id)
        self.assertEqual(self.tok.decode(ids, skip_special=True), "hi")
        self.assertEqual(self.tok.encode("x", add_bos=True)[0], self.tok.bos_id)

    def test_merges_applied_by_rank(self):
        ids = self.tok.encode(" the")
        self.assertEqual(len(ids), 1, [self.tok.id_to_token[i] for i in ids])

    def test_json_round_trip(self):
        j = self.tok.to_hf_json()
        self.assertEqual(j["model"]["type"], "BPE")
        self.assertFalse(j["model"]["byte_fallback"])
        self.assertEqual(j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"], bpe.SPLIT_PATTERN)
        self.assertEqual(j["pre_tokenizer"]["pretokenizers"][0]["behavior"], "Isolated")
        self.assertEqual(j["pre_tokenizer"]["pretokenizers"][1],
                         {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": False})
        self.assertEqual(j["decoder"]["type"], "ByteLevel")
        self.assertTrue(all(t["special"] for t in j["added_tokens"]))
        self.assertTrue(all(isinstance(m, str) and m.count(" ") == 1 for m in j["model"]["merges"]))
        back = bpe.ByteLevelBPE.from_hf_json(json.loads(json.dumps(j)))
        for s in TRICKY:
            self.assertEqual(back.encode(s), self.tok.encode(s))

    def test_truncated(self):
        small = self.tok.truncated(290)
        self.assertEqual(small.vocab_size, 290)
        self.assertEqual(small.bos_id, 288)
        for s in TRICKY:
            self.assertEqual(small.decode(small.encode(s, parse_special=False)), s)

    def test_duplicate_spelling_merges(self):
        # "ab"+"c" and "a"+"bc" both spell "abc": the second reuses the id (as HF does)
        t = bpe.ByteLevelBPE([("a", "b"), ("b", "c"), ("ab", "c"), ("a", "bc")])
        self.assertEqual(t.vocab_size, 256 + 3 + 2)
        self.assertEqual(t.encode("abc"), [t.vocab["abc"]])
        self.assertEqual(t.ranks[(ord("a"), t.vocab["bc"])][1], t.vocab["abc"])


class RandomModelTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def _make(self, *args):
        d = os.path.join(self.tmp, "m")
        make_random_model.main(["--out", d, "--hidden-size", "64", "--layers", "2",
                                "--heads", "4", "--kv-heads", "2", "--head-dim", "32",
                                "--intermediate-size", "96", "--vocab-size", "300",
                                "--reference", "2", "--reference-tokens", "6", *args])
        with open(os.path.join(d, "config.json")) as f:
            cfg = json.load(f)
        return d, cfg

    def _check(self, d, cfg, dtype):
        tensors = mio.load_model_dir_tensors(d, as_float32=False)
        shapes = mio.hf_tensor_shapes(cfg)
        self.assertEqual(set(tensors), set(shapes))
        for k, v in tensors.items():
            self.assertEqual(list(v.shape), shapes[k], k)
            self.assertEqual(v.dtype, dtype, k)
        tok = bpe.ByteLevelBPE.load(os.path.join(d, "tokenizer.json"))
        self.assertLessEqual(tok.vocab_size, cfg["vocab_size"])
        self.assertEqual(tdm.verify_dir(d, log=lambda *_: None), 0.0)

    def test_llama_tied_bf16(self):
        d, cfg = self._make("--tie")
        self.assertEqual(cfg["architectures"], ["LlamaForCausalLM"])
        self.assertTrue(cfg["tie_word_embeddings"])
        self.assertEqual(cfg["head_dim"], 32)
        self._check(d, cfg, torch.bfloat16)

    def test_qwen2_sharded_f16(self):
        d, cfg = self._make("--qwen2", "--shards", "3", "--dtype", "f16")
        self.assertEqual(cfg["architectures"], ["Qwen2ForCausalLM"])
        self.assertTrue(os.path.exists(os.path.join(d, "model-00003-of-00003.safetensors")))
        self._check(d, cfg, torch.float16)
        self.assertIn("model.layers.1.self_attn.k_proj.bias", mio.load_model_dir_tensors(d))

    def test_llama3_rope_f32_eos_list(self):
        d, cfg = self._make("--llama3-rope-scaling", "--rope-original-max", "16",
                            "--dtype", "f32", "--eos-token-id", "299,298")
        self.assertEqual(cfg["rope_scaling"]["rope_type"], "llama3")
        self.assertEqual(cfg["eos_token_id"], [299, 298])
        self._check(d, cfg, torch.float32)

    def test_mistral_sliding_window(self):
        d, cfg = self._make("--mistral", "--sliding-window", "4", "--prompt-len", "8,12")
        self.assertEqual(cfg["architectures"], ["MistralForCausalLM"])
        self.assertEqual(cfg["sliding_window"], 4)
        self.assertEqual(tdm.layer_sliding_windows(cfg), [4, 4])
        with open(os.path.join(d, "reference.json")) as f:
            ref = json.load(f)
        self.assertEqual(len(ref["cases"]), 2)
        for case in ref["cases"]:
            self.assertIn(len(case["prompt_token_ids"]), (9, 13))
            self.assertGreater(len(case["prompt_token_ids"]) + len(case["output_token_ids"]), 4)
        self._check(d, cfg, torch.bfloat16)  # verify_dir: the windowed forward reproduces it
        # and the unwindowed forward does not
        model, _ = tdm.model_from_dir(d)
        plain = tdm.LlamaForCausalLM(dict(cfg, sliding_window=None))
        plain.load_state_dict(model.state_dict())
        case = ref["cases"][0]
        _, lps, _, _ = tdm.greedy_reference(plain.eval(), case["prompt_token_ids"], 6)
        self.assertGreater(max(abs(a - b) for a, b in zip(lps, case["logprobs"])), 1e-3)

    def test_qwen2_sliding_window(self):
        d, cfg = self._make("--qwen2", "--sliding-window", "3", "--max-window-layers", "1",
                            "--prompt-len", "6")
        self.assertTrue(cfg["use_sliding_window"])
        self.assertEqual((cfg["sliding_window"], cfg["max_window_layers"]), (3, 1))
        self.assertEqual(tdm.layer_sliding_windows(cfg), [None, 3])
        self._check(d, cfg, torch.bfloat16)
        d, cfg = self._make("--qwen2", "--sliding-window", "3")  # default: every layer
        self.assertEqual(cfg["max_window_layers"], 0)
        self.assertEqual(tdm.layer_sliding_windows(cfg), [3, 3])

    def test_device_path_draws_each_tensor_in_the_stored_dtype(self):
        d = os.path.join(self.tmp, "dev")
        make_random_model.main(["--out", d, "--hidden-size", "64", "--layers", "2", "--heads", "4",
                                "--kv-heads", "2", "--head-dim", "32", "--intermediate-size", "96",
                                "--vocab-size", "300", "--qwen2", "--device", "cpu"])
        with open(os.path.join(d, "config.json")) as f:
            cfg = json.load(f)
        self.assertFalse(os.path.exists(os.path.join(d, "reference.json")))
        tensors = mio.load_model_dir_tensors(d, as_float32=False)
        self.assertEqual(set(tensors), set(mio.hf_tensor_shapes(cfg)))
        for name, t in tensors.items():
            self.assertEqual(t.dtype, torch.bfloat16, name)
            x = t.float()
            # random_weights' distributions: norms 1 + N(0, 0.1), biases N(0, 0.1),
            # matrices N(0, --std 0.02).
            mean, std = (1.0, 0.1) if name.endswith("norm.weight") else \
                (0.0, 0.1) if name.endswith(".bias") else (0.0, 0.02)
            self.assertAlmostEqual(x.mean().item(), mean, delta=4 * std / x.numel() ** 0.5 + 1e-3,
                                   msg=name)
            if x.numel() >= 1000:
                self.assertAlmostEqual(x.std().item(), std, delta=0.1 * std, msg=name)
        with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit):
            make_random_model.parse_args(["--out", self.tmp, "--device", "cpu", "--reference", "2"])

    def test_sliding_window_flag_errors(self):
        bad = [["--sliding-window", "4"],  # Llama: no window
               ["--mistral", "--max-window-layers", "1", "--sliding-window", "4"],
               ["--qwen2", "--sliding-window", "0"],
               ["--prompt-len", "3,x"]]
        for args in bad:
            with self.subTest(args=args), self.assertRaises(SystemExit), \
                    contextlib.redirect_stderr(io.StringIO()):
                make_random_model.parse_args(["--out", self.tmp, *args])
        with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit):
            make_random_model.main(["--out", os.path.join(self.tmp, "x"), "--sliding-window", "4"])
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "x")))
        a = make_random_model.parse_args(["--out", self.tmp])
        self.assertEqual((a.sliding_window, a.max_window_layers), (None, None))
        self.assertEqual(a.prompt_lengths, list(make_random_model.DEFAULT_PROMPT_LENGTHS))

    def test_rope_scaling_flags(self):
        d, cfg = self._make("--qwen2", "--rope-type", "yarn", "--rope-factor", "4",
                            "--rope-original-max", "16", "--max-position-embeddings", "16",
                            "--prompt-len", "30,40", "--dtype", "f32")
        self.assertEqual(cfg["rope_scaling"], {"rope_type": "yarn", "factor": 4.0,
                                               "original_max_position_embeddings": 16})
        self.assertEqual(cfg["rope_theta"], 10000.0)
        self.assertNotIn("rope_parameters", cfg)
        self.assertEqual(mio.served_context(cfg), 64)
        self._check(d, cfg, torch.float32)
        d, cfg = self._make("--config-layout", "v5", "--rope-type", "yarn", "--rope-factor", "8",
                            "--rope-original-max", "8", "--rope-mscale", "1",
                            "--rope-mscale-all-dim", "0.5", "--rope-beta-fast", "16",
                            "--rope-theta", "20000", "--prompt-len", "40")
        self.assertNotIn("rope_theta", cfg)
        self.assertNotIn("rope_scaling", cfg)
        self.assertEqual(cfg["rope_parameters"], {
            "rope_type": "yarn", "rope_theta": 20000.0, "factor": 8.0,
            "original_max_position_embeddings": 8, "mscale": 1.0, "mscale_all_dim": 0.5,
            "beta_fast": 16.0})
        self._check(d, cfg, torch.bfloat16)
        d, cfg = self._make("--config-layout", "v5", "--rope-type", "linear", "--rope-factor", "2",
                            "--max-position-embeddings", "32", "--prompt-len", "50")
        self.assertEqual(cfg["rope_parameters"],
                         {"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0})
        self.assertEqual(mio.served_context(cfg), 64)
        self._check(d, cfg, torch.bfloat16)
        _, cfg = self._make("--config-layout", "v5", "--rope-theta", "5000")
        self.assertEqual(cfg["rope_parameters"], {"rope_type": "default", "rope_theta": 5000.0})
        _, cfg = self._make("--llama3-rope-scaling", "--config-layout", "v5")
        self.assertEqual(cfg["rope_parameters"], dict(mio.llama3_rope_scaling(), rope_theta=10000.0))
        _, cfg = self._make("--rope-type", "llama3", "--rope-factor", "2")
        self.assertEqual(cfg["rope_scaling"], mio.llama3_rope_scaling(factor=2.0))

    def test_rope_scaling_flag_errors(self):
        bad = [["--rope-type", "linear"],  # no factor
               ["--rope-type", "yarn"],  # neither factor nor original
               ["--rope-type", "dynamic", "--rope-factor", "2"],
               ["--rope-factor", "2"],  # no type
               ["--rope-original-max", "16"],
               ["--rope-type", "linear", "--rope-factor", "2", "--rope-mscale", "1"],
               ["--rope-type", "linear", "--rope-factor", "2", "--rope-original-max", "16"],
               ["--llama3-rope-scaling", "--rope-type", "yarn", "--rope-factor", "2"],
               ["--config-layout", "v6"]]
        for args in bad:
            with self.subTest(args=args), self.assertRaises(SystemExit), \
                    contextlib.redirect_stderr(io.StringIO()):
                make_random_model.parse_args(["--out", self.tmp, *args])
        # a reference sequence longer than the served context
        with self.assertRaisesRegex(SystemExit, "outgrows the model's context of 32"):
            self._make("--rope-type", "yarn", "--rope-factor", "2", "--rope-original-max", "16",
                       "--prompt-len", "30")  # 1 + 30 + 6 > 32

    def test_llama3_inv_freq(self):
        plain = tdm.rope_inv_freq(128, 500000.0)
        scaled = tdm.rope_inv_freq(128, 500000.0, mio.llama3_rope_scaling())
        self.assertAlmostEqual(float(scaled[0]), float(plain[0]))  # high frequency: unchanged
        self.assertAlmostEqual(float(scaled[-1]), float(plain[-1]) / 8.0)  # low: divided by factor


class RopeScalingTest(unittest.TestCase):
    """linear and yarn against hand-derived values; the v4 and v5 config layouts."""

    def test_linear_inv_freq(self):
        plain = tdm.rope_inv_freq(64, 500000.0)
        scaled = tdm.rope_inv_freq(64, 500000.0, mio.linear_rope_scaling(4.0))
        self.assertTrue(torch.allclose(scaled, plain / 4.0, rtol=1e-15, atol=0))
        self.assertEqual(tdm.rope_attention_factor(mio.linear_rope_scaling(4.0)), 1.0)

    def test_yarn_inv_freq(self):
        # head_dim 32, theta 1e6, original 32: correction dims -2.13 (beta_fast 32) and
        # 1.89 (beta_slow 1), truncated to [0, 2]: dim 0 keeps its frequency, dim 1 takes
        # half of each, the rest are divided by the factor.
        plain = tdm.rope_inv_freq(32, 1e6)
        yarn = mio.yarn_rope_scaling(4.0, 32)
        inv = tdm.rope_inv_freq(32, 1e6, yarn)
        want = plain / 4.0
        want[0] = plain[0]
        want[1] = plain[1] * (0.5 + 0.5 / 4.0)
        self.assertTrue(torch.allclose(inv, want, rtol=1e-14, atol=0))
        self.assertAlmostEqual(tdm.rope_attention_factor(yarn), 0.1 * math.log(4.0) + 1.0)
        # truncate false: the ramp runs over [0, 1.885...] instead
        untrunc = tdm.rope_inv_freq(32, 1e6, dict(yarn, truncate=False))
        high = 32 * math.log(32 / (2 * math.pi)) / (2 * math.log(1e6))
        ramp = min(1.0, 1 / high)
        self.assertAlmostEqual(float(untrunc[1] / plain[1]), (1 - ramp) + ramp / 4.0, places=12)
        # beta_fast == beta_slow without truncation: low == high (1.885...), widened by
        # 0.001, so a step: dims 0 and 1 keep their frequency, the rest are divided
        step = tdm.rope_inv_freq(32, 1e6, dict(yarn, beta_fast=1, beta_slow=1, truncate=False))
        want = plain / 4.0
        want[:2] = plain[:2]
        self.assertTrue(torch.allclose(step, want, rtol=1e-14, atol=0))
        # without a factor: max_position_embeddings / original
        self.assertTrue(torch.equal(
            tdm.rope_inv_freq(32, 1e6, mio.yarn_rope_scaling(None, 32), max_position_embeddings=128),
            inv))
        self.assertAlmostEqual(tdm.rope_attention_factor(mio.yarn_rope_scaling(None, 32), 128),
                               0.1 * math.log(4.0) + 1.0)
        # without an original length: max_position_embeddings
        self.assertTrue(torch.equal(
            tdm.rope_inv_freq(32, 1e6, mio.yarn_rope_scaling(4.0), max_position_embeddings=32),
            inv))

    def test_yarn_attention_factor(self):
        base = mio.yarn_rope_scaling(8.0, 16)
        def mscale(m):
            return 0.1 * m * math.log(8.0) + 1.0
        self.assertAlmostEqual(tdm.rope_attention_factor(base), mscale(1))
        self.assertAlmostEqual(tdm.rope_attention_factor(dict(base, mscale=1, mscale_all_dim=0.5)),
                               mscale(1) / mscale(0.5))
        # both needed (and non-zero), else the plain 0.1 ln(s) + 1
        self.assertAlmostEqual(tdm.rope_attention_factor(dict(base, mscale=2)), mscale(1))
        self.assertAlmostEqual(tdm.rope_attention_factor(dict(base, mscale=0, mscale_all_dim=1)),
                               mscale(1))
        self.assertEqual(tdm.rope_attention_factor(dict(base, attention_factor=0.7, mscale=1,
                                                        mscale_all_dim=0.5)), 0.7)
        self.assertEqual(tdm.rope_attention_factor(mio.yarn_rope_scaling(0.5, 16)), 1.0)
        self.assertEqual(tdm.rope_attention_factor(None), 1.0)
        cos, sin = tdm.rope_cos_sin(torch.arange(3), torch.tensor([0.5], dtype=torch.float64), 2.0)
        self.assertAlmostEqual(float(cos[2, 0]), 2 * math.cos(1.0), places=6)
        self.assertAlmostEqual(float(sin[2, 1]), 2 * math.sin(1.0), places=6)

    def test_config_layouts(self):
        yarn = mio.yarn_rope_scaling(4.0, 8, mscale=1.0, mscale_all_dim=0.5)
        v4 = tiny_config("LlamaForCausalLM", rope_theta=3e5, rope_scaling=yarn)
        v5 = tiny_config("LlamaForCausalLM", rope_theta=3e5, rope_scaling=yarn, config_layout="v5")
        self.assertEqual((v4["rope_theta"], v4["rope_scaling"]), (3e5, yarn))
        self.assertNotIn("rope_parameters", v4)
        self.assertNotIn("rope_theta", v5)
        self.assertNotIn("rope_scaling", v5)
        self.assertEqual(list(v5["rope_parameters"])[:2], ["rope_type", "rope_theta"])
        self.assertEqual(v5["rope_parameters"], dict(yarn, rope_theta=3e5))
        self.assertEqual(tdm.rope_theta_and_scaling(v4), (3e5, yarn))
        self.assertEqual(tdm.rope_theta_and_scaling(v5), (3e5, v5["rope_parameters"]))
        plain5 = tiny_config("LlamaForCausalLM", rope_theta=3e5, config_layout="v5")
        self.assertEqual(plain5["rope_parameters"], {"rope_type": "default", "rope_theta": 3e5})
        self.assertEqual(tdm.rope_theta_and_scaling(plain5), (3e5, None))
        self.assertEqual(tdm.rope_theta_and_scaling(tiny_config("LlamaForCausalLM")), (10000.0, None))
        with self.assertRaises(ValueError):
            tiny_config("LlamaForCausalLM", config_layout="v3")
        # the same model either way; a different one without the scaling
        ids = torch.tensor([[1, 5, 7, 2, 39, 0, 11, 23, 4, 17, 30, 8, 9, 12]])
        with torch.no_grad():
            a, b = tiny_model(v4)(ids), tiny_model(v5)(ids)
            c = tiny_model(plain5)(ids)
        self.assertTrue(torch.equal(a, b))
        self.assertGreater(float((a - c).abs().max()), 1e-3)

    def test_served_context(self):
        cfg = tiny_config("LlamaForCausalLM")  # max_position_embeddings 64
        self.assertEqual(mio.served_context(cfg), 64)
        self.assertEqual(mio.served_context(dict(cfg, rope_scaling=mio.llama3_rope_scaling())), 64)
        self.assertEqual(mio.served_context(dict(cfg, rope_scaling=mio.linear_rope_scaling(2.5))), 160)
        self.assertEqual(mio.served_context(dict(cfg, rope_scaling=mio.yarn_rope_scaling(4.0, 16))),
                         64)
        self.assertEqual(mio.served_context(dict(cfg, rope_scaling=mio.yarn_rope_scaling(4.0))), 256)
        v5 = tiny_config("LlamaForCausalLM", rope_scaling=mio.yarn_rope_scaling(8.0, 32),
                         config_layout="v5")
        self.assertEqual(mio.served_context(v5), 256)
        with self.assertRaises(ValueError):
            mio.yarn_rope_scaling()
        with self.assertRaises(ValueError):
            mio.yarn_rope_scaling(2.0, 16, beta=3)


def naive_logits(model, cfg, ids, windows=None):
    """Slow per-head, per-position float64 restatement of the forward pass.

    windows[L]: layer L's sliding window W (query t sees keys s with t - W < s <= t) or None.
    """
    n_layers, nh, nkv = cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg["head_dim"]
    windows = windows or [None] * n_layers
    sd = {k: v.double() for k, v in model.state_dict().items()}
    theta, scaling = tdm.rope_theta_and_scaling(cfg)
    inv = tdm.rope_inv_freq(hd, theta, scaling, cfg["max_position_embeddings"])
    mscale = tdm.rope_attention_factor(scaling, cfg["max_position_embeddings"])

    def rms(x, w):
        return w * x / torch.sqrt((x * x).mean() + cfg["rms_norm_eps"])

    def rope(v, pos):  # HF rotate_half: pairs (i, i + d/2)
        out = v.clone()
        for i in range(hd // 2):
            a = pos * inv[i]
            c, s = mscale * torch.cos(a), mscale * torch.sin(a)
            out[i] = v[i] * c - v[i + hd // 2] * s
            out[i + hd // 2] = v[i + hd // 2] * c + v[i] * s
        return out

    def lin(name, x):
        y = sd[name + ".weight"] @ x
        return y + sd[name + ".bias"] if name + ".bias" in sd else y

    h = [sd["model.embed_tokens.weight"][int(t)] for t in ids]
    for L in range(n_layers):
        p = f"model.layers.{L}."
        xs = [rms(x, sd[p + "input_layernorm.weight"]) for x in h]
        qs = [lin(p + "self_attn.q_proj", x) for x in xs]
        ks = [lin(p + "self_attn.k_proj", x) for x in xs]
        vs = [lin(p + "self_attn.v_proj", x) for x in xs]
        new_h = []
        for t in range(len(h)):
            first = 0 if windows[L] is None else max(0, t - windows[L] + 1)
            seen = range(first, t + 1)
            heads = []
            for head in range(nh):
                kv = head // (nh // nkv)
                q = rope(qs[t][head * hd:(head + 1) * hd], t)
                scores = torch.stack([q @ rope(ks[s][kv * hd:(kv + 1) * hd], s) / hd ** 0.5
                                      for s in seen])
                w = torch.softmax(scores, 0)
                heads.append(sum(w[i] * vs[s][kv * hd:(kv + 1) * hd] for i, s in enumerate(seen)))
            x = h[t] + sd[p + "self_attn.o_proj.weight"] @ torch.cat(heads)
            y = rms(x, sd[p + "post_attention_layernorm.weight"])
            g = sd[p + "mlp.gate_proj.weight"] @ y
            u = sd[p + "mlp.up_proj.weight"] @ y
            new_h.append(x + sd[p + "mlp.down_proj.weight"] @ (g * torch.sigmoid(g) * u))
        h = new_h
    head_w = sd["lm_head.weight"] if "lm_head.weight" in sd else sd["model.embed_tokens.weight"]
    return torch.stack([head_w @ rms(x, sd["model.norm.weight"]) for x in h])


def tiny_config(architecture, layers=2, **kw):
    return mio.make_hf_config(hidden_size=32, intermediate_size=48, num_hidden_layers=layers,
                              num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                              vocab_size=40, max_position_embeddings=64,
                              architecture=architecture, **kw)


def tiny_model(cfg, seed=3):
    model = tdm.LlamaForCausalLM(cfg)
    make_random_model.random_weights(model, 0.2, torch.Generator().manual_seed(seed))
    return model.eval()


class ForwardPassTest(unittest.TestCase):
    """The reference forward pass against a slow, per-head, per-position restatement."""

    IDS = [1, 5, 7, 2, 39, 0, 11, 23, 4, 17, 30]

    def test_against_naive(self):
        cfg = tiny_config("Qwen2ForCausalLM",
                          rope_scaling=mio.llama3_rope_scaling(original_max_position_embeddings=8))
        model = tiny_model(cfg)
        ids = torch.tensor([[1, 5, 7, 2, 39, 0, 11]])
        with torch.no_grad():
            fast = model(ids)[0]
        logits = naive_logits(model, cfg, ids[0])
        self.assertLess(float((logits - fast.double()).abs().max()), 1e-4)

    def test_rope_scaling_against_naive(self):
        ids = torch.tensor([self.IDS * 3])  # 33 positions, past the original 8 and the 16
        for name, scaling, layout in [
                ("linear", mio.linear_rope_scaling(2.0), "v4"),
                ("yarn", mio.yarn_rope_scaling(4.0, 8), "v4"),
                ("yarn_mscale_v5", mio.yarn_rope_scaling(8.0, 8, mscale=1.0, mscale_all_dim=0.5,
                                                         beta_fast=8.0), "v5")]:
            with self.subTest(name):
                cfg = tiny_config("LlamaForCausalLM", rope_scaling=scaling, config_layout=layout,
                                  rope_theta=1000.0)
                model = tiny_model(cfg)
                with torch.no_grad():
                    fast = model(ids)[0]
                naive = naive_logits(model, cfg, ids[0])
                self.assertLess(float((naive - fast.double()).abs().max()), 1e-4)
                plain = tiny_config("LlamaForCausalLM", rope_theta=1000.0)
                self.assertGreater(float((naive_logits(model, plain, ids[0]) - naive).abs().max()),
                                   1e-2)

    def test_sliding_window_against_naive(self):
        cases = [  # (config, windows the model should use)
            (tiny_config("MistralForCausalLM", sliding_window=3), [3, 3]),
            (tiny_config("MistralForCausalLM", sliding_window=1), [1, 1]),
            (tiny_config("Qwen2ForCausalLM", sliding_window=4, max_window_layers=1), [None, 4]),
            (tiny_config("Qwen2ForCausalLM", sliding_window=5, max_window_layers=0), [5, 5]),
        ]
        ids = torch.tensor([self.IDS])
        for cfg, windows in cases:
            with self.subTest(arch=cfg["architectures"][0], windows=windows):
                self.assertEqual(tdm.layer_sliding_windows(cfg), windows)
                model = tiny_model(cfg)
                self.assertEqual([l.self_attn.sliding_window for l in model.model.layers], windows)
                with torch.no_grad():
                    fast = model(ids)[0]
                naive = naive_logits(model, cfg, ids[0], windows)
                self.assertLess(float((naive - fast.double()).abs().max()), 1e-4)
                # the window matters: the full-attention restatement is far off
                full = naive_logits(model, cfg, ids[0])
                self.assertGreater(float((full - fast.double()).abs().max()), 1e-2)
                # positions only move RoPE (relative): same logits from another start
                with torch.no_grad():
                    shifted = model(ids, positions=torch.arange(ids.shape[1]) + 9)[0]
                self.assertLess(float((shifted - fast).abs().max()), 1e-4)

    def test_window_at_least_sequence_is_bit_identical(self):
        t = len(self.IDS)
        ids = torch.tensor([self.IDS])
        plain_cfg = tiny_config("MistralForCausalLM")
        plain = tiny_model(plain_cfg)
        with torch.no_grad():
            want = plain(ids)
            for w in (t, t + 1, 4096):
                model = tiny_model(tiny_config("MistralForCausalLM", sliding_window=w))
                self.assertTrue(torch.equal(model(ids), want), w)
            small = tiny_model(tiny_config("MistralForCausalLM", sliding_window=t - 1))(ids)
        self.assertTrue(torch.equal(small[0, :t - 1], want[0, :t - 1]))  # window not yet full
        self.assertFalse(torch.allclose(small[0, t - 1], want[0, t - 1], atol=1e-3))
        # the greedy reference (whole prefix from position 0 each step) sees the window too
        model = tiny_model(tiny_config("MistralForCausalLM", sliding_window=3))
        out_w, lps_w, _, _ = tdm.greedy_reference(model, self.IDS[:4], 8)
        out_p, lps_p, _, _ = tdm.greedy_reference(plain, self.IDS[:4], 8)
        self.assertNotEqual(lps_w, lps_p)


class SlidingWindowConfigTest(unittest.TestCase):
    def test_qwen2_max_window_layers(self):
        cfg = tiny_config("Qwen2ForCausalLM", layers=4)
        self.assertFalse(cfg["use_sliding_window"])
        self.assertIsNone(cfg["sliding_window"])
        self.assertEqual(cfg["max_window_layers"], 4)
        self.assertEqual(tdm.layer_sliding_windows(cfg), [None] * 4)
        cfg = tiny_config("Qwen2ForCausalLM", layers=4, sliding_window=7, max_window_layers=2)
        self.assertTrue(cfg["use_sliding_window"])
        self.assertEqual((cfg["sliding_window"], cfg["max_window_layers"]), (7, 2))
        self.assertEqual(tdm.layer_sliding_windows(cfg), [None, None, 7, 7])
        for k, want in ((0, [7] * 4), (3, [None] * 3 + [7]), (4, [None] * 4), (9, [None] * 4)):
            self.assertEqual(tdm.layer_sliding_windows(dict(cfg, max_window_layers=k)), want, k)
        # HF's default max_window_layers is 28
        no_mwl = {k: v for k, v in dict(cfg, num_hidden_layers=30).items() if k != "max_window_layers"}
        self.assertEqual(tdm.layer_sliding_windows(no_mwl), [None] * 28 + [7, 7])
        # use_sliding_window false: no window whatever the rest says
        off = dict(cfg, use_sliding_window=False, max_window_layers=0)
        self.assertEqual(tdm.layer_sliding_windows(off), [None] * 4)
        self.assertEqual(tdm.layer_sliding_windows({k: v for k, v in off.items()
                                                     if k != "use_sliding_window"}), [None] * 4)
        # sliding_window null with use_sliding_window true: no window
        self.assertEqual(tdm.layer_sliding_windows(dict(cfg, sliding_window=None)), [None] * 4)

    def test_qwen2_layer_types(self):
        cfg = tiny_config("Qwen2ForCausalLM", layers=4, sliding_window=7, max_window_layers=2)
        types = ["sliding_attention", "full_attention", "sliding_attention", "full_attention"]
        self.assertEqual(tdm.layer_sliding_windows(dict(cfg, layer_types=types)), [7, None, 7, None])
        self.assertEqual(tdm.layer_sliding_windows(dict(cfg, layer_types=["full_attention"] * 4)),
                         [None] * 4)
        self.assertEqual(tdm.layer_sliding_windows(dict(cfg, layer_types=types, use_sliding_window=False)),
                         [None] * 4)
        model = tdm.LlamaForCausalLM(dict(cfg, layer_types=types))
        self.assertEqual([l.self_attn.sliding_window for l in model.model.layers], [7, None, 7, None])
        with self.assertRaises(ValueError):
            tdm.layer_sliding_windows(dict(cfg, layer_types=types[:3]))

    def test_mistral_and_llama(self):
        cfg = tiny_config("MistralForCausalLM", layers=3)
        self.assertIn("sliding_window", cfg)
        self.assertIsNone(cfg["sliding_window"])
        self.assertEqual(tdm.layer_sliding_windows(cfg), [None] * 3)
        absent = {k: v for k, v in cfg.items() if k != "sliding_window"}
        self.assertEqual(tdm.layer_sliding_windows(absent), [4096] * 3)  # MistralConfig default
        cfg = tiny_config("MistralForCausalLM", layers=3, sliding_window=6)
        self.assertEqual(cfg["sliding_window"], 6)
        self.assertNotIn("max_window_layers", cfg)
        self.assertEqual(tdm.layer_sliding_windows(cfg), [6] * 3)
        # max_window_layers / layer_types are not Mistral settings
        self.assertEqual(tdm.layer_sliding_windows(dict(cfg, max_window_layers=2,
                                                        layer_types=["full_attention"] * 3)), [6] * 3)
        llama = tiny_config("LlamaForCausalLM", layers=3)
        self.assertNotIn("sliding_window", llama)
        self.assertEqual(tdm.layer_sliding_windows(dict(llama, sliding_window=4, use_sliding_window=True)),
                         [None] * 3)
        with self.assertRaises(ValueError):
            tiny_config("LlamaForCausalLM", sliding_window=4)
        with self.assertRaises(ValueError):
            tiny_config("MistralForCausalLM", max_window_layers=1)


@unittest.skipUnless(HAVE_DEMO, "models/folio-demo not built")
class DemoModelTest(unittest.TestCase):
    def test_files_and_size(self):
        names = set(os.listdir(DEMO))
        self.assertTrue({"config.json", "model.safetensors", "tokenizer.json", "reference.json"} <= names)
        self.assertLessEqual(mio.dir_size(DEMO), 10 * 1024 * 1024)

    def test_config_matches_weights(self):
        with open(os.path.join(DEMO, "config.json")) as f:
            cfg = json.load(f)
        self.assertEqual(cfg["architectures"], ["LlamaForCausalLM"])
        self.assertEqual(cfg["torch_dtype"], "bfloat16")
        tensors, _ = mio.load_safetensors(os.path.join(DEMO, "model.safetensors"))
        shapes = mio.hf_tensor_shapes(cfg)
        self.assertEqual(set(tensors), set(shapes))
        for k, v in tensors.items():
            self.assertEqual(v.dtype, torch.bfloat16, k)
            self.assertEqual(list(v.shape), shapes[k], k)
        tok = bpe.ByteLevelBPE.load(os.path.join(DEMO, "tokenizer.json"))
        self.assertEqual(tok.vocab_size, cfg["vocab_size"])
        self.assertEqual(tok.bos_id, cfg["bos_token_id"])
        self.assertEqual(tok.eos_id, cfg["eos_token_id"])

    def test_reference_reproduces(self):
        with open(os.path.join(DEMO, "reference.json")) as f:
            ref = json.load(f)
        self.assertEqual(len(ref["cases"]), 8)
        for case in ref["cases"]:
            self.assertEqual(len(case["output_token_ids"]), 64)
            self.assertEqual(len(case["logprobs"]), 64)
        self.assertLessEqual(tdm.verify_dir(DEMO, log=lambda *_: None), 1e-5)


if __name__ == "__main__":
    unittest.main()
