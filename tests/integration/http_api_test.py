"""The OpenAI-compatible HTTP API of folio-scheduler, against a real cluster
(local_cluster.py): raw bytes with curl and sockets, error bodies, equality
with gRPC and `folio run`, the transport's limits, aborts on disconnect,
metrics, an API key and HTTPS. Every cluster must exit 0 (no KV block leaked).
The OpenAI SDK's own view is tests/openai/. Run by ctest under /usr/bin/python3."""

import http.client
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import unittest

from local_cluster import BIN_DIR, DEMO, SOURCE_DIR, LocalCluster, wait_until

sys.path.insert(0, os.path.join(SOURCE_DIR, "client", "python"))

import folio_client  # noqa: E402

DEMO_BOS, DEMO_EOS = "<|begin_of_text|>", "<|end_of_text|>"


def request(port, method, path, body=None, headers=None, timeout=60):
    """One request on a fresh connection: (status, headers dict, body bytes)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
    conn.request(method, path, body=data, headers=headers or {})
    resp = conn.getresponse()
    out = (resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
    conn.close()
    return out


def post_json(port, path, body, headers=None):
    status, _, data = request(port, "POST", path, body, headers)
    return status, json.loads(data) if data else None


def metric(port, name, labels=""):
    """The value of one series on the HTTP port's /metrics (0 when absent)."""
    _, _, text = request(port, "GET", "/metrics")
    for line in text.decode().splitlines():
        if line.startswith(name + "{") and all(l in line for l in labels.split(",") if l):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def sse_events(raw):
    """The data payloads of an SSE body, checking its framing: every event is
    `data: ...` followed by a blank line."""
    text = raw.decode()
    assert text.endswith("\n\n"), repr(text[-40:])
    events = text[:-2].split("\n\n")
    for e in events:
        assert e.startswith("data: ") and "\n" not in e, repr(e)
    return [e[len("data: "):] for e in events]


def render_demo_chat(messages, add_generation_prompt=True):
    """The demo model's chat template rendered by Python's jinja2, as
    transformers configures it."""
    import jinja2
    import jinja2.ext
    import jinja2.sandbox

    with open(os.path.join(DEMO, "tokenizer_config.json")) as f:
        config = json.load(f)
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env.globals["raise_exception"] = raise_exception
    return env.from_string(config["chat_template"]).render(
        messages=messages, add_generation_prompt=add_generation_prompt,
        bos_token=DEMO_BOS, eos_token=DEMO_EOS)


class HttpApiTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.cluster = LocalCluster(os.path.join(cls.tmp.name, "scheduler.log"), http=True,
                                   scheduler_flags=("--max-request-body-mb", "1"))
        cls.port = cls.cluster.http_port
        cls.cluster.wait_ready(lambda: cls._healthy(cls.port))
        cls.stubs = folio_client.generate_stubs(os.path.join(cls.tmp.name, "stubs"))
        cls.grpc = folio_client.FolioClient(cls.cluster.address, cls.stubs)
        cls.grpc.wait_ready(timeout=60)
        with open(os.path.join(DEMO, "reference.json")) as f:
            cls.cases = json.load(f)["cases"]

    @classmethod
    def tearDownClass(cls):
        cls.grpc.close()
        code = cls.cluster.stop()
        log = cls.cluster.log()
        cls.tmp.cleanup()
        assert code == 0, f"folio-scheduler exited with {code}:\n{log}"

    @staticmethod
    def _healthy(port):
        try:
            return request(port, "GET", "/health", timeout=2)[0] == 200
        except OSError:
            return False

    def assert_error(self, status_body, status, param=None, code=None):
        got_status, body = status_body
        self.assertEqual(got_status, status, body)
        self.assertEqual(set(body), {"error"})
        self.assertEqual(set(body["error"]), {"message", "type", "param", "code"})
        self.assertTrue(body["error"]["message"])
        if param is not None:
            self.assertEqual(body["error"]["param"], param, body)
        if code is not None:
            self.assertEqual(body["error"]["code"], code, body)
        return body["error"]

    # --- equality with the gRPC API and `folio run`

    def test_greedy_completion_equals_grpc_ids_text_and_logprobs(self):
        for case in self.cases[:3]:
            status, body = post_json(self.port, "/v1/completions", {
                "model": "folio-demo", "prompt": case["prompt"], "max_tokens": 24,
                "temperature": 0, "logprobs": 0})
            self.assertEqual(status, 200, body)
            choice = body["choices"][0]
            result = self.grpc.generate(case["prompt"], max_tokens=24, temperature=0, logprobs=0)
            seq = result.sequences[0]
            self.assertEqual(choice["text"], seq.text)
            self.assertEqual(body["usage"]["completion_tokens"], len(seq.token_ids))
            self.assertEqual(body["usage"]["prompt_tokens"], len(case["prompt_token_ids"]))
            self.assertEqual(choice["logprobs"]["tokens"],
                             [self.grpc.detokenize([t], skip_special_tokens=False)
                              for t in seq.token_ids])
            for a, b in zip(choice["logprobs"]["token_logprobs"], seq.logprobs):
                self.assertAlmostEqual(a, b, places=5)
            # The reference's greedy continuation starts the same way.
            self.assertTrue(case["output_text"].startswith(choice["text"]) or
                            choice["text"].startswith(case["output_text"]))

    def test_token_id_prompt_equals_text_prompt(self):
        case = self.cases[0]
        texts = []
        for prompt in (case["prompt"], case["prompt_token_ids"], [case["prompt_token_ids"]]):
            status, body = post_json(self.port, "/v1/completions", {
                "prompt": prompt, "max_tokens": 12, "temperature": 0})
            self.assertEqual(status, 200, body)
            texts.append(body["choices"][0]["text"])
        self.assertEqual(len(set(texts)), 1, texts)

    def test_chat_equals_folio_run_on_the_rendered_prompt(self):
        messages = [{"role": "system", "content": "Thou art a scribe."},
                    {"role": "user", "content": "Who made the heaven and the earth?"}]
        status, body = post_json(self.port, "/v1/chat/completions", {
            "messages": messages, "max_tokens": 20, "temperature": 0})
        self.assertEqual(status, 200, body)
        rendered = render_demo_chat(messages)
        ids = self.grpc.tokenize(rendered, add_special_tokens=False)
        self.assertEqual(ids[0], 2046)  # the template's BOS, once
        self.assertEqual(body["usage"]["prompt_tokens"], len(ids))
        status, tok = post_json(self.port, "/tokenize", {"messages": messages})
        self.assertEqual(tok["tokens"], ids)
        prompts = os.path.join(self.tmp.name, "chat.jsonl")
        with open(prompts, "w") as f:
            f.write(json.dumps({"prompt_token_ids": ids}) + "\n")
        run = subprocess.run(
            [os.path.join(BIN_DIR, "folio"), "run", "--model", DEMO, "--prompts-file", prompts,
             "--max-tokens", "20", "--temperature", "0", "--json", "--threads", "1"],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(run.returncode, 0, run.stderr)
        offline = json.loads(run.stdout.splitlines()[0])
        self.assertEqual(body["choices"][0]["message"],
                         {"role": "assistant", "content": offline["outputs"][0]["text"]})

    # --- raw bytes

    def test_streamed_completion_raw_sse_with_curl(self):
        payload = {"prompt": self.cases[1]["prompt"], "max_tokens": 7, "temperature": 0,
                   "stream": True, "stream_options": {"include_usage": True}}
        out = subprocess.run(
            ["curl", "-sS", "-i", "-N", "-H", "Content-Type: application/json",
             "-d", json.dumps(payload), f"http://127.0.0.1:{self.port}/v1/completions"],
            capture_output=True, timeout=60, check=True).stdout
        head, _, raw_body = out.partition(b"\r\n\r\n")
        self.assertIn(b"HTTP/1.1 200", head)
        self.assertIn(b"content-type: text/event-stream", head.lower())
        self.assertIn(b"transfer-encoding: chunked", head.lower())
        events = sse_events(raw_body)
        self.assertEqual(events[-1], "[DONE]")
        chunks = [json.loads(e) for e in events[:-1]]
        usage = chunks[-1]
        self.assertEqual(usage["choices"], [])
        self.assertEqual(usage["usage"]["completion_tokens"], 7)
        text = "".join(c["choices"][0]["text"] for c in chunks[:-1])
        self.assertEqual(chunks[-2]["choices"][0]["finish_reason"], "length")
        self.assertTrue(all(c["object"] == "text_completion" and c["id"] == chunks[0]["id"]
                            for c in chunks))
        status, whole = post_json(self.port, "/v1/completions", dict(payload, stream=False,
                                                                     stream_options=None))
        self.assertEqual(whole["choices"][0]["text"], text)

    def test_error_body_raw_bytes_with_curl(self):
        out = subprocess.run(
            ["curl", "-sS", "-i", "-d", '{"prompt": "x", "temperature": -1}',
             f"http://127.0.0.1:{self.port}/v1/completions"],
            capture_output=True, timeout=60, check=True).stdout
        head, _, body = out.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 400 Bad Request\r\n"), head)
        self.assertIn(b"\r\nContent-Type: application/json\r\n", head)
        self.assertIn(b"\r\nContent-Length: %d" % len(body), head)
        error = json.loads(body)["error"]
        self.assertEqual((error["type"], error["param"], error["code"]),
                         ("invalid_request_error", "temperature", None))
        self.assertIn("temperature", error["message"])

    def test_streamed_chat_role_first_then_content(self):
        status, _, raw = request(self.port, "POST", "/v1/chat/completions", {
            "messages": [{"role": "user", "content": [{"type": "text", "text": "And God"},
                                                       {"type": "text", "text": "said"}]}],
            "max_tokens": 6, "temperature": 0, "stream": True, "n": 2})
        self.assertEqual(status, 200)
        events = sse_events(raw)
        self.assertEqual(events[-1], "[DONE]")
        chunks = [json.loads(e) for e in events[:-1]]
        self.assertEqual([c["choices"][0]["delta"] for c in chunks[:2]],
                         [{"role": "assistant", "content": ""}] * 2)
        finishes = [c["choices"][0] for c in chunks if c["choices"][0]["finish_reason"]]
        self.assertEqual(sorted(f["index"] for f in finishes), [0, 1])
        self.assertTrue(all(c["object"] == "chat.completion.chunk" for c in chunks))

    def test_n_and_prompt_lists_number_choices(self):
        status, body = post_json(self.port, "/v1/completions", {
            "prompt": ["In the beginning", "And God said"], "n": 2, "max_tokens": 3,
            "temperature": 0.8, "seed": 7})
        self.assertEqual(status, 200, body)
        self.assertEqual([c["index"] for c in body["choices"]], [0, 1, 2, 3])
        self.assertEqual(body["usage"]["completion_tokens"], 12)

    def test_echo_with_logprobs(self):
        prompt = self.cases[0]["prompt"]
        status, body = post_json(self.port, "/v1/completions", {
            "prompt": prompt, "max_tokens": 4, "temperature": 0, "echo": True, "logprobs": 1})
        self.assertEqual(status, 200, body)
        choice = body["choices"][0]
        self.assertTrue(choice["text"].startswith(prompt))
        lp = choice["logprobs"]
        n_prompt = len(self.cases[0]["prompt_token_ids"])
        self.assertEqual(len(lp["tokens"]), n_prompt + 4)
        self.assertIsNone(lp["token_logprobs"][0])
        self.assertTrue(all(isinstance(v, float) for v in lp["token_logprobs"][1:]))
        self.assertEqual(lp["text_offset"], sorted(lp["text_offset"]))
        # vLLM's prompt_logprobs: null, then each prompt token's own entry.
        ids = self.cases[0]["prompt_token_ids"]
        status, body = post_json(self.port, "/v1/completions", {
            "prompt": prompt, "max_tokens": 1, "temperature": 0, "prompt_logprobs": 1})
        self.assertEqual(status, 200, body)
        scored = body["choices"][0]["prompt_logprobs"]
        self.assertEqual(len(scored), len(ids))
        self.assertIsNone(scored[0])
        for token, entry in zip(ids[1:], scored[1:]):
            self.assertIn(str(token), entry)
            self.assertLessEqual(entry[str(token)]["logprob"], 0)
            self.assertLessEqual(len(entry), 2)
        self.assertEqual(lp["token_logprobs"][1:n_prompt],
                         [e[str(t)]["logprob"] for t, e in zip(ids[1:], scored[1:])])

    # --- errors

    def test_error_bodies(self):
        p = self.port
        self.assert_error(post_json(p, "/v1/completions", {"prompt": "x", "temperature": -1}),
                          400, "temperature")
        self.assert_error(post_json(p, "/v1/completions", {"prompt": "x", "top_p": "high"}),
                          400, "top_p")
        self.assert_error(post_json(p, "/v1/completions", {"prompt": "x", "suffix": "y"}),
                          400, "suffix")
        self.assert_error(post_json(p, "/v1/completions", {"prompt": [5, 99999]}), 400, "prompt")
        self.assert_error(post_json(p, "/v1/completions", {"max_tokens": 3}), 400, "prompt")
        self.assert_error(post_json(p, "/v1/completions", {"prompt": "x", "model": "gpt-4"}),
                          404, "model", "model_not_found")
        self.assert_error(post_json(p, "/v1/chat/completions", {
            "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}),
            400, "messages[0].content[0].type")
        self.assert_error(post_json(p, "/v1/chat/completions", {
            "messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}]}),
            400, "tools")
        self.assert_error(post_json(p, "/v1/chat/completions", {
            "messages": [{"role": "user", "content": "hi"}],
            "response_format": {"type": "json_object"}}), 400, "response_format")
        # The template's own raise_exception reaches the client.
        err = self.assert_error(post_json(p, "/v1/chat/completions", {
            "messages": [{"role": "tool", "content": "42"}]}), 400)
        self.assertIn("knows the roles", err["message"])
        status, _, body = request(p, "POST", "/v1/completions", b"{not json")
        self.assert_error((status, json.loads(body)), 400)
        status, _, body = request(p, "GET", "/v1/nothing")
        self.assert_error((status, json.loads(body)), 404)
        status, _, body = request(p, "GET", "/v1/completions")
        self.assert_error((status, json.loads(body)), 405)
        big = json.dumps({"prompt": "a" * (2 << 20)}).encode()
        status, _, body = request(p, "POST", "/v1/completions", big)
        self.assert_error((status, json.loads(body)), 413)
        # Nesting no real request needs is refused before it is parsed.
        deep = '{"messages": [{"role": "user", "content": "x", "extra": %s}]}' % (
            "[" * 100000 + "]" * 100000)
        status, _, body = request(p, "POST", "/v1/chat/completions", deep.encode())
        self.assertIn("nests deeper", self.assert_error((status, json.loads(body)), 400)["message"])
        self.assertTrue(self._healthy(p))

    def test_malformed_http_gets_400_and_the_server_keeps_serving(self):
        for garbage in (b"GARBAGE\r\n\r\n", b"POST /v1/completions HTTP/1.1\r\nContent-Length: x\r\n\r\n",
                        b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + b"\0" * 64):
            with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
                s.sendall(garbage)
                reply = b""
                while True:
                    data = s.recv(4096)
                    if not data:
                        break
                    reply += data
            self.assertTrue(reply.startswith(b"HTTP/1.1 400"), reply[:80])
        self.assertTrue(self._healthy(self.port))

    def test_keep_alive_and_100_continue(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        sockets = set()
        for _ in range(3):
            conn.request("POST", "/tokenize", body=json.dumps({"prompt": "Let there be light"}))
            resp = conn.getresponse()
            self.assertEqual(resp.status, 200)
            resp.read()
            sockets.add(id(conn.sock))
        self.assertEqual(len(sockets), 1)
        conn.close()
        # As curl sends it for large bodies (older curls: over 1 KiB).
        out = subprocess.run(
            ["curl", "-sS", "-v", "-H", "Expect: 100-continue", "--expect100-timeout", "20",
             "-d", json.dumps({"prompt": "light " * 400}),
             f"http://127.0.0.1:{self.port}/tokenize"],
            capture_output=True, text=True, timeout=30, check=True)
        self.assertIn("HTTP/1.1 100 Continue", out.stderr)
        expected = post_json(self.port, "/tokenize", {"prompt": "light " * 400})[1]["count"]
        self.assertEqual(json.loads(out.stdout)["count"], expected)
        self.assertGreater(expected, 400)

    def test_closing_the_connection_aborts_the_request(self):
        body = json.dumps({"prompt": "And", "max_tokens": 400, "ignore_eos": True,
                           "temperature": 0, "stream": True}).encode()
        aborted_before = metric(self.port, "folio_request_success_total", 'finish_reason="abort"')
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as s:
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                      % len(body) + body)
            got = b""
            while got.count(b"data: ") < 3:
                got += s.recv(4096)
        wait_until(lambda: metric(self.port, "folio_request_success_total",
                                  'finish_reason="abort"') > aborted_before, 30,
                   "the request aborted")
        wait_until(lambda: metric(self.port, "folio_requests_running") == 0, 30, "nothing running")

    def test_random_bodies_get_answers_not_crashes(self):
        """Mutated requests (wrong types, nulls, junk values, truncations) are
        answered 200 or 4xx in OpenAI's error shape; nothing is a 5xx."""
        import random
        rng = random.Random(1234)
        junk = [None, -1, 0, 1.5, 1e308, -1e308, "", "x" * 300, [], [1, "a"], {}, {"a": None},
                True, 2 ** 63, -2 ** 63, "\u0000", [[]], [[-5]], "🙂"]
        bases = [("/v1/completions", {"prompt": "And", "max_tokens": 2, "temperature": 0,
                                      "logprobs": 1, "n": 1, "stop": ["x"], "echo": True}),
                 ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                           "max_tokens": 2, "logprobs": True,
                                           "top_logprobs": 1}),
                 ("/tokenize", {"prompt": "hi"}), ("/detokenize", {"tokens": [1, 2]})]
        fields = ["prompt", "messages", "max_tokens", "temperature", "top_p", "top_k", "n",
                  "best_of", "stop", "seed", "logprobs", "top_logprobs", "logit_bias", "echo",
                  "stream", "stream_options", "min_tokens", "stop_token_ids", "bad_words",
                  "allowed_token_ids", "truncate_prompt_tokens", "prompt_logprobs", "priority",
                  "model", "tokens", "add_generation_prompt", "chat_template_kwargs"]
        for i in range(150):
            path, base = bases[i % len(bases)]
            body = dict(base)
            for _ in range(rng.randint(1, 3)):
                body[rng.choice(fields)] = rng.choice(junk)
            data = json.dumps(body).encode()
            if i % 7 == 0:
                data = data[:rng.randint(0, len(data))]  # truncated JSON
            status, _, raw = request(self.port, "POST", path, data)
            self.assertLess(status, 500, (body, raw[:300]))
            if status != 200:
                self.assertEqual(set(json.loads(raw)["error"]), {"message", "type", "param", "code"})
        self.assertTrue(self._healthy(self.port))

    # --- the other endpoints

    def test_models_health_version_tokenize(self):
        status, body = request(self.port, "GET", "/v1/models")[0:3:2]
        models = json.loads(body)
        self.assertEqual(models["object"], "list")
        self.assertEqual(models["data"][0]["id"], "folio-demo")
        self.assertEqual(models["data"][0]["max_model_len"], 512)
        self.assertIn("version", json.loads(request(self.port, "GET", "/version")[2]))
        ids = self.cases[0]["prompt_token_ids"]
        status, tok = post_json(self.port, "/tokenize", {"prompt": self.cases[0]["prompt"]})
        self.assertEqual((tok["tokens"], tok["count"]), (ids, len(ids)))
        status, tok = post_json(self.port, "/tokenize", {"prompt": self.cases[0]["prompt"],
                                                         "add_special_tokens": False})
        self.assertEqual(tok["tokens"], ids[1:])
        status, detok = post_json(self.port, "/detokenize", {"tokens": ids[1:]})
        self.assertEqual(detok["prompt"], self.cases[0]["prompt"])
        self.assert_error(post_json(self.port, "/detokenize", {"tokens": [1, 5000]}), 400, "tokens")

    def test_metrics_count_http_requests(self):
        before = metric(self.port, "folio_http_requests_total",
                        'endpoint="/tokenize",code="200"')
        post_json(self.port, "/tokenize", {"prompt": "x"})
        after = metric(self.port, "folio_http_requests_total", 'endpoint="/tokenize",code="200"')
        self.assertEqual(after, before + 1)
        # The engine's own series are on the same registry.
        self.assertGreater(metric(self.port, "folio_kv_cache_blocks_total", 'pool="device"'), 0)


class HttpTimeoutTest(unittest.TestCase):
    """--http-request-timeout-s and --http-idle-timeout-s: a client that sends a
    request too slowly, or keeps an idle connection, is disconnected; the
    server goes on serving."""

    def test_slow_and_idle_clients_are_disconnected(self):
        with tempfile.TemporaryDirectory() as tmp:
            cluster = LocalCluster(os.path.join(tmp, "scheduler.log"), http=True,
                                   scheduler_flags=("--http-request-timeout-s", "1",
                                                    "--http-idle-timeout-s", "1"))
            port = cluster.http_port
            try:
                cluster.wait_ready(lambda: HttpApiTest._healthy(port))

                def closed_within(s, seconds):
                    """Seconds until the server closed `s` (recv returns b"")."""
                    start = time.monotonic()
                    s.settimeout(seconds)
                    while s.recv(4096):
                        pass
                    return time.monotonic() - start

                # Half a request head, never finished (slowloris).
                with socket.create_connection(("127.0.0.1", port)) as s:
                    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
                    self.assertLess(closed_within(s, 10), 5)
                # A head whose body never comes.
                with socket.create_connection(("127.0.0.1", port)) as s:
                    s.sendall(b"POST /tokenize HTTP/1.1\r\nContent-Length: 100\r\n\r\n{")
                    self.assertLess(closed_within(s, 10), 5)
                # An idle keep-alive connection after an answer.
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                conn.request("GET", "/v1/models")
                self.assertEqual(conn.getresponse().read()[:1], b"{")
                self.assertLess(closed_within(conn.sock, 10), 5)
                conn.close()
                self.assertTrue(HttpApiTest._healthy(port))
            finally:
                code = cluster.stop()
            self.assertEqual(code, 0, cluster.log())


class WorkerFailureHttpTest(unittest.TestCase):
    """A worker that dies mid-request under --on-worker-failure fail: a started
    stream ends with an SSE error event, a non-streamed request gets 500, /health
    answers 503 while the group is rebuilt, and 200 again once the worker is back.
    (The default, requeue, is covered by worker_failure_test.)"""

    def test_errors_after_the_answer_started(self):
        import threading
        with tempfile.TemporaryDirectory() as tmp:
            cluster = LocalCluster(os.path.join(tmp, "scheduler.log"), http=True,
                                   scheduler_flags=("--on-worker-failure", "fail"))
            port = cluster.http_port
            try:
                cluster.wait_ready(lambda: HttpApiTest._healthy(port))
                long = {"prompt": "And", "max_tokens": 450, "ignore_eos": True, "temperature": 0}
                unary = {}
                t = threading.Thread(target=lambda: unary.update(
                    r=post_json(port, "/v1/completions", long)))
                t.start()
                # The unary request must be running, not queued, when the worker dies:
                # under `fail` a queued request waits for the rebuilt group instead.
                wait_until(lambda: metric(port, "folio_requests_running") >= 1, 30,
                           "the unary request running")
                body = json.dumps(dict(long, stream=True)).encode()
                with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
                    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                              b"Content-Length: %d\r\n\r\n" % len(body) + body)
                    raw = b""
                    while raw.count(b"data: ") < 3:
                        raw += s.recv(4096)
                    self.assertNotIn("r", unary, "the unary request ended before the kill")
                    cluster.workers[0].kill()
                    while True:
                        data = s.recv(4096)
                        if not data:
                            break
                        raw += data
                t.join(60)
                self.assertTrue(raw.endswith(b"0\r\n\r\n"), raw[-80:])  # the chunked stream ended
                events = re.findall(rb"data: (.*?)\n\n", raw)
                last = json.loads(events[-1])
                self.assertEqual(set(last), {"error"}, events[-3:])
                self.assertEqual(last["error"]["type"], "server_error")
                self.assertNotIn(b"[DONE]", raw)
                status, err = unary["r"]
                self.assertEqual(status, 500, err)
                self.assertEqual(err["error"]["type"], "server_error")
                self.assertEqual(request(port, "GET", "/health")[0], 503)
                cluster.restart_worker(0)
                wait_until(lambda: HttpApiTest._healthy(port), 60, "/health 200 again")
                status, body = post_json(port, "/v1/completions",
                                         {"prompt": "And", "max_tokens": 3, "temperature": 0})
                self.assertEqual(status, 200, body)
                self.assertEqual(body["usage"]["completion_tokens"], 3)
            finally:
                cluster.stop()


class SecuredHttpTest(unittest.TestCase):
    """--api-key and --tls-cert/--tls-key guard HTTP as they guard gRPC."""

    def test_api_key_and_https(self):
        with tempfile.TemporaryDirectory() as tmp:
            cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
            subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days",
                            "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                            "-keyout", key, "-out", cert], check=True, capture_output=True)
            cluster = LocalCluster(os.path.join(tmp, "scheduler.log"), http=True,
                                   scheduler_flags=("--api-key", "s3cret", "--tls-cert", cert,
                                                    "--tls-key", key))
            base = f"https://127.0.0.1:{cluster.http_port}"

            def curl(path, *extra):
                out = subprocess.run(["curl", "-sS", "--cacert", cert, "-w", "\n%{http_code}",
                                      *extra, base + path], capture_output=True, text=True,
                                     timeout=30)
                body, _, code = out.stdout.rpartition("\n")
                return int(code or 0), body

            try:
                cluster.wait_ready(lambda: curl("/health")[0] == 200)
                self.assertEqual(curl("/metrics")[0], 200)  # open for scrapers
                code, body = curl("/v1/models")
                self.assertEqual(code, 401)
                self.assertEqual(json.loads(body)["error"]["code"], "invalid_api_key")
                self.assertEqual(curl("/v1/models", "-H", "Authorization: Bearer wrong")[0], 401)
                code, body = curl("/v1/completions", "-H", "Authorization: Bearer s3cret", "-d",
                                  json.dumps({"prompt": "And God", "max_tokens": 3}))
                self.assertEqual(code, 200, body)
                self.assertEqual(json.loads(body)["usage"]["completion_tokens"], 3)
                # Plain HTTP on the HTTPS port is not answered as HTTP.
                status = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}",
                                         f"http://127.0.0.1:{cluster.http_port}/health"],
                                        capture_output=True, text=True, timeout=30).stdout
                self.assertNotEqual(status, "200")
            finally:
                code = cluster.stop()
            self.assertEqual(code, 0, cluster.log())


if __name__ == "__main__":
    unittest.main()
