"""SIGTERM drains a real folio-scheduler: readiness turns NOT_SERVING and new
requests are refused (HTTP 503, gRPC UNAVAILABLE) at once, the live requests
(running and waiting) finish whole, and the scheduler exits 0 (no KV block
leaked). Past --drain-timeout-s the rest are aborted; a second SIGTERM stops at
once. One request runs at a time (--max-num-seqs 1), so the queue outlasts a
short drain."""

import concurrent.futures
import json
import os
import signal
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.request

from local_cluster import BIN_DIR, LocalCluster, http_health_status, http_healthy, wait_until

FOLIO = os.path.join(BIN_DIR, "folio")
MAX_TOKENS = 450  # the demo model's context is 512
QUEUED = 12  # several seconds of work, one request at a time


def complete(port, max_tokens, timeout=120):
    """(status, body) of a non-streamed greedy /v1/completions."""
    body = json.dumps({"model": "folio-demo", "prompt": "In the beginning",
                       "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=body,
                                 headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


class DrainTest(unittest.TestCase):
    def start(self, tmp, *flags):
        cluster = LocalCluster(os.path.join(tmp, "scheduler.log"), http=True,
                               scheduler_flags=("--max-num-seqs", "1", *flags))
        cluster.wait_ready(lambda: http_healthy(cluster.http_port))
        return cluster

    def test_sigterm_lets_live_requests_finish_and_refuses_new_ones(self):
        with tempfile.TemporaryDirectory() as tmp, \
                concurrent.futures.ThreadPoolExecutor(4) as pool:
            cluster = self.start(tmp)
            try:
                port = cluster.http_port
                live = [pool.submit(complete, port, MAX_TOKENS) for _ in range(3)]
                wait_until(lambda: self.live(port) == 3, 30, "three requests live")
                cluster.scheduler.send_signal(signal.SIGTERM)
                wait_until(lambda: http_health_status(port) == 503, 5, "/health 503")
                status, err = complete(port, 4)
                self.assertEqual(status, 503, err)
                self.assertIn("shutting down", err["error"]["message"])
                grpc = subprocess.run([FOLIO, "generate", "--address", cluster.address,
                                       "--max-tokens", "4", "In the beginning"],
                                      capture_output=True, text=True, timeout=60)
                self.assertNotEqual(grpc.returncode, 0)
                self.assertIn("the server is shutting down", grpc.stderr)
                for f in live:
                    status, body = f.result(timeout=120)
                    self.assertEqual(status, 200, body)
                    self.assertEqual(body["usage"]["completion_tokens"], MAX_TOKENS)
                    self.assertEqual(body["choices"][0]["finish_reason"], "length")
                self.assertEqual(cluster.scheduler.wait(timeout=60), 0, cluster.log())
                self.assertIn("draining 3 live request(s)", cluster.log())
            finally:
                cluster.stop()

    def test_past_the_drain_timeout_the_rest_is_aborted(self):
        with tempfile.TemporaryDirectory() as tmp, \
                concurrent.futures.ThreadPoolExecutor(QUEUED) as pool:
            cluster = self.start(tmp, "--drain-timeout-s", "1")
            try:
                port = cluster.http_port
                queued = [pool.submit(complete, port, MAX_TOKENS) for _ in range(QUEUED)]
                wait_until(lambda: self.live(port) == QUEUED, 30, "every request live")
                sent = time.monotonic()
                cluster.scheduler.send_signal(signal.SIGTERM)
                reasons = self.finish_reasons(queued)
                self.assertEqual(cluster.scheduler.wait(timeout=30), 0, cluster.log())
                self.assertLess(time.monotonic() - sent, 15)
                self.assertIn("abort", reasons)
                self.assertIn(f"the drain timeout passed; aborting the {reasons.count('abort')} "
                              "request(s) left", cluster.log())
            finally:
                cluster.stop()

    def test_a_second_sigterm_stops_at_once(self):
        with tempfile.TemporaryDirectory() as tmp, \
                concurrent.futures.ThreadPoolExecutor(QUEUED) as pool:
            cluster = self.start(tmp, "--drain-timeout-s", "600")
            try:
                port = cluster.http_port
                queued = [pool.submit(complete, port, MAX_TOKENS) for _ in range(QUEUED)]
                wait_until(lambda: self.live(port) == QUEUED, 30, "every request live")
                cluster.scheduler.send_signal(signal.SIGTERM)
                wait_until(lambda: "draining" in cluster.log(), 10, "the drain to start")
                sent = time.monotonic()
                cluster.scheduler.send_signal(signal.SIGTERM)
                reasons = self.finish_reasons(queued)
                self.assertEqual(cluster.scheduler.wait(timeout=30), 0, cluster.log())
                self.assertLess(time.monotonic() - sent, 10)
                self.assertIn("abort", reasons)
                self.assertIn("stopping at once; aborting the", cluster.log())
            finally:
                cluster.stop()

    @staticmethod
    def metrics(port):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                return r.read().decode()
        except (urllib.error.URLError, ConnectionError, OSError):
            return ""

    @classmethod
    def live(cls, port):
        """Running + waiting requests, from the HTTP port's /metrics."""
        total = 0
        for line in cls.metrics(port).splitlines():
            if line.startswith(("folio_requests_running{", "folio_requests_waiting{")):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def finish_reasons(self, futures):
        """Each request's finish reason: those that ran before the end finished
        whole ("length"), the rest were aborted."""
        reasons = []
        for f in futures:
            status, body = f.result(timeout=60)
            self.assertEqual(status, 200, body)
            reason = body["choices"][0]["finish_reason"]
            if reason == "length":
                self.assertEqual(body["usage"]["completion_tokens"], MAX_TOKENS)
            reasons.append(reason)
        return reasons


if __name__ == "__main__":
    unittest.main()
