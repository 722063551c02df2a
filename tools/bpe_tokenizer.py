"""Byte-level BPE (GPT-2 / Llama 3 / Qwen2 style): training, encode, decode, tokenizer.json.

Pure standard library, so it runs under any Python 3.  The pre-tokenizer is the
GPT-2 split regex

    's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+

(see SPLIT_PATTERN; the exact string written into tokenizer.json).  Python's `re`
has no \\p{L}, so split_pretokens() is a hand-written scanner that follows the
regex alternative by alternative, with the character classes of PCRE2 compiled
with PCRE2_UTF | PCRE2_UCP:

    \\p{L}  Unicode general category L*          (unicodedata.category()[0] == "L")
    \\p{N}  Unicode general category N*          (unicodedata.category()[0] == "N")
    \\s     category Z* plus PCRE2's \\h and \\v lists: tab, LF, VT, FF, CR, NEL U+0085
           and U+180E                              (PCRE2's UCP \\s)

pcre2_split() runs the real PCRE2 (libpcre2-8 via ctypes) for tests that check
the scanner against the library the C++ side uses.

Token ids: 0..255 are the 256 single bytes (id == byte value), then one id per
merge in merge order, then the special tokens (<|begin_of_text|>, <|end_of_text|>)
as added tokens at the end, Llama 3 style (they are not in model.vocab).
"""

import collections
import ctypes
import ctypes.util
import heapq
import json
import unicodedata

SPLIT_PATTERN = (r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+"
                 r"|\s+(?!\S)|\s+")
BOS_TOKEN = "<|begin_of_text|>"
EOS_TOKEN = "<|end_of_text|>"
DEFAULT_SPECIALS = (BOS_TOKEN, EOS_TOKEN)
_CONTRACTIONS = ("'s", "'t", "'re", "'ve", "'m", "'ll", "'d")


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable unicode character map."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1))
          + list(range(ord("\u00ae"), ord("\u00ff") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


BYTE_TO_UNICODE = bytes_to_unicode()
UNICODE_TO_BYTE = {c: b for b, c in BYTE_TO_UNICODE.items()}

# ---------------------------------------------------------------------------
# Pre-tokenizer

# The characters outside category Z that PCRE2 in UCP mode counts as \s: those of its
# \h and \v lists (pcre2_match: PT_SPACE is HSPACE_CASES, VSPACE_CASES or ucp_Z).
_PCRE_SPACE_CC = frozenset("\t\n\x0b\x0c\r\x85\u180e")
_class_cache = {}


def char_class(c):
    """'L' letter, 'N' number, 'S' whitespace (PCRE2 UCP \\s), 'O' anything else."""
    k = _class_cache.get(c)
    if k is None:
        cat = unicodedata.category(c)
        if cat[0] == "L":
            k = "L"
        elif cat[0] == "N":
            k = "N"
        elif cat[0] == "Z" or c in _PCRE_SPACE_CC:
            k = "S"
        else:
            k = "O"
        _class_cache[c] = k
    return k


def split_pretokens(text):
    """Splits `text` exactly as SPLIT_PATTERN (PCRE2, UTF+UCP) with behavior Isolated.

    Every character belongs to one of the regex's alternatives, so the pieces
    cover the text and "".join(pieces) == text.
    """
    out = []
    n = len(text)
    cls = [char_class(c) for c in text]
    i = 0
    while i < n:
        c = text[i]
        # 1. contractions, case-sensitive, in pattern order
        if c == "'":
            hit = None
            for con in _CONTRACTIONS:
                if text.startswith(con, i):
                    hit = con
                    break
            if hit is not None:
                out.append(hit)
                i += len(hit)
                continue
        # 2-4. ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`
        matched = False
        for want in ("L", "N", "O"):
            j = i
            if text[j] == " " and j + 1 < n and cls[j + 1] == want:
                j += 1
            if cls[j] == want:
                j += 1
                while j < n and cls[j] == want:
                    j += 1
                out.append(text[i:j])
                i = j
                matched = True
                break
        if matched:
            continue
        # 5. `\s+(?!\S)`  6. `\s+`
        assert cls[i] == "S", (i, c)
        j = i + 1
        while j < n and cls[j] == "S":
            j += 1
        if j < n and j - i >= 2:
            j -= 1  # leave the last whitespace to attach to the next word
        out.append(text[i:j])
        i = j
    return out


# ---------------------------------------------------------------------------
# PCRE2 through ctypes (test oracle; the C++ side uses the same library)

PCRE2_UTF = 0x00080000
PCRE2_UCP = 0x00020000
PCRE2_NO_UTF_CHECK = 0x40000000
_pcre2 = None


def _load_pcre2():
    global _pcre2
    if _pcre2 is None:
        name = ctypes.util.find_library("pcre2-8") or "libpcre2-8.so.0"
        lib = ctypes.CDLL(name)
        lib.pcre2_compile_8.restype = ctypes.c_void_p
        lib.pcre2_compile_8.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint32,
                                        ctypes.POINTER(ctypes.c_int),
                                        ctypes.POINTER(ctypes.c_size_t), ctypes.c_void_p]
        lib.pcre2_match_data_create_from_pattern_8.restype = ctypes.c_void_p
        lib.pcre2_match_data_create_from_pattern_8.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        lib.pcre2_match_8.restype = ctypes.c_int
        lib.pcre2_match_8.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t,
                                      ctypes.c_size_t, ctypes.c_uint32, ctypes.c_void_p,
                                      ctypes.c_void_p]
        lib.pcre2_get_ovector_pointer_8.restype = ctypes.POINTER(ctypes.c_size_t)
        lib.pcre2_get_ovector_pointer_8.argtypes = [ctypes.c_void_p]
        lib.pcre2_match_data_free_8.argtypes = [ctypes.c_void_p]
        lib.pcre2_code_free_8.argtypes = [ctypes.c_void_p]
        _pcre2 = lib
    return _pcre2


