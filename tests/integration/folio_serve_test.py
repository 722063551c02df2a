"""`folio serve` and `folio generate`, the two commands a user types: a TP=2
cluster started by `folio serve` streams the same greedy text to
`folio generate` as `folio run` writes offline, and Ctrl-C (SIGINT) stops
every process cleanly. Run by ctest with FOLIO_BIN_DIR set."""

import os
import signal
import socket
import subprocess
import time
import unittest

SOURCE_DIR = os.environ.get("FOLIO_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BIN_DIR = os.environ.get("FOLIO_BIN_DIR", os.path.join(SOURCE_DIR, "build", "bin"))
FOLIO = os.path.join(BIN_DIR, "folio")
DEMO = os.path.join(SOURCE_DIR, "models", "folio-demo")
PROMPT = "And God said"


def free_ports(n):
    """n distinct consecutive-free ports: base, base + 1, ... (worker ports count up)."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n >= 65535:
            continue
        ok = True
        for p in range(base, base + n):
            with socket.socket() as t:
                try:
                    t.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
        if ok:
            return base
    raise RuntimeError("no free port range")


class FolioServeTest(unittest.TestCase):
    def test_serve_generate_and_ctrl_c(self):
        port, worker_base = free_ports(1), free_ports(2)
        serve = subprocess.Popen(
            [FOLIO, "serve", "--model", DEMO, "--tp", "2", "--port", str(port),
             "--worker-base-port", str(worker_base), "--metrics-port", "0"],
            stderr=subprocess.PIPE, text=True)
        try:
            generated = subprocess.run(
                [FOLIO, "generate", "--address", f"127.0.0.1:{port}", "--wait-s", "120",
                 "--temperature", "0", "--max-tokens", "24", "--ignore-eos", PROMPT],
                capture_output=True, text=True, timeout=300)
            self.assertEqual(generated.returncode, 0, generated.stderr)
            self.assertIn("finish: length", generated.stderr)
            offline = subprocess.run(
                [FOLIO, "run", "--model", DEMO, "--prompt", PROMPT, "--temperature", "0",
                 "--max-tokens", "24", "--ignore-eos"],
                capture_output=True, text=True, timeout=300)
            self.assertEqual(offline.returncode, 0, offline.stderr)
            self.assertEqual(generated.stdout.strip(), offline.stdout.strip())
            self.assertGreater(len(generated.stdout.split()), 5)  # English words

            # The request options pass through both commands alike: a bias
            # forces EOS, min_tokens holds it off for 3 tokens; generate shows
            # the EOS text when asked to.
            options = ["--temperature", "0", "--max-tokens", "24", "--logit-bias", "2047=100",
                       "--min-tokens", "3"]
            generated = subprocess.run(
                [FOLIO, "generate", "--address", f"127.0.0.1:{port}", *options,
                 "--include-stop-str-in-output", "--skip-special-tokens=false", PROMPT],
                capture_output=True, text=True, timeout=300)
            self.assertEqual(generated.returncode, 0, generated.stderr)
            self.assertIn("finish: eos", generated.stderr)
            offline = subprocess.run([FOLIO, "run", "--model", DEMO, "--prompt", PROMPT, *options],
                                     capture_output=True, text=True, timeout=300)
            self.assertEqual(offline.returncode, 0, offline.stderr)
            self.assertEqual(generated.stdout.strip(),
                             offline.stdout.strip() + "<|end_of_text|>")
            for bad in (["--min-tokens", "-1"], ["--logit-bias", "5"],
                        ["--max-tokens", "4294967301"]):
                refused = subprocess.run(
                    [FOLIO, "generate", "--address", f"127.0.0.1:{port}", *bad, PROMPT],
                    capture_output=True, text=True, timeout=60)
                self.assertEqual(refused.returncode, 2, bad)
                self.assertIn(bad[0], refused.stderr)
        finally:
            serve.send_signal(signal.SIGINT)
            _, err = serve.communicate(timeout=60)
        self.assertEqual(serve.returncode, 0, err)
        self.assertIn("folio-scheduler: shutting down", err)
        self.assertIn("rank 0: stopped", err + generated.stdout)
        # No process of this cluster is left.
        left = subprocess.run(["pgrep", "-f", f"--worker-base-port {worker_base}"],
                              capture_output=True, text=True).stdout.split()
        self.assertEqual(left, [])


    def test_taken_default_metrics_port_only_costs_the_metrics(self):
        """Without --metrics-port, `folio serve` leaves the daemons on their
        default metrics ports, where a clash (a second local cluster) is a
        warning: the cluster still serves."""
        port, worker_base = free_ports(1), free_ports(1)
        holder = socket.socket()
        try:
            holder.bind(("127.0.0.1", 9400))  # else something else holds it: just as good
            holder.listen()
        except OSError:
            pass
        serve = subprocess.Popen(
            [FOLIO, "serve", "--model", DEMO, "--port", str(port),
             "--worker-base-port", str(worker_base)],
            stderr=subprocess.PIPE, text=True)
        try:
            generated = subprocess.run(
                [FOLIO, "generate", "--address", f"127.0.0.1:{port}", "--wait-s", "120",
                 "--temperature", "0", "--max-tokens", "4", PROMPT],
                capture_output=True, text=True, timeout=300)
            self.assertEqual(generated.returncode, 0, generated.stderr)
        finally:
            serve.send_signal(signal.SIGINT)
            _, err = serve.communicate(timeout=60)
            holder.close()
        self.assertEqual(serve.returncode, 0, err)
        self.assertIn("folio-scheduler: warning: cannot serve metrics on 127.0.0.1:9400", err)
        self.assertIn("serving without metrics", err)

    def test_bad_engine_flags_stop_the_scheduler_before_it_listens(self):
        scheduler = os.path.join(BIN_DIR, "folio-scheduler")
        cases = [
            (["--dtype", "fp16"], "--dtype 'fp16': expected auto, float32 or bfloat16"),
            (["--dtype", "float16"], "--dtype float16: the cpu worker stores weights as float32 "
                                     "or bfloat16"),
            (["--quantization", "fp8"], "--quantization 'fp8': expected int8"),
            (["--quantization", "int8", "--device", "cuda"],
             "--quantization int8: weight-only int8 runs on the cpu worker only"),
            (["--reservation-policy", "half"],
             "--reservation-policy 'half': expected none, max or pow2"),
            (["--reservation-policy", "oracle"], "oracle needs each output's true length"),
            (["--batching", "dynamic"], "--batching 'dynamic': expected continuous or static"),
        ]
        for flags, message in cases:
            with self.subTest(flags=flags):
                proc = subprocess.run(
                    [scheduler, "--model", DEMO, "--port", str(free_ports(1)),
                     "--metrics-port", "0", "--workers", f"127.0.0.1:{free_ports(1)}", *flags],
                    capture_output=True, text=True, timeout=60)
                self.assertEqual(proc.returncode, 1, proc.stderr)
                self.assertIn(message, proc.stderr)
                self.assertNotIn("waiting for", proc.stderr)

    def test_max_model_len_past_the_models_context_stops_the_scheduler(self):
        scheduler = os.path.join(BIN_DIR, "folio-scheduler")
        proc = subprocess.run(
            [scheduler, "--model", DEMO, "--port", str(free_ports(1)), "--metrics-port", "0",
             "--workers", f"127.0.0.1:{free_ports(1)}", "--max-model-len", "513"],
            capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("--max-model-len 513 exceeds the model's context of 512", proc.stderr)
        self.assertNotIn("waiting for", proc.stderr)

    def test_generate_wait_s_bounds_the_wait_for_a_server(self):
        # Nothing listens: --wait-s 2 gives up after about 2 s (well before
        # --timeout-s), exit 1 with a hint.
        generated = subprocess.run(
            [FOLIO, "generate", "--address", f"127.0.0.1:{free_ports(1)}", "--wait-s", "2",
             "--timeout-s", "600", "--token-ids", "5 6"],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(generated.returncode, 1, generated.stderr)
        self.assertIn("is a cluster serving at", generated.stderr)

    def test_generate_refuses_text_that_is_not_utf8(self):
        # Protobuf strings must be UTF-8: refused before anything is sent.
        for args, what in ((["ab\udcff"], "PROMPT"), (["--stop", "\udcc3", "hi"], "--stop")):
            with self.subTest(what=what):
                argv = [os.fsencode(a) for a in [FOLIO, "generate", "--address",
                                                 "127.0.0.1:1", *args]]
                proc = subprocess.run(argv, capture_output=True, timeout=60)
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertIn(f"{what} is not valid UTF-8".encode(), proc.stderr)


if __name__ == "__main__":
    unittest.main()
