"""folio-scheduler's OpenAI-compatible HTTP API driven by the official OpenAI
Node SDK (npm package `openai`, installed by the ctest fixture openai_sdk_npm_ci
into FOLIO_NODE_MODULES): one real local cluster (local_cluster.py) serving the
demo model over HTTP with an API key, and `node --test` running sdk/*.test.mjs
against it; then the streaming files again against a cluster that merges
tokens into fewer SSE events (--stream-interval 3). Afterwards each scheduler
must stop with exit status 0 (it is non-zero when a request, an aborted
stream included, leaked KV blocks).

Run by ctest with FOLIO_SOURCE_DIR, FOLIO_BIN_DIR and FOLIO_NODE_MODULES set,
under /usr/bin/python3."""

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

from local_cluster import DEMO, LocalCluster  # noqa: E402

API_KEY = "folio-sdk-test-key"
NODE_TIMEOUT_S = 420


def http_status(url):
    """The status of GET url (0 when nothing answers)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except (urllib.error.URLError, OSError):
        return 0


class OpenAiNodeSdkTest(unittest.TestCase):
    def setUp(self):
        self.node_modules = os.environ.get("FOLIO_NODE_MODULES", "")
        self.assertTrue(os.path.isfile(os.path.join(self.node_modules, "openai", "package.json")),
                        f"FOLIO_NODE_MODULES={self.node_modules!r} holds no `openai` package "
                        "(the ctest fixture openai_sdk_npm_ci installs it)")
        self.node = shutil.which("node")
        self.assertIsNotNone(self.node, "node is not on PATH (deploy/install-deps.sh)")
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def test_openai_node_sdk_against_a_local_cluster(self):
        self.run_sdk_tests(sorted(glob.glob(os.path.join(HERE, "sdk", "*.test.mjs"))))

    def test_streams_with_a_stream_interval(self):
        """--stream-interval 3: SSE events carry up to three tokens each (text,
        logprobs and usage merged); the streamed completions and chats must
        still equal the unstreamed answers."""
        self.run_sdk_tests([os.path.join(HERE, "sdk", f)
                            for f in ("completions.test.mjs", "chat.test.mjs")],
                           ("--stream-interval", "3"))

    def run_sdk_tests(self, files, scheduler_flags=()):
        """Runs `node --test` over files against a fresh cluster started with
        scheduler_flags; the scheduler must then exit 0."""
        self.assertTrue(files, "no sdk/*.test.mjs")
        cluster = LocalCluster(os.path.join(self.tmp.name, "scheduler.log"), http=True,
                               scheduler_flags=("--api-key", API_KEY, *scheduler_flags))
        stopped = False
        try:
            health = f"http://127.0.0.1:{cluster.http_port}/health"
            cluster.wait_ready(lambda: http_status(health) == 200, timeout=120)
            env = dict(os.environ,
                       FOLIO_OPENAI_BASE_URL=f"http://127.0.0.1:{cluster.http_port}/v1",
                       FOLIO_API_KEY=API_KEY,
                       FOLIO_NODE_MODULES=self.node_modules,
                       NODE_PATH=self.node_modules,
                       FOLIO_DEMO_MODEL=DEMO)
            # One file at a time: the abort test reads the running-request gauge.
            node = subprocess.run(
                [self.node, "--test", "--test-concurrency=1", "--test-reporter=spec", *files],
                cwd=HERE, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                timeout=NODE_TIMEOUT_S, text=True)
            print(node.stdout)
            self.assertEqual(node.returncode, 0,
                             f"node --test failed (exit {node.returncode}); output above; "
                             f"scheduler log:\n{cluster.log()[-4000:]}")
            code = cluster.stop()
            stopped = True
            self.assertEqual(code, 0, "folio-scheduler exit status (non-zero: leaked KV "
                             f"blocks):\n{cluster.log()[-4000:]}")
        finally:
            if not stopped:
                cluster.stop()


if __name__ == "__main__":
    unittest.main()
