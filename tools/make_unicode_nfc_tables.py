#!/usr/bin/python3
"""Writes the Unicode NFC tables of common/unicode_nfc.cc and their test cases.

    /usr/bin/python3 tools/make_unicode_nfc_tables.py [--assigned-in 9.0]

Run it with Debian's /usr/bin/python3. The data come from the interpreter's
`unicodedata` (Python 3.11: Unicode 14.0.0), restricted to the characters
assigned in --assigned-in (default 9.0; "all" for none), whose list comes from
perl's Unicode::UCD (Debian's perl-modules). Why 9.0: Hugging Face `tokenizers`
normalizes with the unicode-normalization-alignments crate, whose tables are
Unicode 9.0's - a mark added later (U+07FD NKO DANTAYALAN, 11.0) is a plain
starter there, and a later composite (U+11938, 13.0) neither composes nor
decomposes. Checked against tokenizers 0.23.2 with Qwen3's tokenizer.json.
Unicode keeps the decompositions and combining classes of assigned characters
stable, so the newer data restricted this way are exactly the older version's.
The test expectations are `unicodedata.normalize("NFC", ...)` with the
characters assigned later swapped for private-use placeholders (which NFC
leaves alone, as the older tables leave unassigned characters) and back.
It writes:

  common/unicode_nfc_tables.inc
      kNfcDecompositions        every canonical decomposition mapping, one level
                                (code point -> first, second; second 0 for a
                                singleton), Hangul syllables left to the algorithm;
      kNfcCompositionExclusions the two-character mappings that never recompose
                                (composition exclusions and non-starter
                                decompositions); the other two-character mappings
                                are exactly the composition pairs;
      kNfcCombiningClasses      the non-zero canonical combining classes, as runs.
  tests/tokenizer/testdata/nfc_cases.json
      a few hundred inputs (UTF-8 as hex, invalid bytes included) with their NFC.
      Invalid UTF-8 bytes pass through unchanged and separate what is around them,
      so each valid stretch between them is normalized on its own.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLES = os.path.join(ROOT, "common", "unicode_nfc_tables.inc")
CASES = os.path.join(ROOT, "tests", "tokenizer", "testdata", "nfc_cases.json")

HANGUL_FIRST, HANGUL_LAST = 0xAC00, 0xD7A3
PLACEHOLDER_BASE = 0xF0000  # Supplementary Private Use Area-A

# Set by main(): is this code point assigned in the Unicode version the tables
# follow?
assigned = lambda cp: True  # noqa: E731


def assigned_in(version):
    """A predicate for 'assigned in `version`' (Unicode::UCD's Present_In)."""
    out = subprocess.run(
        ["perl", "-MUnicode::UCD=prop_invlist", "-e",
         f'print join(",", prop_invlist("In={version}"))'],
        check=True, capture_output=True, text=True).stdout
    bounds = [int(x) for x in out.split(",")]  # inversion list: starts of in / out runs
    assert bounds and bounds[0] == 0, f"Unicode::UCD knows no version {version}"

    def present(cp):
        lo, hi = 0, len(bounds)
        while lo < hi:
            mid = (lo + hi) // 2
            if bounds[mid] <= cp:
                lo = mid + 1
            else:
                hi = mid
        return lo % 2 == 1
    return present


def nfc(text):
    """unicodedata's NFC as tables of the chosen version give it."""
    swapped, back = [], {}
    for ch in text:
        if not assigned(ord(ch)):
            placeholder = chr(PLACEHOLDER_BASE + len(back))
            back[placeholder] = ch
            ch = placeholder
        swapped.append(ch)
    out = unicodedata.normalize("NFC", "".join(swapped))
    return "".join(back.get(ch, ch) for ch in out)


def canonical_decompositions():
    """{code point: (first, second or 0)} for every canonical mapping."""
    out = {}
    for cp in range(0x110000):
        if HANGUL_FIRST <= cp <= HANGUL_LAST or not assigned(cp):
            continue
        d = unicodedata.decomposition(chr(cp))
        if not d or d.startswith("<"):
            continue
        parts = [int(x, 16) for x in d.split()]
        assert len(parts) in (1, 2), (hex(cp), d)
        out[cp] = (parts[0], parts[1] if len(parts) == 2 else 0)
    return out


def composition_exclusions(decomps):
    """Two-character mappings that NFC never produces (Full_Composition_Exclusion)."""
    excluded = []
    for cp, (a, b) in sorted(decomps.items()):
        if b and nfc(chr(a) + chr(b)) != chr(cp):
            excluded.append(cp)
    return excluded


def combining_class_runs():
    runs = []  # [first, last, class]
    for cp in range(0x110000):
        ccc = unicodedata.combining(chr(cp)) if assigned(cp) else 0
        if not ccc:
            continue
        if runs and runs[-1][1] == cp - 1 and runs[-1][2] == ccc:
            runs[-1][1] = cp
        else:
            runs.append([cp, cp, ccc])
    return runs


def rows(items, per_line):
    lines = []
    for i in range(0, len(items), per_line):
        lines.append("    " + " ".join(items[i:i + per_line]))
    return "\n".join(lines)


def write_tables(decomps, excluded, runs, version):
    dec = ["{0x%X, 0x%X, 0x%X}," % (cp, a, b) for cp, (a, b) in sorted(decomps.items())]
    exc = ["0x%X," % cp for cp in excluded]
    ccc = ["{0x%X, 0x%X, %d}," % tuple(r) for r in runs]
    text = f"""// Generated by tools/make_unicode_nfc_tables.py from Python {sys.version.split()[0]}'s
// unicodedata (Unicode {unicodedata.unidata_version}), the characters assigned in Unicode {version}
// (see the script for why). Do not edit; run the script again instead.
// Included by common/unicode_nfc.cc only, which defines the row types.

inline constexpr char kNfcUnicodeVersion[] = "{version}";

// Canonical decomposition mappings, one level, by code point: {{code point,
// first, second (0: a singleton)}}. Hangul syllables are algorithmic.
inline constexpr NfcDecomposition kNfcDecompositions[] = {{
{rows(dec, 4)}
}};

// Two-character mappings that never recompose (composition exclusions and
// non-starter decompositions), sorted. Every other two-character mapping is a
// composition pair.
inline constexpr char32_t kNfcCompositionExclusions[] = {{
{rows(exc, 8)}
}};

// Runs of code points with the same non-zero canonical combining class:
// {{first, last, class}}, sorted.
inline constexpr NfcCombiningClassRun kNfcCombiningClasses[] = {{
{rows(ccc, 4)}
}};
"""
    with open(TABLES, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"{TABLES}: {len(dec)} decompositions, {len(exc)} exclusions, {len(ccc)} class runs")


def nfc_bytes(data):
    """NFC of UTF-8 bytes whose invalid bytes pass through and split the text."""
    text = data.decode("utf-8", "surrogateescape")  # invalid byte b -> U+DC00+b
    out, stretch = [], []
    for ch in text:
        if 0xDC80 <= ord(ch) <= 0xDCFF:
            out.append(nfc("".join(stretch)).encode("utf-8"))
            out.append(bytes([ord(ch) - 0xDC00]))
            stretch = []
        else:
            stretch.append(ch)
    out.append(nfc("".join(stretch)).encode("utf-8"))
    return b"".join(out)


def test_inputs(decomps, excluded):
    cases = []  # (name, bytes)

    def add(name, s):
        cases.append((name, s if isinstance(s, bytes) else s.encode("utf-8")))

    add("empty", "")
    add("ascii", "Hello, world! 123\t\n")
    add("already NFC", "caf\u00e9 na\u00efve \u4e2d\u6587 \ud55c\uad6d\uc5b4 \U0001F600")
    # Decomposed accents on Latin, Greek and Cyrillic letters.
    marks = [0x300, 0x301, 0x302, 0x303, 0x308, 0x30A, 0x30C, 0x327, 0x328, 0x323]
    for base in "aeiouycnszAEIOUYCNSZ":
        for m in marks:
            add(f"{base} + U+{m:04X}", base + chr(m))
    for base in "\u03b1\u03b5\u03b7\u03b9\u03bf\u03c5\u03c9\u0391\u0399":
        for m in (0x301, 0x300, 0x308, 0x313, 0x314, 0x342, 0x345):
            add(f"U+{ord(base):04X} + U+{m:04X}", base + chr(m))
    for base in "\u0435\u0438\u0443\u0415\u0418":
        for m in (0x306, 0x308, 0x300):
            add(f"U+{ord(base):04X} + U+{m:04X}", base + chr(m))
    add("cafe + acute", "cafe\u0301")
    add("NFD of a sentence", unicodedata.normalize("NFD", "Ångström, Dvořák, Việt Nam, Ελληνικά"))
    # Several marks: reordering by combining class, blocking, recomposition.
    add("dot below after circumflex", "a\u0302\u0323")
    add("dot below before circumflex", "a\u0323\u0302")
    add("Vietnamese e circumflex hook", "e\u0302\u0309")
    add("Vietnamese o horn dot below", "o\u031b\u0323")
    add("q dot above dot below", "q\u0307\u0323")
    add("s dot below dot above", "s\u0323\u0307")
    add("same class blocks", "a\u0305\u0301")
    add("lower class does not block", "a\u0316\u0301")
    add("two acutes", "e\u0301\u0301")
    add("precomposed then mark", "\u00e9\u0323")
    add("precomposed then lower mark", "\u00e1\u0316")
    add("ypogegrammeni", "\u03b1\u0345\u0313\u0301")
    add("long mark run", "a" + "".join(chr(m) for m in (0x301, 0x316, 0x302, 0x323, 0x300, 0x327)))
    add("mark first", "\u0301a")
    add("marks only", "\u0301\u0300\u0316")
    add("mark after space", " \u0301")
    add("a with 200 acutes", "a" + "\u0301" * 200)
    # Hangul: conjoining jamo compose algorithmically, old jamo do not.
    add("L V", "\u1100\u1161")
    add("L V T", "\u1100\u1161\u11a8")
    add("LV T", "\uac00\u11a8")
    add("LVT T", "\uac01\u11a8")
    add("L L V", "\u1100\u1100\u1161")
    add("V alone", "\u1161")
    add("T alone", "\u11a8")
    add("L V T T", "\u1112\u1175\u11c2\u11c2")
    add("last L V T", "\u1112\u1175\u11c2")
    add("old jamo", "\u1113\u1161\u11c3")
    add("L + old V", "\u1100\u1176")
    add("NFD of Korean", unicodedata.normalize("NFD", "한국어 텍스트입니다"))
    add("syllable then mark", "\uac00\u0301")
    # Singletons.
    for cp in (0x212A, 0x212B, 0x2126, 0x0340, 0x0341, 0x0343, 0x0374, 0x037E, 0x0387,
               0x1F71, 0x1FEE, 0x2000, 0x2001, 0x2329, 0x232A, 0xF900, 0xF901, 0xFA10, 0xFAD9,
               0x2F800, 0x2FA1D):
        add(f"singleton U+{cp:04X}", chr(cp))
        add(f"singleton U+{cp:04X} in text", "x" + chr(cp) + "\u0301y")
    # Composition exclusions and non-starter decompositions stay decomposed.
    for cp in excluded:
        add(f"excluded U+{cp:04X}", chr(cp))
    for cp in excluded[:12]:
        a, b = decomps[cp]
        add(f"decomposed excluded U+{cp:04X}", chr(a) + chr(b))
    # Starters that compose with a following starter.
    add("Oriya", "\u0b47\u0b3e")
    add("Sinhala", "\u0dd9\u0dcf")
    add("Myanmar", "\u1025\u102e")
    add("Bengali", "\u09c7\u09be")
    add("Tamil", "\u0bc6\u0bbe")
    # Astral composition pairs and decompositions.
    add("Kaithi", "\U00011099\U000110ba")
    add("Chakma", "\U00011131\U00011127")
    add("Grantha", "\U00011347\U0001133e")
    add("Tirhuta", "\U000114b9\U000114ba")
    add("Siddham", "\U000115b8\U000115af")
    # Assigned after Unicode 9.0: plain starters for the tables (and tokenizers).
    add("Dives Akuru (13.0)", "\U00011935\U00011930")
    add("Dives Akuru composite (13.0)", "\U00011938")
    add("NKo dantayalan (11.0) between", "a\u07fd\u0301")
    add("Malayalam virama (10.0) after mark", "a\u0301\u0d3b\u0300")
    add("combining mark (10.0)", "e\u1df6\u0301")
    add("musical symbol", "\U0001D15E")
    add("musical symbol decomposed", "\U0001D157\U0001D165")
    add("emoji ZWJ", "\U0001F468\u200d\U0001F469\u200d\U0001F467")
    add("flag", "\U0001F1FA\U0001F1F8")
    add("skin tone", "\U0001F44D\U0001F3FD")
    # Compatibility characters are not NFC's business.
    add("ligature", "\ufb01")
    add("fullwidth", "\uff21\uff22")
    add("superscript", "x\u00b2")
    # Invalid UTF-8 passes through and separates.
    add("lone continuation", b"a\x80b")
    add("bad byte between base and mark", b"e\xffe\xcc\x81")
    add("truncated 2-byte", b"\xc3")
    add("truncated 3-byte then mark", b"\xe2\x82e\xcc\x81")
    add("overlong", b"\xc0\xafe\xcc\x81")
    add("surrogate", b"\xed\xa0\x80A\xcc\x8a")
    add("above U+10FFFF", b"\xf4\x90\x80\x80\xe2\x84\xab")
    add("mark after bad byte", b"\xfe\xcc\x81")
    add("Kelvin between bad bytes", b"\xff\xe2\x84\xaa\xff")
    # Seeded random strings from an alphabet that exercises all of the above.
    alphabet = ("aeoAEOnN \u00e9\u00c5\u0300\u0301\u0302\u0308\u0316\u0323\u0327\u0345\u0313"
                "\u1100\u1161\u11a8\uac00\u212b\u212a\u0958\u0344\u0b47\u0b3e\u4e2d\U0001D15E"
                "\U00011099\U000110ba\U0001F600")
    rng = random.Random(20240531)
    for i in range(120):
        n = rng.randint(1, 12)
        s = "".join(rng.choice(alphabet) for _ in range(n))
        data = s.encode("utf-8")
        if i % 10 == 9:  # some with a stray byte
            k = rng.randint(0, len(data))
            data = data[:k] + b"\xff" + data[k:]
        add(f"random {i}", data)
    return cases


def write_cases(cases, version):
    rows = [{"name": name, "in": data.hex(), "nfc": nfc_bytes(data).hex()}
            for name, data in cases]
    changed = sum(r["in"] != r["nfc"] for r in rows)
    head = {
        "generator": "tools/make_unicode_nfc_tables.py",
        "unicode": version,
        "note": "in / nfc: UTF-8 bytes as hex; nfc is unicodedata.normalize('NFC') of each "
                "valid stretch as tables of the characters assigned in that Unicode version "
                "give it; invalid bytes passed through",
    }
    with open(CASES, "w", encoding="utf-8") as f:  # one case a line
        f.write(json.dumps(head)[:-1] + ', "cases": [\n')
        f.write(",\n".join(json.dumps(r) for r in rows))
        f.write("\n]}\n")
    print(f"{CASES}: {len(rows)} cases, {changed} changed by NFC")


def main():
    global assigned
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--assigned-in", default="9.0",
                        help='Unicode version whose characters the tables cover ("all": '
                             "every character unicodedata knows)")
    args = parser.parse_args()
    version = unicodedata.unidata_version
    if args.assigned_in != "all":
        assigned = assigned_in(args.assigned_in)
        version = args.assigned_in
    decomps = canonical_decompositions()
    excluded = composition_exclusions(decomps)
    runs = combining_class_runs()
    write_tables(decomps, excluded, runs, version)
    write_cases(test_inputs(decomps, excluded), version)


if __name__ == "__main__":
    main()
