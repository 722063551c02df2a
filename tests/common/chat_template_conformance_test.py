"""Byte-for-byte conformance of folio's C++ Jinja renderer against Python's jinja2.

Every template in chat_templates/*.jinja (real Hugging Face chat templates, see
chat_templates/SOURCES.md) is rendered for every conversation in
chat_templates/conversations.json, once with add_generation_prompt=True and once
with False. The reference is jinja2 configured exactly as transformers'
apply_chat_template does it (transformers/utils/chat_template_utils.py,
_compile_jinja_template): an ImmutableSandboxedEnvironment with trim_blocks,
lstrip_blocks, the loopcontrols extension and the `generation` tag, transformers'
own `tojson` filter, and the raise_exception / strftime_now globals.

The C++ side is the `chat_template_render` tool (FOLIO_CHAT_TEMPLATE_RENDER), run
once on all cases. For each case:
  * jinja2 rendered text        -> the C++ output must be the same bytes;
  * raise_exception(msg)        -> the C++ side must report a raised exception
                                   with exactly the same message;
  * any other jinja2 error      -> the C++ side must fail too (any message), and
                                   must not claim it was raise_exception.
All mismatches are reported, then the test fails.
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest
from contextlib import contextmanager
from datetime import datetime

try:
    import jinja2
    import jinja2.ext
    import jinja2.nodes
    import jinja2.sandbox
except ImportError:  # pragma: no cover - reported as a test failure below
    jinja2 = None

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS_DIR = os.path.join(HERE, "chat_templates")
TEMPLATES_JSON = os.path.join(CORPUS_DIR, "templates.json")
CONVERSATIONS_JSON = os.path.join(CORPUS_DIR, "conversations.json")
RENDER_ENV = "FOLIO_CHAT_TEMPLATE_RENDER"

MIN_TEMPLATES = 15
MIN_CONVERSATIONS = 15
CONTEXT_CHARS = 60  # characters shown on each side of the first difference


# ----------------------------------------------------------------------------
# The jinja2 reference, as transformers builds it.
# ----------------------------------------------------------------------------

if jinja2 is not None:

    class RaisedException(jinja2.exceptions.TemplateError):
        """What the template's raise_exception(msg) raises (a TemplateError, as in
        transformers); a subclass only so the test can tell it from other errors."""

    class AssistantTracker(jinja2.ext.Extension):
        """transformers' `{% generation %}...{% endgeneration %}` tag. Rendering
        outside of return_assistant_tokens_mask, it just emits its body."""

        tags = {"generation"}

        def __init__(self, environment):
            super().__init__(environment)
            environment.extend(activate_tracker=self.activate_tracker)
            self._rendered_blocks = None
            self._generation_indices = None

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return jinja2.nodes.CallBlock(
                self.call_method("_generation_support"), [], [], body
            ).set_lineno(lineno)

        @jinja2.pass_eval_context
        def _generation_support(self, context, caller):
            rv = caller()
            if self.is_active():
                start_index = len("".join(self._rendered_blocks))
                self._generation_indices.append((start_index, start_index + len(rv)))
            return rv

        def is_active(self):
            return self._rendered_blocks or self._generation_indices

        @contextmanager
        def activate_tracker(self, rendered_blocks, generation_indices):
            try:
                if self.is_active():
                    raise ValueError("AssistantTracker should not be reused before closed")
                self._rendered_blocks = rendered_blocks
                self._generation_indices = generation_indices
                yield
            finally:
                self._rendered_blocks = None
                self._generation_indices = None


def make_reference_environment():
    def raise_exception(message):
        raise RaisedException(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(
            x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
        )

    def strftime_now(format):
        return datetime.now().strftime(format)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def reference_render(env, compiled, context):
    """Returns {"output": str} or {"error": str, "raised": bool}."""
    if isinstance(compiled, Exception):
        return {"error": "parse error: %s" % compiled, "raised": False}
    try:
        return {"output": compiled.render(**context)}
    except RaisedException as e:
        return {"error": e.message, "raised": True}
    except Exception as e:  # any other failure of the template
        return {"error": "%s: %s" % (type(e).__name__, e), "raised": False}


# ----------------------------------------------------------------------------
# The corpus and the cases.
# ----------------------------------------------------------------------------


def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def read_text(path):
    # newline="" so no newline translation happens: the template's exact bytes.
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def template_files():
    return sorted(f for f in os.listdir(CORPUS_DIR) if f.endswith(".jinja"))


def build_context(tokens, conversation, add_generation_prompt):
    context = {"messages": conversation["messages"], "add_generation_prompt": add_generation_prompt}
    # A null token is one the model's tokenizer_config does not set; transformers
    # then leaves it out of the template's variables altogether.
    for key in ("bos_token", "eos_token"):
        if tokens.get(key) is not None:
            context[key] = tokens[key]
    # Variables a model's template always needs from its caller (templates.json
    # "extra"), then the conversation's own.
    context.update(tokens.get("extra", {}))
    if "tools" in conversation:
        context["tools"] = conversation["tools"]
    context.update(conversation.get("extra", {}))
    return context


def build_cases():
    tokens = load_json(TEMPLATES_JSON)
    conversations = load_json(CONVERSATIONS_JSON)
    cases = []
    for name in template_files():
        for conv in conversations:
            for agp in (True, False):
                cases.append(
                    {
                        "template_name": name,
                        "template": os.path.join(CORPUS_DIR, name),
                        "conversation": conv["name"],
                        "context": build_context(tokens.get(name, {}), conv, agp),
                    }
                )
    return cases


def reference_results(cases):
    env = make_reference_environment()
    compiled = {}
    results = []
    for case in cases:
        path = case["template"]
        if path not in compiled:
            try:
                compiled[path] = env.from_string(read_text(path))
            except Exception as e:  # kept so every case of it reports
                compiled[path] = e
        results.append(reference_render(env, compiled[path], case["context"]))
    return results


def run_cpp(cases):
    binary = os.environ.get(RENDER_ENV)
    if not binary:
        raise AssertionError(
            "%s is not set: point it at the chat_template_render executable "
            "(ctest sets it to $<TARGET_FILE:chat_template_render>)" % RENDER_ENV
        )
    payload = [{"template": c["template"], "context": c["context"]} for c in cases]
    with tempfile.TemporaryDirectory() as tmp:
        cases_path = os.path.join(tmp, "cases.json")
        with open(cases_path, "w", encoding="utf-8") as f:
            json.dump(payload, f, ensure_ascii=False)
        proc = subprocess.run(
            [binary, cases_path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600
        )
    if proc.returncode != 0:
        raise AssertionError(
            "%s exited with %d\nstderr:\n%s"
            % (binary, proc.returncode, proc.stderr.decode("utf-8", "replace")[-4000:])
        )
    try:
        results = json.loads(proc.stdout.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise AssertionError("chat_template_render printed no valid JSON: %s\n%r" % (e, proc.stdout[:2000]))
    if not isinstance(results, list) or len(results) != len(cases):
        raise AssertionError(
            "chat_template_render returned %s results for %d cases"
            % (len(results) if isinstance(results, list) else type(results).__name__, len(cases))
        )
    return results


# ----------------------------------------------------------------------------
# Comparison and reporting.
# ----------------------------------------------------------------------------


def first_difference(a, b):
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n if len(a) != len(b) else -1


def byte_offset(text, char_index):
    return len(text[:char_index].encode("utf-8"))


def around(text, i):
    lo = max(0, i - CONTEXT_CHARS)
    return ("…" if lo > 0 else "") + repr(text[lo : i + CONTEXT_CHARS])[1:-1] + (
        "…" if i + CONTEXT_CHARS < len(text) else ""
    )


def describe(result):
    if "output" in result:
        return "output (%d chars)" % len(result["output"])
    return "%s error %r" % ("raise_exception" if result.get("raised") else "non-raised", result.get("error"))


def compare(case, expected, got):
    """Returns None when they agree, else a human-readable report."""
    head = "template=%s conversation=%s add_generation_prompt=%s" % (
        case["template_name"],
        case["conversation"],
        case["context"]["add_generation_prompt"],
    )
    if not isinstance(got, dict):
        return "%s\n  C++ result is not an object: %r" % (head, got)
    if "output" in expected:
        if "output" not in got or not isinstance(got["output"], str):
            return "%s\n  jinja2: %s\n  C++:    %s" % (head, describe(expected), describe(got))
        exp, out = expected["output"], got["output"]
        i = first_difference(exp, out)
        if i < 0:
            return None
        return (
            "%s\n  outputs differ at char %d (byte %d); jinja2 %d chars, C++ %d chars\n"
            "  jinja2: %s\n  C++:    %s"
            % (head, i, byte_offset(exp, i), len(exp), len(out), around(exp, i), around(out, i))
        )
    if expected.get("raised"):
        if "output" in got:
            return "%s\n  jinja2: %s\n  C++:    %s\n  C++ text: %s" % (
                head, describe(expected), describe(got), around(got["output"], 0))
        if not got.get("raised") or got.get("error") != expected["error"]:
            return "%s\n  jinja2: %s\n  C++:    %s" % (head, describe(expected), describe(got))
        return None
    # jinja2 failed with some other error: the C++ side must fail as well.
    if "output" in got:
        return "%s\n  jinja2: %s\n  C++:    %s\n  C++ text: %s" % (
            head, describe(expected), describe(got), around(got["output"], 0))
    if got.get("raised"):
        return "%s\n  jinja2: %s\n  C++:    %s" % (head, describe(expected), describe(got))
    return None


class ChatTemplateConformanceTest(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.assertIsNotNone(jinja2, "python3 cannot import jinja2 (apt-get install python3-jinja2)")

    def test_corpus_size(self):
        templates = template_files()
        conversations = load_json(CONVERSATIONS_JSON)
        tokens = load_json(TEMPLATES_JSON)
        self.assertGreaterEqual(len(templates), MIN_TEMPLATES, templates)
        self.assertGreaterEqual(len(conversations), MIN_CONVERSATIONS)
        names = [c["name"] for c in conversations]
        self.assertEqual(len(names), len(set(names)), "conversation names must be unique")
        self.assertEqual(sorted(tokens), templates, "templates.json must list exactly the .jinja files")
        with open(os.path.join(CORPUS_DIR, "SOURCES.md"), encoding="utf-8") as f:
            sources = f.read()
        for name in templates:
            self.assertIn("`%s`" % name, sources, "%s is not listed in SOURCES.md" % name)

    def test_reference_renders_each_template(self):
        # Guards the corpus itself: every template must parse in jinja2 and render
        # most conversations, so the comparison below is not vacuous.
        cases = build_cases()
        results = reference_results(cases)
        by_template = {}
        for case, result in zip(cases, results):
            ok, total = by_template.get(case["template_name"], (0, 0))
            by_template[case["template_name"]] = (ok + ("output" in result), total + 1)
        for name, (ok, total) in sorted(by_template.items()):
            self.assertGreater(ok, total // 4, "%s renders only %d of %d cases in jinja2" % (name, ok, total))

    def test_cpp_matches_jinja2(self):
        cases = build_cases()
        expected = reference_results(cases)
        got = run_cpp(cases)
        mismatches = []
        for case, exp, res in zip(cases, expected, got):
            report = compare(case, exp, res)
            if report is not None:
                mismatches.append(report)
        outputs = sum("output" in e for e in expected)
        raised = sum(bool(e.get("raised")) for e in expected)
        summary = "%d cases (%d templates x %d conversations x 2): %d rendered, %d raise_exception, %d other errors in jinja2; %d mismatches" % (
            len(cases),
            len(template_files()),
            len(load_json(CONVERSATIONS_JSON)),
            outputs,
            raised,
            len(cases) - outputs - raised,
            len(mismatches),
        )
        print(summary, file=sys.stderr)
        if mismatches:
            for m in mismatches:
                print("MISMATCH " + m, file=sys.stderr)
            self.fail("%d of %d cases differ from jinja2 (see MISMATCH lines above)" % (len(mismatches), len(cases)))


if __name__ == "__main__":
    unittest.main()
