"""A real local cluster for the Python integration tests: folio-worker
processes and a folio-scheduler on free 127.0.0.1 ports, started and stopped
by the test (the Python twin of cluster_harness.h). stop() returns the
scheduler's exit status, which is non-zero when it found KV blocks leaked
after the last request."""

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

SOURCE_DIR = os.environ.get("FOLIO_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BIN_DIR = os.environ.get("FOLIO_BIN_DIR", os.path.join(SOURCE_DIR, "build", "bin"))
DEMO = os.path.join(SOURCE_DIR, "models", "folio-demo")
# One kernel thread per worker: the tests share two cores.
WORKER_ENV = dict(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE")


def free_port():
    """A port nothing listens on right now (bound then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_healthy(port):
    """True once the HTTP API's /health answers 200."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
            return r.status == 200
    except (urllib.error.URLError, ConnectionError, OSError):
        return False


def http_health_status(port):
    """The HTTP API's /health status code (200 serving, 503 not), None when nothing answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except (urllib.error.URLError, ConnectionError, OSError):
        return None


def wait_until(condition, timeout, what, alive=None, interval=0.05):
    """Polls condition() until it returns something truthy (returned), or raises
    after `timeout` seconds or as soon as alive() turns false."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if alive is not None and not alive():
            raise AssertionError(f"gave up waiting for {what}: the process exited")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout} s")
        time.sleep(interval)


class LocalCluster:
    """tensor_parallel_size workers and a scheduler with extra flags and environment.
    The scheduler's stderr is kept in `log_path` (for assertions on its messages)."""

    def __init__(self, log_path, tensor_parallel_size=1, scheduler_flags=(), scheduler_env=None,
                 model_dir=DEMO, http=False, worker_flags=()):
        """http: also serve the OpenAI HTTP API, on a free port (self.http_port).
        worker_flags: extra flags of every folio-worker."""
        self.log_path = log_path
        self.port = free_port()
        self.http_port = free_port() if http else 0
        worker_ports = [free_port() for _ in range(tensor_parallel_size)]
        self._worker_env = dict(os.environ, **WORKER_ENV)
        self._worker_args = [[os.path.join(BIN_DIR, "folio-worker"), "--rank", str(r), "--port",
                              str(p), "--metrics-port", "0", *worker_flags]
                             for r, p in enumerate(worker_ports)]
        self.workers = [self._spawn_worker(r) for r in range(tensor_parallel_size)]
        self._log = open(log_path, "w")
        self.scheduler = subprocess.Popen(
            [os.path.join(BIN_DIR, "folio-scheduler"), "--model", model_dir,
             "--port", str(self.port),
             "--workers", ",".join(f"127.0.0.1:{p}" for p in worker_ports),
             "--metrics-port", "0", "--http-port", str(self.http_port), *scheduler_flags],
            env=dict(os.environ, **(scheduler_env or {})), stderr=self._log)

    def _spawn_worker(self, rank):
        return subprocess.Popen(self._worker_args[rank], env=self._worker_env,
                                stdout=subprocess.DEVNULL)

    def restart_worker(self, rank):
        """Starts rank `rank` again (killing it first if it runs), as `folio serve`
        or Kubernetes would after a crash."""
        if self.workers[rank].poll() is None:
            self.workers[rank].kill()
        self.workers[rank].wait()
        self.workers[rank] = self._spawn_worker(rank)

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    def alive(self):
        return self.scheduler.poll() is None

    def log(self):
        with open(self.log_path) as f:
            return f.read()

    def wait_ready(self, probe, timeout=120):
        """Polls probe() (true once the scheduler serves) with a deadline."""
        return wait_until(probe, timeout, "folio-scheduler serving", alive=self.alive)

    def stop(self, sig=signal.SIGINT, timeout=30):
        """SIGINT to the scheduler (it ends every stream at once, checks that every
        KV block is back and stops the workers; SIGTERM would let the streams
        finish first, for --drain-timeout-s); its exit status."""
        if self.scheduler.poll() is None:
            self.scheduler.send_signal(sig)
        try:
            code = self.scheduler.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.scheduler.kill()
            code = self.scheduler.wait()
        for w in self.workers:
            try:
                w.wait(timeout=15)
            except subprocess.TimeoutExpired:
                w.kill()
                w.wait()
        self._log.close()
        return code