def pcre2_available():
    try:
        _load_pcre2()
        return True
    except OSError:
        return False


def pcre2_split(text, pattern=SPLIT_PATTERN, options=PCRE2_UTF | PCRE2_UCP):
    """Split with behavior Isolated using the real PCRE2: matches and the gaps between them."""
    lib = _load_pcre2()
    pat = pattern.encode("utf-8")
    err = ctypes.c_int()
    erroff = ctypes.c_size_t()
    code = lib.pcre2_compile_8(pat, len(pat), options, ctypes.byref(err), ctypes.byref(erroff), None)
    if not code:
        raise ValueError(f"pcre2_compile failed: error {err.value} at {erroff.value}")
    md = lib.pcre2_match_data_create_from_pattern_8(code, None)
    try:
        subject = text.encode("utf-8")
        n = len(subject)
        pieces = []
        pos = 0
        last = 0
        while pos <= n:
            # UTF validity is checked once (first call), not on every call: O(n), not O(n^2)
            flags = PCRE2_NO_UTF_CHECK if pos > 0 and options & PCRE2_UTF else 0
            rc = lib.pcre2_match_8(code, subject, n, pos, flags, md, None)
            if rc < 0:
                break
            ov = lib.pcre2_get_ovector_pointer_8(md)
            s, e = ov[0], ov[1]
            if s > last:
                pieces.append(subject[last:s])
            if e > s:
                pieces.append(subject[s:e])
                pos = e
            else:  # empty match (cannot happen with SPLIT_PATTERN): step one character
                pos = e + 1
                while pos < n and (subject[pos] & 0xC0) == 0x80:
                    pos += 1
            last = max(last, e)
        if last < n:
            pieces.append(subject[last:])
        return [p.decode("utf-8") for p in pieces]
    finally:
        lib.pcre2_match_data_free_8(md)
        lib.pcre2_code_free_8(code)


# ---------------------------------------------------------------------------
# The tokenizer


