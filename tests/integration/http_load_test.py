"""1000 concurrent SSE streams against folio-scheduler's OpenAI HTTP API over
loopback: every stream must end with `data: [DONE]` after exactly the tokens
asked for, the scheduler's thread count must stay what it is with one stream
(the HTTP server runs a fixed pool of I/O threads, not a thread per
connection), and every KV block must be back in its pool afterwards. Prints
the figures docs/performance.md quotes. Run by ctest under /usr/bin/python3;
FOLIO_HTTP_LOAD_STREAMS overrides the stream count."""

import asyncio
import json
import os
import resource
import tempfile
import time
import unittest
import urllib.request

from local_cluster import LocalCluster, wait_until

STREAMS = int(os.environ.get("FOLIO_HTTP_LOAD_STREAMS", "1000"))
TOKENS = 16


def threads_of(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    raise AssertionError("no Threads line")


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
        return r.status, r.read().decode()


def gauge(port, name, labels=""):
    for line in get(port, "/metrics")[1].splitlines():
        if line.startswith(name + "{") and labels in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name}{{{labels}}} not exported")


async def one_stream(port, i, opened, release):
    """One streamed completion over a raw connection; returns (tokens, usage
    tokens, ended with [DONE]). Holds the request until every stream's
    connection is open (`release`), so they all run at once."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
    opened.append(i)
    await release.wait()
    body = json.dumps({"prompt": f"And on day {i} God", "max_tokens": TOKENS, "ignore_eos": True,
                       "temperature": 0.7, "seed": i, "logprobs": 0, "stream": True,
                       "stream_options": {"include_usage": True}}).encode()
    writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
    await writer.drain()
    raw = await reader.read()  # until the server closes (Connection: close)
    writer.close()
    head, _, chunked = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head[:100]
    # De-chunk (the transfer coding), then split the SSE events.
    data, pos = b"", 0
    while True:
        eol = chunked.index(b"\r\n", pos)
        size = int(chunked[pos:eol], 16)
        if size == 0:
            break
        data += chunked[eol + 2:eol + 2 + size]
        pos = eol + 2 + size + 2
    events = [e[len(b"data: "):] for e in data.split(b"\n\n") if e]
    tokens, usage = 0, None
    for e in events[:-1]:
        chunk = json.loads(e)
        if chunk["choices"]:
            lp = chunk["choices"][0]["logprobs"]
            tokens += len(lp["tokens"]) if lp else 0
        else:
            usage = chunk["usage"]["completion_tokens"]
    return tokens, usage, events[-1] == b"[DONE]"


async def run_all(port, on_all_open):
    opened, release = [], asyncio.Event()
    tasks = [asyncio.create_task(one_stream(port, i, opened, release)) for i in range(STREAMS)]
    while len(opened) < STREAMS:
        await asyncio.sleep(0.05)
    on_all_open()
    start = time.monotonic()
    release.set()
    results = await asyncio.gather(*tasks)
    return results, time.monotonic() - start


class HttpLoadTest(unittest.TestCase):
    def test_a_thousand_concurrent_streams(self):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 4 * STREAMS)), hard))
        with tempfile.TemporaryDirectory() as tmp:
            cluster = LocalCluster(os.path.join(tmp, "scheduler.log"), http=True,
                                   scheduler_flags=("--max-num-seqs", "256"))
            port = cluster.http_port
            try:
                cluster.wait_ready(lambda: self._healthy(port))
                # A first stream: the threads of a warm server.
                asyncio.run(one_stream(port, -1, [], self._set_event()))
                idle_threads = threads_of(cluster.scheduler.pid)
                busy = {}

                def on_all_open():
                    busy["threads"] = threads_of(cluster.scheduler.pid)

                results, seconds = asyncio.run(run_all(port, on_all_open))
                peak = max(busy["threads"], threads_of(cluster.scheduler.pid))
                wait_until(lambda: gauge(port, "folio_requests_running") == 0, 30, "idle")
                used = gauge(port, "folio_kv_cache_blocks_used", 'pool="device"')
            finally:
                code = cluster.stop()
            log = cluster.log()
        bad = [(i, r) for i, r in enumerate(results) if r != (TOKENS, TOKENS, True)]
        self.assertEqual(bad, [], f"{len(bad)} streams ended wrong, e.g. {bad[:3]}")
        self.assertEqual(used, 0)
        self.assertEqual(code, 0, log)
        # The HTTP server's I/O threads are a fixed pool: 1000 open streams
        # need no more threads than one.
        self.assertLessEqual(peak, idle_threads + 2, (idle_threads, peak))
        print(f"\nhttp load: {STREAMS} concurrent SSE streams x {TOKENS} tokens in "
              f"{seconds:.1f} s ({STREAMS * TOKENS / seconds:.0f} tokens/s); "
              f"folio-scheduler threads: {idle_threads} warm, {peak} with every stream open",
              flush=True)

    @staticmethod
    def _healthy(port):
        try:
            return get(port, "/health")[0] == 200
        except OSError:
            return False

    @staticmethod
    def _set_event():
        e = asyncio.Event()
        e.set()
        return e


if __name__ == "__main__":
    unittest.main()
