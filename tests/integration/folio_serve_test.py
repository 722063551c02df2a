"""`folio serve` and `folio generate`, the two commands a user types: a TP=2
cluster started by `folio serve` streams the same greedy text to
`folio generate` as `folio run` writes offline, Ctrl-C (SIGINT) stops
every process cleanly, and a crashed worker is started again (a crash loop
stops the cluster). Run by ctest with FOLIO_BIN_DIR set."""

import os
import signal
import socket
import subprocess
import tempfile
import time
import unittest

from local_cluster import WORKER_ENV, free_port, http_healthy, wait_until

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


def processes():
    """(pid, parent pid, argv) of every live (not zombie) process, from /proc."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            continue  # exited meanwhile
        state, ppid = stat[stat.rindex(")") + 2:].split()[:2]
        if state != "Z" and argv:
            yield int(entry), int(ppid), argv


def child_processes(pid):
    """{pid: argv} of the live children of process `pid`."""
    return {p: argv for p, ppid, argv in processes() if ppid == pid}


def flag(argv, name):
    return argv[argv.index(name) + 1] if name in argv[:-1] else None


def alive(pid):
    """True while `pid` runs (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2:].split()[0] != "Z"


def listening(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


class ServeCluster:
    """`folio serve --tp 1` on free ports, its stderr in a temporary file (read
    while it runs; a pipe nobody reads could fill and block it). stop() runs at
    `test`'s clean-up, pass or fail, and leaves no process of the cluster
    running: every child ever seen, and any daemon on its worker port."""

    def __init__(self, test, *flags):
        self.port, self.http_port, self.worker_base = free_port(), free_port(), free_ports(1)
        self._log = tempfile.TemporaryFile(mode="w+")
        self.seen = {}  # pid -> argv of every child seen
        self.proc = subprocess.Popen(
            [FOLIO, "serve", "--model", DEMO, "--tp", "1", "--port", str(self.port),
             "--http-port", str(self.http_port), "--worker-base-port", str(self.worker_base),
             "--metrics-port", "0", *flags],
            env=dict(os.environ, **WORKER_ENV), stdout=subprocess.DEVNULL, stderr=self._log)
        test.addCleanup(self._log.close)
        test.addCleanup(self.stop)  # clean-ups run last in, first out: stop, then close

    def running(self):
        return self.proc.poll() is None

    def log(self):
        self._log.seek(0)
        return self._log.read()

    def children(self):
        found = child_processes(self.proc.pid)
        self.seen.update(found)
        return found

    def workers(self, rank=0):
        """{pid: argv} of the running folio-worker processes of `rank`."""
        return {pid: argv for pid, argv in self.children().items()
                if os.path.basename(argv[0]) == "folio-worker" and flag(argv, "--rank") == str(rank)}

    def leftovers(self):
        """{pid: argv} of this cluster's daemons still running, whoever their parent
        is now: children seen before, and any folio-worker on our ports or
        folio-scheduler told of them (expected: none once folio serve exited)."""
        found = {}
        port = str(self.worker_base)  # --tp 1: one worker port
        for pid, _, argv in processes():
            name = os.path.basename(argv[0])
            if (self.seen.get(pid) == argv or  # the same argv: not a reused pid
                    (name == "folio-worker" and flag(argv, "--port") == port) or
                    (name == "folio-scheduler" and flag(argv, "--worker-base-port") == port)):
                found[pid] = argv
        return found

    def wait_healthy(self):
        wait_until(lambda: http_healthy(self.http_port), 120, "folio-scheduler serving",
                   alive=self.running, interval=0.2)

    def wait_for_new_worker(self, old_pids, rank=0, timeout=15):
        """The pid of a running rank-`rank` worker not in old_pids."""
        return wait_until(lambda: next((p for p in self.workers(rank) if p not in old_pids), None),
                          timeout, f"a new folio-worker rank {rank}", alive=self.running)

    def stop(self):
        """Ctrl-C, then SIGKILL for anything still running; its exit status."""
        if self.running():
            self.children()
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.children()
            self.proc.kill()
            self.proc.wait()
        for pid in self.leftovers():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return self.proc.returncode


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


    def test_quantized_kv_cache_serves_what_folio_run_gives(self):
        # --kv-cache-dtype passes through folio serve to the scheduler and its
        # worker: one request served over an int8 cache is the offline
        # engine's on the same cache, token for token.
        port, worker_base = free_ports(1), free_ports(2)
        serve = subprocess.Popen(
            [FOLIO, "serve", "--model", DEMO, "--port", str(port), "--worker-base-port",
             str(worker_base), "--metrics-port", "0", "--kv-cache-dtype", "int8"],
            stderr=subprocess.PIPE, text=True)
        try:
            args = ["--temperature", "0", "--max-tokens", "24", "--ignore-eos", PROMPT]
            generated = subprocess.run(
                [FOLIO, "generate", "--address", f"127.0.0.1:{port}", "--wait-s", "120", *args],
                capture_output=True, text=True, timeout=300)
            self.assertEqual(generated.returncode, 0, generated.stderr)
            offline = subprocess.run(
                [FOLIO, "run", "--model", DEMO, "--kv-cache-dtype", "int8", "--prompt", *args[-1:],
                 *args[:-1]],
                capture_output=True, text=True, timeout=300)
            self.assertEqual(offline.returncode, 0, offline.stderr)
            self.assertEqual(generated.stdout.strip(), offline.stdout.strip())
            self.assertGreater(len(generated.stdout.split()), 5)
        finally:
            serve.send_signal(signal.SIGINT)
            _, err = serve.communicate(timeout=60)
        self.assertEqual(serve.returncode, 0, err)
        self.assertIn("in int8", err)  # the scheduler's "serving ... KV blocks ... in int8" line

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

    def test_a_killed_worker_is_restarted(self):
        cluster = ServeCluster(self)
        cluster.wait_healthy()
        (old, argv), = cluster.workers().items()
        os.kill(old, signal.SIGKILL)
        new = cluster.wait_for_new_worker({old})
        self.assertEqual(cluster.workers()[new], argv)  # same flags
        self.assertIn(f"folio serve: folio-worker rank 0 (pid {old}) was killed by signal 9; "
                      "restarting it in 0.5 s (restart 1 of 5 allowed within 60 s)", cluster.log())
        # The new worker binds the old one's port and stays up.
        wait_until(lambda: listening(cluster.worker_base), 30, "the new worker listening",
                   alive=lambda: alive(new))
        time.sleep(1)
        self.assertTrue(alive(new))
        self.assertTrue(cluster.running(), cluster.log())
        self.assertEqual(cluster.log().count("restarting it in"), 1, cluster.log())
        # That the scheduler then requeues, reconnects and serves again is its
        # worker-failure recovery, tested with the scheduler itself; this test
        # covers folio serve's half: the same worker is back on the same port.
        self.assertEqual(cluster.stop(), 0, cluster.log())
        self.assertEqual(cluster.leftovers(), {})

    def test_a_crash_loop_stops_the_cluster(self):
        cluster = ServeCluster(self, "--max-worker-restarts", "2", "--worker-restart-window-s", "60")
        cluster.wait_healthy()
        killed = set()
        for crash in (1, 2, 3):
            pid = cluster.wait_for_new_worker(killed)
            cluster.children()  # remember the scheduler and this worker
            os.kill(pid, signal.SIGKILL)
            killed.add(pid)
            if crash < 3:  # 0.5 s, then 1 s
                backoff = ("0.5", "1")[crash - 1]
                wait_until(lambda: f"restart {crash} of 2" in cluster.log(), 10,
                           f"restart {crash}", alive=cluster.running)
                self.assertIn(f"(pid {pid}) was killed by signal 9; restarting it in {backoff} s "
                              f"(restart {crash} of 2 allowed within 60 s)", cluster.log())
        code = cluster.proc.wait(timeout=60)
        self.assertNotEqual(code, 0, cluster.log())
        self.assertIn(f"folio serve: folio-worker rank 0 crashed 3 times within 60 s (last: pid "
                      f"{pid} was killed by signal 9), more than --max-worker-restarts 2; stopping "
                      "the cluster", cluster.log())
        self.assertEqual(cluster.leftovers(), {})
        self.assertTrue(any(os.path.basename(a[0]) == "folio-scheduler"
                            for a in cluster.seen.values()))

    def test_ctrl_c_during_a_restart_backoff_stops_at_once(self):
        # Three crashes in a row: the third restart waits 2 s, then the fourth 4 s.
        cluster = ServeCluster(self)
        killed = set()
        for crash, backoff in ((1, "0.5"), (2, "1"), (3, "2"), (4, "4")):
            pid = cluster.wait_for_new_worker(killed)
            cluster.children()
            os.kill(pid, signal.SIGKILL)
            killed.add(pid)
            wait_until(lambda: f"restarting it in {backoff} s (restart {crash} of" in cluster.log(),
                       10, f"restart {crash}", alive=cluster.running)
        start = time.monotonic()
        cluster.proc.send_signal(signal.SIGINT)
        self.assertEqual(cluster.proc.wait(timeout=60), 0, cluster.log())
        self.assertLess(time.monotonic() - start, 3.5, "the stop waited for the 4 s backoff")
        self.assertEqual(cluster.workers(), {})
        self.assertNotIn("restart 5 of", cluster.log())
        self.assertEqual(cluster.leftovers(), {})

    def test_max_worker_restarts_0_stops_at_the_first_crash(self):
        cluster = ServeCluster(self, "--max-worker-restarts", "0")
        pid = cluster.wait_for_new_worker(set())
        cluster.children()
        os.kill(pid, signal.SIGKILL)
        self.assertEqual(cluster.proc.wait(timeout=60), 1, cluster.log())
        self.assertIn(f"folio serve: folio-worker rank 0 (pid {pid}) was killed by signal 9; "
                      "stopping the cluster (--max-worker-restarts 0)", cluster.log())
        self.assertNotIn("restarting", cluster.log())
        self.assertEqual(cluster.leftovers(), {})

    def test_bad_restart_flags_are_refused(self):
        cases = [
            (["--max-worker-restarts", "-1"], "--max-worker-restarts '-1': expected a whole number"),
            (["--max-worker-restarts", "two"], "--max-worker-restarts 'two': expected a whole "
                                               "number"),
            (["--max-worker-restarts", "1.5"], "--max-worker-restarts '1.5': expected a whole "
                                               "number"),
            (["--max-worker-restarts"], "--max-worker-restarts needs a value"),
            (["--worker-restart-window-s", "0"], "--worker-restart-window-s '0': expected seconds"),
            (["--worker-restart-window-s", "soon"], "--worker-restart-window-s 'soon': expected "
                                                    "seconds"),
            (["--worker-restart-window-s", "nan"], "--worker-restart-window-s 'nan': expected "
                                                   "seconds"),
        ]
        for flags, message in cases:
            with self.subTest(flags=flags):
                # --tp 0 first: refused after the flags are read, so should a
                # bad value slip through, nothing starts (and the message
                # check fails).
                proc = subprocess.run([FOLIO, "serve", "--tp", "0", *flags],
                                      capture_output=True, text=True, timeout=60)
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertIn(message, proc.stderr)

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
