"""`folio bench` (the serving benchmark client) against a real local cluster,
over both backends (gRPC and the OpenAI HTTP API): exact token counts in its
--json file, sane per-request timings, bad flags (exit 2, naming the flag)
and an address nothing serves (a clear failure). The scheduler's exit status
at the end says no KV block leaked."""

import json
import os
import subprocess
import tempfile
import unittest
import urllib.error
import urllib.request

from local_cluster import BIN_DIR, LocalCluster, free_port, http_healthy, wait_until

FOLIO = os.path.join(BIN_DIR, "folio")
PROMPTS, INPUT_LEN, OUTPUT_LEN = 12, 16, 8


def bench(*args, timeout=300):
    return subprocess.run([FOLIO, "bench", *args], capture_output=True, text=True, timeout=timeout)


class FolioBenchTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.cluster = LocalCluster(os.path.join(cls.dir.name, "scheduler.log"), http=True)
        cls.cluster.wait_ready(lambda: http_healthy(cls.cluster.http_port))

    @classmethod
    def tearDownClass(cls):
        code = cls.cluster.stop()
        cls.dir.cleanup()
        assert code == 0, f"folio-scheduler exited {code} (leaked KV blocks?)"

    def run_bench(self, backend, address, *pacing):
        path = os.path.join(self.dir.name, f"{backend}{'_'.join(pacing)}.json")
        r = bench("--backend", backend, "--address", address, "--num-prompts", str(PROMPTS),
                  "--input-len", str(INPUT_LEN), "--output-len", str(OUTPUT_LEN), "--seed", "1",
                  *pacing, "--json", path)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        for line in ("Successful requests:", "Benchmark duration (s):", "Mean TTFT (ms):",
                     "P99 TPOT (ms):", "Median ITL (ms):", "P90 E2EL (ms):",
                     "Output token throughput (tok/s):"):
            self.assertIn(line, r.stdout)
        self.assertIn(f"{PROMPTS}/{PROMPTS} done", r.stderr)
        with open(path) as f:
            j = json.load(f)
        self.assertEqual(j["completed"], PROMPTS, j)
        self.assertEqual(j["failed"], 0)
        self.assertEqual(j["total_output_tokens"], PROMPTS * OUTPUT_LEN)
        self.assertEqual(j["total_input_tokens"], PROMPTS * INPUT_LEN)
        self.assertEqual(len(j["requests"]), PROMPTS)
        for req in j["requests"]:
            self.assertTrue(req["success"], req)
            self.assertEqual(req["output_tokens"], OUTPUT_LEN)
            self.assertGreater(req["ttft_s"], 0)
            self.assertLessEqual(req["ttft_s"], req["e2e_s"])
            times = req["token_times_s"]
            self.assertTrue(times, req)
            self.assertEqual(times[0], req["ttft_s"])
            self.assertEqual(times, sorted(times))
            self.assertLessEqual(times[-1], req["e2e_s"])
            self.assertLessEqual(req["send_time_s"] + req["e2e_s"], j["duration_s"] + 1e-6)
        self.assertGreater(j["request_throughput"], 0)
        self.assertLessEqual(j["ttft_ms"]["median"], j["e2el_ms"]["median"])
        # Tokens are timed as they arrive, not when the whole answer is in:
        # in most requests the last token comes measurably after the first.
        spread = [r["token_times_s"][-1] - r["token_times_s"][0] for r in j["requests"]]
        self.assertGreater(sum(d > 1e-4 for d in spread), PROMPTS // 2, spread)
        return j

    def test_grpc(self):
        j = self.run_bench("grpc", self.cluster.address, "--max-concurrency", "4")
        self.assertEqual(j["max_concurrency"], 4)
        self.run_bench("grpc", self.cluster.address, "--request-rate", "inf")
        # A finite rate: Poisson arrivals, seeded, so send times spread out.
        j = self.run_bench("grpc", self.cluster.address, "--request-rate", "50")
        # In arrival order, up to thread wake-up jitter on a busy machine (two
        # arrivals a millisecond apart may wake in either order).
        sends = [r["send_time_s"] for r in j["requests"]]
        for earlier, later in zip(sends, sends[1:]):
            self.assertGreater(later, earlier - 0.05, sends)
        self.assertGreater(sends[-1], 0.05)

    def test_goodput_under_an_slo(self):
        # A generous objective every request meets, and one none can (1 µs TTFT).
        easy = self.run_bench("grpc", self.cluster.address, "--max-concurrency", "4",
                              "--slo", "ttft=60000,tpot=60000")
        self.assertEqual(easy["good_requests"], PROMPTS)
        self.assertAlmostEqual(easy["request_goodput"], easy["request_throughput"])
        self.assertEqual(easy["slo"], {"ttft_ms": 60000, "tpot_ms": 60000})
        hard = self.run_bench("grpc", self.cluster.address, "--max-concurrency", "4",
                              "--slo", "ttft=0.001")
        self.assertEqual(hard["good_requests"], 0)
        self.assertEqual(hard["request_goodput"], 0)

    def test_openai(self):
        address = f"127.0.0.1:{self.cluster.http_port}"
        # The HTTP API does not say its vocabulary size.
        self.run_bench("openai", address, "--max-concurrency", "4", "--vocab-size", "2048")
        self.run_bench("openai", address, "--request-rate", "inf", "--vocab-size", "2048")

    def test_jsonl_dataset(self):
        path = os.path.join(self.dir.name, "prompts.jsonl")
        with open(path, "w") as f:
            f.write(json.dumps({"prompt": "In the beginning", "output_len": 3}) + "\n")
            f.write(json.dumps({"prompt_token_ids": [1, 2, 3, 4]}) + "\n")
        out = os.path.join(self.dir.name, "jsonl.json")
        r = bench("--address", self.cluster.address, "--num-prompts", "4", "--dataset", path,
                  "--output-len", "5", "--json", out)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(out) as f:
            j = json.load(f)
        self.assertEqual([q["output_tokens"] for q in j["requests"]], [3, 5, 3, 5])

    def test_bad_flags_exit_2_naming_the_flag(self):
        for args, flag in ((["--request-rate", "fast"], "--request-rate"),
                           (["--backend", "carrier-pigeon"], "--backend"),
                           (["--num-prompts", "0"], "--num-prompts"),
                           (["--slo", "ttft=fast"], "--slo"),
                           (["--slo", "latency=5"], "--slo: unknown metric 'latency'"),
                           (["--bogus-flag", "1"], "bogus-flag")):
            r = bench("--address", self.cluster.address, *args)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertIn(flag, r.stderr)

    def test_wrong_address_fails_clearly(self):
        port = free_port()  # nothing listens there
        for backend in ("grpc", "openai"):
            r = bench("--backend", backend, "--address", f"127.0.0.1:{port}", "--num-prompts", "2",
                      "--vocab-size", "2048", "--timeout-s", "5", timeout=60)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn(f"cannot reach a {backend} server at 127.0.0.1:{port}", r.stderr)


if __name__ == "__main__":
    unittest.main()
