"""tools/batching_baselines_bench.py (the paper's Figure 12 on the real
engine) end to end on the demo model: every system served by its own
`folio serve`, every request completed at every rate, the table and the JSON
carry one figure per system and rate, and bad arguments are refused. Each
server's exit status (non-zero on a leaked KV block) is checked by the script."""

import json
import os
import subprocess
import tempfile
import unittest

from local_cluster import BIN_DIR, DEMO, SOURCE_DIR

SCRIPT = os.path.join(SOURCE_DIR, "tools", "batching_baselines_bench.py")
SYSTEMS = ["folio", "orca-max", "orca-pow2", "ft"]


def run(*args):
    return subprocess.run(["/usr/bin/python3", SCRIPT, "--bin-dir", BIN_DIR, *args],
                          capture_output=True, text=True, timeout=500)


class BatchingBaselinesBenchTest(unittest.TestCase):
    def test_every_system_at_every_rate(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "fig.json")
            # 4 MiB of KV: 256 blocks of 16 tokens, so max_model_len (512)
            # reservations hold at most 8 requests of the 12.
            r = run("--model", DEMO, "--rates", "40,inf", "--num-prompts", "12",
                    "--dataset", "random", "--input-len", "24", "--output-len", "12",
                    "--json", path, "--", "--kv-cache-mb", "4", "--threads", "1")
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(path) as f:
                fig = json.load(f)
        self.assertEqual(sorted(fig["results"]), sorted(SYSTEMS))
        for name in SYSTEMS:
            points = fig["results"][name]
            self.assertEqual([p["rate"] for p in points], [40, float("inf")], name)
            for p in points:
                self.assertEqual((p["completed"], p["failed"]), (12, 0), (name, p))
                self.assertGreater(p["normalized_latency_ms"], 0, (name, p))
                self.assertGreater(p["output_throughput"], 0, (name, p))
        self.assertIn("| 40 |", r.stdout)
        self.assertIn("| inf |", r.stdout)
        self.assertIn("Orca (Pow2)", r.stdout)
        self.assertIn("sustained at", r.stdout)

    def test_bad_arguments_are_refused(self):
        for args, message in ((["--systems", "vllm"], "unknown system 'vllm'"),
                              (["--rates", "fast"], "--rates"),
                              (["--rates", "0"], "--rates must be positive")):
            with self.subTest(args=args):
                r = run("--model", DEMO, *args)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(message, r.stderr)


if __name__ == "__main__":
    unittest.main()