class ByteLevelBPE:
    def __init__(self, merges, specials=DEFAULT_SPECIALS, pattern=SPLIT_PATTERN):
        """merges: list of (left, right) token strings (byte-level unicode), in rank order."""
        self.pattern = pattern
        self.id_to_token = [BYTE_TO_UNICODE[b] for b in range(256)]
        self.vocab = {t: i for i, t in enumerate(self.id_to_token)}
        self.merges = []
        self.ranks = {}  # (left id, right id) -> (rank, merged id)
        for rank, (a, b) in enumerate(merges):
            ia, ib = self.vocab[a], self.vocab[b]
            tok = a + b
            if tok not in self.vocab:  # two merges may spell the same token (HF reuses its id)
                self.vocab[tok] = len(self.id_to_token)
                self.id_to_token.append(tok)
            if (ia, ib) in self.ranks:
                raise ValueError(f"duplicate merge {a!r} {b!r}")
            self.merges.append((a, b))
            self.ranks[(ia, ib)] = (rank, self.vocab[tok])
        self.num_regular = len(self.id_to_token)
        self.specials = {}
        for s in specials:
            self.specials[s] = len(self.id_to_token)
            self.id_to_token.append(s)
        self.special_ids = set(self.specials.values())
        self._cache = {}

    @property
    def vocab_size(self):
        return len(self.id_to_token)

    @property
    def bos_id(self):
        return self.specials.get(BOS_TOKEN)

    @property
    def eos_id(self):
        return self.specials.get(EOS_TOKEN)

    # -- encode / decode ----------------------------------------------------

    def _bpe(self, piece):
        ids = self._cache.get(piece)
        if ids is not None:
            return ids
        ids = list(piece.encode("utf-8"))
        ranks = self.ranks
        while len(ids) > 1:
            best = None
            for k in range(len(ids) - 1):
                r = ranks.get((ids[k], ids[k + 1]))
                if r is not None and (best is None or r[0] < best[0]):
                    best = r
            if best is None:
                break
            rank, new_id = best
            out = []
            k = 0
            while k < len(ids):
                if k + 1 < len(ids) and ranks.get((ids[k], ids[k + 1]), (None,))[0] == rank:
                    out.append(new_id)
                    k += 2
                else:
                    out.append(ids[k])
                    k += 1
            ids = out
        if len(self._cache) < 200000:
            self._cache[piece] = ids
        return ids

    def _split_specials(self, text):
        """[(segment, is_special)], splitting out special-token strings (longest first)."""
        if not self.specials:
            return [(text, False)]
        out = []
        i = 0
        start = 0
        names = sorted(self.specials, key=len, reverse=True)
        while i < len(text):
            if text[i] == "<":
                hit = next((s for s in names if text.startswith(s, i)), None)
                if hit:
                    if i > start:
                        out.append((text[start:i], False))
                    out.append((hit, True))
                    i += len(hit)
                    start = i
                    continue
            i += 1
        if start < len(text):
            out.append((text[start:], False))
        return out

    def encode(self, text, add_bos=False, parse_special=True):
        ids = [self.bos_id] if add_bos else []
        segments = self._split_specials(text) if parse_special else [(text, False)]
        for seg, special in segments:
            if special:
                ids.append(self.specials[seg])
                continue
            for piece in split_pretokens(seg):
                ids.extend(self._bpe(piece))
        return ids

    def token_bytes(self, i):
        if i in self.special_ids:
            return self.id_to_token[i].encode("utf-8")
        return bytes(UNICODE_TO_BYTE[c] for c in self.id_to_token[i])

    def decode(self, ids, skip_special=False):
        data = b"".join(self.token_bytes(i) for i in ids
                        if not (skip_special and i in self.special_ids))
        return data.decode("utf-8", errors="replace")

    # -- tokenizer.json -----------------------------------------------------

    def to_hf_json(self, add_bos_post_processor=True):
        added = [{"id": self.specials[s], "content": s, "single_word": False, "lstrip": False,
                  "rstrip": False, "normalized": False, "special": True}
                 for s in self.specials]
        post = None
        if add_bos_post_processor and self.bos_id is not None:
            bos = {"id": BOS_TOKEN, "type_id": 0}
            post = {
                "type": "TemplateProcessing",
                "single": [{"SpecialToken": bos}, {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [{"SpecialToken": bos}, {"Sequence": {"id": "A", "type_id": 0}},
                         {"SpecialToken": {"id": BOS_TOKEN, "type_id": 1}},
                         {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": {BOS_TOKEN: {"id": BOS_TOKEN, "ids": [self.bos_id],
                                               "tokens": [BOS_TOKEN]}},
            }
        return {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": added,
            "normalizer": None,
            "pre_tokenizer": {
                "type": "Sequence",
                "pretokenizers": [
                    {"type": "Split", "pattern": {"Regex": self.pattern}, "behavior": "Isolated",
                     "invert": False},
                    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                     "use_regex": False},
                ],
            },
            "post_processor": post,
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                        "use_regex": True},
            "model": {
                "type": "BPE",
                "dropout": None,
                "unk_token": None,
                "continuing_subword_prefix": None,
                "end_of_word_suffix": None,
                "fuse_unk": False,
                "byte_fallback": False,
                "ignore_merges": False,
                "vocab": {t: i for i, t in enumerate(self.id_to_token[:self.num_regular])},
                "merges": [f"{a} {b}" for a, b in self.merges],
            },
        }

    def save(self, path, add_bos_post_processor=True):
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_hf_json(add_bos_post_processor), f, ensure_ascii=False, indent=None,
                      separators=(",", ":"))
            f.write("\n")

    @classmethod
    def load(cls, path):
        with open(path, encoding="utf-8") as f:
            j = json.load(f)
        return cls.from_hf_json(j)

    @classmethod
    def from_hf_json(cls, j):
        model = j["model"]
        if model.get("type") != "BPE":
            raise ValueError("not a BPE tokenizer.json")
        merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
        pattern = j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]
        added = sorted(j.get("added_tokens", []), key=lambda t: t["id"])
        tok = cls(merges, [t["content"] for t in added], pattern)
        # our layout must reproduce the file's ids exactly
        for t, i in model["vocab"].items():
            if tok.vocab.get(t) != i:
                raise ValueError(f"vocab id of {t!r} is {i}, expected {tok.vocab.get(t)}")
        for t in added:
            if tok.specials[t["content"]] != t["id"]:
                raise ValueError(f"added token {t['content']!r} has id {t['id']}")
        return tok

    def truncated(self, vocab_size):
        """The same tokenizer with only the first merges, so the total (with specials) fits."""
        regular = vocab_size - len(self.specials)
        if regular < 256:
            raise ValueError(f"vocab_size {vocab_size} < 256 bytes + {len(self.specials)} specials")
        keep = 0
        while keep < len(self.merges) and self.ranks[
                (self.vocab[self.merges[keep][0]], self.vocab[self.merges[keep][1]])][1] < regular:
            keep += 1
        return ByteLevelBPE(self.merges[:keep], list(self.specials), self.pattern)


