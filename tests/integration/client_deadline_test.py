"""A client that gives up aborts its request on a real cluster: a gRPC deadline
that expires (`folio generate --timeout-s`) and an HTTP client that closes its
connection mid-stream both end the request on the server (counted with
finish_reason "abort"), its KV blocks go back at once, and the next request runs
without waiting for the abandoned one. One request runs at a time
(--max-num-seqs 1), so an abandoned request that kept running would hold the
only slot."""

import os
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.request

from local_cluster import BIN_DIR, LocalCluster, http_healthy, wait_until

FOLIO = os.path.join(BIN_DIR, "folio")


def metric(port, name, labels=""):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + "{") and labels in line:
                return float(line.rsplit(" ", 1)[1])
    return 0.0


class ClientDeadlineTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.cluster = LocalCluster(os.path.join(cls.tmp.name, "scheduler.log"), http=True,
                                   scheduler_flags=("--max-num-seqs", "1"))
        try:
            cls.cluster.wait_ready(lambda: http_healthy(cls.cluster.http_port))
        except BaseException:
            cls.cluster.stop()
            cls.tmp.cleanup()
            raise
        cls.port = cls.cluster.http_port

    @classmethod
    def tearDownClass(cls):
        code = cls.cluster.stop()
        cls.tmp.cleanup()
        assert code == 0, f"folio-scheduler exited {code} (leaked KV blocks?)"

    def aborted(self):
        return metric(self.port, "folio_request_success_total", 'finish_reason="abort"')

    def expect_abandoned_request_freed(self, before):
        wait_until(lambda: self.aborted() == before + 1, 10, "the request aborted")
        wait_until(lambda: metric(self.port, "folio_kv_cache_blocks_used",
                                  'pool="device"') == 0, 10, "its blocks back")
        self.assertEqual(metric(self.port, "folio_requests_running"), 0)

    def test_an_expired_grpc_deadline_aborts_the_request(self):
        args = [FOLIO, "generate", "--address", self.cluster.address, "--max-tokens", "450",
                "--ignore-eos", "--temperature", "0", "In the beginning"]
        # How long the request takes here, as the server measured it: the
        # deadline is a quarter of that, so it expires mid-stream however fast
        # the machine decodes (450 tokens took 0.4 s on one VM, 0.08 s on another).
        e2e = "folio_e2e_request_latency_seconds_sum"
        seconds_before = metric(self.port, e2e)
        subprocess.run(args, capture_output=True, text=True, timeout=60, check=True)
        deadline = max(0.01, (metric(self.port, e2e) - seconds_before) / 4)
        before = self.aborted()
        start = time.monotonic()
        run = subprocess.run(args[:4] + ["--timeout-s", f"{deadline:.3f}"] + args[4:],
                             capture_output=True, text=True, timeout=60)
        self.assertNotEqual(run.returncode, 0, run.stdout)
        self.assertIn("Deadline Exceeded", run.stderr)
        self.assertLess(time.monotonic() - start, 5)
        self.expect_abandoned_request_freed(before)

    def test_an_http_client_that_hangs_up_aborts_the_request(self):
        before = self.aborted()
        body = (b'{"prompt": "In the beginning", "max_tokens": 450, "stream": true, '
                b'"ignore_eos": true, "temperature": 0}')
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as s:
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                      b"application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            raw = b""
            while raw.count(b"data: ") < 2:
                raw += s.recv(4096)
        self.expect_abandoned_request_freed(before)


if __name__ == "__main__":
    unittest.main()
