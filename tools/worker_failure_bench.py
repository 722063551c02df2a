#!/usr/bin/env python3
"""How fast folio notices and recovers from a lost worker rank, on real
processes (tests/integration/local_cluster.py: folio-scheduler + folio-worker on
127.0.0.1, the demo model unless --model).

For each layout (TP=1, TP=2 over shared memory, TP=2 over Gloo):
  - kill -9 of a rank while --streams greedy streams run: the time until the
    scheduler's /health turns 503 (detection), then the rank is started again at
    once and the time until /health is 200 (rebuild: the new process starting,
    loading the model, every rank initialized again), and the longest pause one
    stream saw between two tokens;
  - kill -9 of an idle rank: the time until /health turns 503 (the idle health
    check, every --health-check-interval-s);
  - SIGSTOP (a hung rank) mid-stream: the time until the step deadline fires
    (its floor --step-timeout-min-s, default 10 s), then the rank is killed and
    started again at once and the time until /health is 200 (at TP=2 the other
    rank is blocked in a collective on the hung one; re-Initialize aborts it).

Prints a Markdown table; docs/operations.md quotes it.
    /usr/bin/python3 tools/worker_failure_bench.py [--model DIR] [--streams 16]
"""

import argparse
import concurrent.futures
import json
import os
import signal
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "integration"))
from local_cluster import (DEMO, LocalCluster, http_health_status, http_healthy,  # noqa: E402
                           wait_until)


def stream_gaps(port, max_tokens, started):
    """Streams one greedy completion; (tokens, the longest gap between chunks, s)."""
    body = json.dumps({"prompt": "In the beginning", "max_tokens": max_tokens, "stream": True,
                       "stream_options": {"include_usage": True}, "temperature": 0,
                       "ignore_eos": True}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=body,
                                 headers={"content-type": "application/json"})
    chunks, tokens, longest, last = 0, 0, 0.0, None
    with urllib.request.urlopen(req, timeout=600) as r:
        for line in r:
            if not line.startswith(b"data: {"):
                continue
            usage = json.loads(line[6:]).get("usage")
            if usage:  # the last chunk
                tokens = usage["completion_tokens"]
                continue
            now = time.monotonic()
            if last is not None:
                longest = max(longest, now - last)
            last = now
            chunks += 1
            if chunks == 4:
                started.set_result(True)  # the stream runs: time for the fault
    return tokens, longest


def wait_status(port, status, timeout):
    """Seconds until /health answers `status` (polled every 5 ms)."""
    start = time.monotonic()
    wait_until(lambda: http_health_status(port) == status, timeout, f"/health {status}", interval=0.005)
    return time.monotonic() - start


def killed_mid_stream(cluster, rank, streams, max_tokens):
    port = cluster.http_port
    with concurrent.futures.ThreadPoolExecutor(streams) as pool:
        started = concurrent.futures.Future()
        watched = pool.submit(stream_gaps, port, max_tokens, started)
        others = [pool.submit(stream_gaps, port, max_tokens, concurrent.futures.Future())
                  for _ in range(streams - 1)]
        started.result(timeout=60)
        cluster.workers[rank].send_signal(signal.SIGKILL)
        detect = wait_status(port, 503, 30)
        cluster.restart_worker(rank)
        rebuild = wait_status(port, 200, 120)
        tokens, gap = watched.result(timeout=600)
        assert tokens == max_tokens, tokens
        for f in others:
            assert f.result(timeout=600)[0] == max_tokens
    return detect, rebuild, gap


def killed_idle(cluster, rank):
    cluster.workers[rank].send_signal(signal.SIGKILL)
    detect = wait_status(cluster.http_port, 503, 30)
    cluster.restart_worker(rank)
    wait_status(cluster.http_port, 200, 120)
    return detect


def hung_mid_stream(cluster, rank, max_tokens):
    port = cluster.http_port
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        started = concurrent.futures.Future()
        watched = pool.submit(stream_gaps, port, max_tokens, started)
        started.result(timeout=60)
        cluster.workers[rank].send_signal(signal.SIGSTOP)
        detect = wait_status(port, 503, 120)
        restarted = time.monotonic()
        cluster.restart_worker(rank)
        wait_status(port, 200, 180)
        rebuild = time.monotonic() - restarted
        assert watched.result(timeout=600)[0] == max_tokens
    return detect, rebuild


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=DEMO)
    parser.add_argument("--streams", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=400)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, tp, collectives, victim in (("TP=1", 1, "auto", 0),
                                               ("TP=2, shared memory", 2, "shm", 1),
                                               ("TP=2, Gloo", 2, "gloo", 1)):
            cluster = LocalCluster(os.path.join(tmp, "scheduler.log"), tensor_parallel_size=tp,
                                   model_dir=args.model, http=True,
                                   worker_flags=("--collectives", collectives))
            try:
                cluster.wait_ready(lambda: http_healthy(cluster.http_port))
                detect, rebuild, gap = killed_mid_stream(cluster, victim, args.streams,
                                                         args.max_tokens)
                idle = killed_idle(cluster, victim)
                hung, hung_rebuild = hung_mid_stream(cluster, victim, args.max_tokens)
            except BaseException:
                print(cluster.log(), file=sys.stderr)
                raise
            finally:
                code = cluster.stop()
            assert code == 0, f"folio-scheduler exited {code}"
            rows.append((name, detect, rebuild, gap, idle, hung, hung_rebuild))
    print("| layout | kill -9 mid-stream: detected | rebuilt after restart | longest "
          "token gap | idle kill detected | SIGSTOP detected | SIGSTOP: rebuilt after restart |")
    print("|---|---|---|---|---|---|---|")
    for name, detect, rebuild, gap, idle, hung, hung_rebuild in rows:
        print(f"| {name} | {detect * 1000:.0f} ms | {rebuild * 1000:.0f} ms | "
              f"{gap * 1000:.0f} ms | {idle * 1000:.0f} ms | {hung:.1f} s | "
              f"{hung_rebuild * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