# ---------------------------------------------------------------------------
# Training


def train_bpe(text, vocab_size, specials=DEFAULT_SPECIALS, min_frequency=2, verbose=False):
    """Trains merges on `text` until vocab_size (bytes + merges + specials) is reached.

    Ties between equally frequent pairs go to the pair whose (left, right) token
    bytes sort first, so training is deterministic.
    """
    num_regular = vocab_size - len(specials)
    if num_regular < 256:
        raise ValueError("vocab_size too small")
    counts = collections.Counter(split_pretokens(text))
    words = [list(w.encode("utf-8")) for w in counts]
    freqs = list(counts.values())
    tok_bytes = [bytes([b]) for b in range(256)]

    pair_count = collections.defaultdict(int)
    pair_words = collections.defaultdict(set)
    for wi, (w, f) in enumerate(zip(words, freqs)):
        for p in zip(w, w[1:]):
            pair_count[p] += f
            pair_words[p].add(wi)

    def key(p):
        return (-pair_count[p], tok_bytes[p[0]], tok_bytes[p[1]])

    heap = [(key(p), p) for p in pair_count]
    heapq.heapify(heap)
    merges = []
    bytes_to_id = {b: i for i, b in enumerate(tok_bytes)}
    while len(tok_bytes) < num_regular and heap:
        k, p = heapq.heappop(heap)
        if pair_count.get(p, 0) <= 0 or k != key(p):
            continue  # stale entry
        if pair_count[p] < min_frequency:
            break
        merged = tok_bytes[p[0]] + tok_bytes[p[1]]
        new_id = bytes_to_id.get(merged)
        if new_id is None:  # a second merge spelling an existing token reuses its id
            new_id = len(tok_bytes)
            tok_bytes.append(merged)
            bytes_to_id[merged] = new_id
        merges.append(p)
        changed = set()
        for wi in list(pair_words[p]):
            w, f = words[wi], freqs[wi]
            for q in zip(w, w[1:]):
                pair_count[q] -= f
                pair_words[q].discard(wi)
                changed.add(q)
            out = []
            k2 = 0
            while k2 < len(w):
                if k2 + 1 < len(w) and w[k2] == p[0] and w[k2 + 1] == p[1]:
                    out.append(new_id)
                    k2 += 2
                else:
                    out.append(w[k2])
                    k2 += 1
            words[wi] = out
            for q in zip(out, out[1:]):
                pair_count[q] += f
                pair_words[q].add(wi)
                changed.add(q)
        for q in changed:
            if pair_count[q] > 0:
                heapq.heappush(heap, (key(q), q))
            else:
                pair_count.pop(q, None)
                pair_words.pop(q, None)
        if verbose and len(merges) % 250 == 0:
            print(f"  bpe: {len(merges)} merges, last {merged!r}", flush=True)

    def as_str(i):
        return "".join(BYTE_TO_UNICODE[b] for b in tok_bytes[i])

    return ByteLevelBPE([(as_str(a), as_str(b)) for a, b in merges], specials)
