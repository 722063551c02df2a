"""Overload on a real cluster: with one running slot (--max-num-seqs 1) and one
waiting slot (--max-waiting-requests 1), a flood of requests over HTTP and gRPC
gets HTTP 429 in OpenAI's error shape and gRPC RESOURCE_EXHAUSTED for what does
not fit, never a hang; what was admitted completes exactly; the cluster then
serves again, and the scheduler's exit status says no KV block leaked."""

import concurrent.futures
import json
import os
import subprocess
import tempfile
import unittest
import urllib.error
import urllib.request

from local_cluster import BIN_DIR, LocalCluster, http_healthy

FOLIO = os.path.join(BIN_DIR, "folio")
# Long enough (hundreds of steps) that the whole flood arrives while the first
# request still runs.
MAX_TOKENS = 300


def complete(port, max_tokens):
    """(status, body) of a non-streamed /v1/completions."""
    body = json.dumps({"model": "folio-demo", "prompt": "In the beginning",
                       "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=body,
                                 headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def generate(address, max_tokens):
    return subprocess.run([FOLIO, "generate", "--address", address, "--max-tokens",
                           str(max_tokens), "--temperature", "0", "--ignore-eos",
                           "In the beginning"], capture_output=True, text=True, timeout=120)


class OverloadTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.cluster = LocalCluster(os.path.join(cls.dir.name, "scheduler.log"), http=True,
                                   scheduler_flags=["--max-num-seqs", "1",
                                                    "--max-waiting-requests", "1"])
        cls.cluster.wait_ready(lambda: http_healthy(cls.cluster.http_port))

    @classmethod
    def tearDownClass(cls):
        code = cls.cluster.stop()
        cls.dir.cleanup()
        assert code == 0, f"folio-scheduler exited {code} (leaked KV blocks?)"

    def test_http_flood_gets_429_in_openai_shape(self):
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            results = list(pool.map(lambda _: complete(self.cluster.http_port, MAX_TOKENS),
                                    range(8)))
        served = [body for status, body in results if status == 200]
        refused = [body for status, body in results if status == 429]
        self.assertEqual(len(served) + len(refused), 8, results)
        self.assertGreaterEqual(len(served), 1)
        self.assertGreaterEqual(len(refused), 1, "nothing was refused: the flood did not overload")
        for body in served:
            self.assertEqual(body["usage"]["completion_tokens"], MAX_TOKENS)
        for body in refused:
            self.assertEqual(set(body["error"]), {"message", "type", "param", "code"})
            self.assertEqual(body["error"]["type"], "rate_limit_error")
            self.assertIn("overloaded: 1 request waiting (--max-waiting-requests 1)",
                          body["error"]["message"])
        # Served again once the queue has drained.
        self.assertEqual(complete(self.cluster.http_port, 4)[0], 200)

    def test_grpc_flood_gets_resource_exhausted(self):
        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            results = list(pool.map(lambda _: generate(self.cluster.address, MAX_TOKENS),
                                    range(6)))
        served = [r for r in results if r.returncode == 0]
        refused = [r for r in results if r.returncode != 0]
        self.assertGreaterEqual(len(served), 1, [r.stderr for r in results])
        self.assertGreaterEqual(len(refused), 1, "nothing was refused: the flood did not overload")
        for r in refused:  # engine_test checks the status code itself
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("overloaded: 1 request waiting (--max-waiting-requests 1)", r.stderr)
        ok = generate(self.cluster.address, 4)
        self.assertEqual(ok.returncode, 0, ok.stderr)


if __name__ == "__main__":
    unittest.main()
