"""A bounded soak of a real cluster (folio-scheduler + two folio-worker ranks,
TP=2, the demo model, the OpenAI HTTP API on raw asyncio sockets): rounds of
ROUND_REQUESTS requests at once, for FOLIO_SOAK_SECONDS (default 120: no round
starts that would end later; at least MIN_ROUNDS rounds). Each round holds

  - 1040 concurrent SSE streams (/v1/completions and /v1/chat/completions),
    greedy or seeded, of 4..64 tokens (ignore_eos). 910 run to the end: each
    must end with `data: [DONE]` after exactly max_tokens tokens (usage, and
    the logprobs where asked), with finish_reason "length" and with the same
    text as in every other round (sampling is deterministic per seed and
    position, whatever the batch);
  - of those, 80 the client closes mid-stream and 20 right after sending
    (the server must abort them and free their blocks), and 30 aborted by
    request id through the gRPC Abort RPC (they end with finish_reason
    "abort" and [DONE]);
  - 60 bad requests (invalid or truncated JSON, bad fields, an unknown
    model): 4xx in OpenAI's error shape, naming the field.

Once per soak (round 1) an overload burst of BURST_REQUESTS non-streamed
requests comes once every request of the round is queued: past
--max-waiting-requests (a whole round) some get 429 rate_limit_error. Only
the burst may: a round alone stays within the bound. Once per soak (round 2)
worker rank 0 is killed (SIGKILL) mid-round, with most of the round in
flight, and restarted: every request of that round still ends as above,
the streams with the text of the undisturbed rounds.

Every client operation has a timeout. When the cluster is idle after each
round no device block is used, and the scheduler's VmRSS is sampled: the
last sample must be within max(+32 MiB, +25%) of the first (after the
warm-up round), and within +16 MiB of the one after the worker kill's
round (the steady state, where a slow leak would show in a long soak).
Measured on the 2-core dev machine (other builds running): 35.4-35.6 MiB
after warm-up, 40.9-42.3 after the burst round (its 1900 connections), then
40.5..42.6 over 9-13 rounds (2 minutes); with FOLIO_SOAK_SECONDS=300,
40.8..42.3 over 30 rounds (33k requests), and with 480 s and TP=1,
39.9..41.4 over 49 rounds (54k requests). At the end nothing runs or waits,
no device block is used, folio_worker_failures_total is 1 and the scheduler
exits 0 (it checks that no KV block leaked). Prints a summary (outcomes, RSS, wall time).
FOLIO_SOAK_TP=1 runs one rank instead. Run by ctest under /usr/bin/python3."""

import asyncio
import collections
import concurrent.futures
import json
import os
import random
import resource
import sys
import tempfile
import time
import unittest
import urllib.request

from local_cluster import SOURCE_DIR, LocalCluster, http_healthy, wait_until

sys.path.insert(0, os.path.join(SOURCE_DIR, "client", "python"))

import folio_client  # noqa: E402

SOAK_SECONDS = float(os.environ.get("FOLIO_SOAK_SECONDS", "120"))
MIN_ROUNDS = 4  # warm-up, burst, worker kill, one more
# A round: ROUND_REQUESTS requests, all streams but BAD; of the streams,
# CANCEL_MID, CANCEL_EARLY and ABORTS do not run to the end.
ROUND_REQUESTS, BAD, CANCEL_MID, CANCEL_EARLY, ABORTS = 1100, 60, 80, 20, 30
MAX_NUM_SEQS = 256
# A round's requests arrive faster than the engine moves them into the
# running batch, so all of them may wait at once: the bound is a whole round
# (of which 1040 are submitted). The burst comes once they are all queued
# (about 700 still waiting): it overflows the 400 or so places left.
MAX_WAITING = ROUND_REQUESTS
BURST_REQUESTS = 800
BURST_TOKENS = 4
STREAM_TIMEOUT_S = 240  # any one client operation
RSS_BOUND_MIB, RSS_BOUND_RATIO = 32, 0.25  # the last sample over the post-warm-up one
RSS_STEADY_MIB = 16  # the last sample over the one after the worker kill's round
BURST_ROUND, KILL_ROUND = 1, 2
TP = int(os.environ.get("FOLIO_SOAK_TP", "2"))
VICTIM = 0  # the rank killed

PROMPTS = ["In the beginning", "And God said", "The earth was", "Let there be light",
           "And the evening", "And on day", "Then God saw"]
LENGTHS = [4, 8, 12, 16, 24, 32, 48, 64]
LONG = 32  # cancelled and aborted streams are at least this long

# (body, status, param) of the bad requests; param None: any.
BAD_REQUESTS = [
    (("/v1/completions", b"{not json"), 400, None),
    (("/v1/completions", b'{"prompt": "And", "max_tokens": 4, "stream": tr'), 400, None),
    (("/v1/completions", {"prompt": "x", "temperature": -1, "stream": True}), 400, "temperature"),
    (("/v1/completions", {"prompt": "x", "top_p": "high", "stream": True}), 400, "top_p"),
    (("/v1/completions", {"prompt": "x", "max_tokens": 0, "stream": True}), 400, "max_tokens"),
    (("/v1/completions", {"max_tokens": 3, "stream": True}), 400, "prompt"),
    (("/v1/completions", {"prompt": [5, 99999]}), 400, "prompt"),
    (("/v1/completions", {"prompt": "x", "model": "gpt-4", "stream": True}), 404, "model"),
    (("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                               "tools": [{"type": "function"}], "stream": True}), 400, "tools"),
]


def spec(i):
    """Request i's parameters: the same every round (so its text is too)."""
    chat = i % 8 == 7
    body = {"max_tokens": LENGTHS[(i * 5) % len(LENGTHS)], "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}}
    prompt = f"{PROMPTS[i % len(PROMPTS)]} {i % 11}"
    if chat:
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    if i % 2 == 0:
        body["temperature"] = 0
    else:
        body.update(temperature=0.8, top_p=0.95, seed=1000 + i)
    if i % 3 == 0:
        body.update({"logprobs": True, "top_logprobs": 0} if chat else {"logprobs": 0})
    return ("/v1/chat/completions" if chat else "/v1/completions"), body


def plan(round_no):
    """What each of the round's requests does: stream, cancel_mid,
    cancel_early, abort or bad (then the index into BAD_REQUESTS)."""
    rng = random.Random(round_no)
    kinds = ["stream"] * ROUND_REQUESTS
    long = [i for i in range(ROUND_REQUESTS) if spec(i)[1]["max_tokens"] >= LONG]
    chosen = iter(rng.sample(long, CANCEL_MID + CANCEL_EARLY + ABORTS))
    for kind, count in (("cancel_mid", CANCEL_MID), ("cancel_early", CANCEL_EARLY),
                        ("abort", ABORTS)):
        for _ in range(count):
            kinds[next(chosen)] = kind
    others = [i for i in range(ROUND_REQUESTS) if kinds[i] == "stream"]
    for n, i in enumerate(rng.sample(others, BAD)):
        kinds[i] = ("bad", n % len(BAD_REQUESTS))
    return kinds


def vm_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS line")


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
        return r.read().decode()


def metric(port, name, labels=""):
    """One series of /metrics (0 when absent)."""
    for line in get(port, "/metrics").splitlines():
        if (line.startswith(name + "{") or line.startswith(name + " ")) and labels in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def request_bytes(path, body):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return (b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n" % (path.encode(), len(data)) + data)


def parse_response(raw):
    """(status, body bytes) of a whole HTTP/1.1 response (chunked or not)."""
    head, _, rest = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    headers = {l.split(b":", 1)[0].strip().lower(): l.split(b":", 1)[1].strip()
               for l in lines[1:] if b":" in l}
    if headers.get(b"transfer-encoding") != b"chunked":
        return status, rest
    data, pos = b"", 0
    while True:
        eol = rest.index(b"\r\n", pos)
        size = int(rest[pos:eol], 16)
        if size == 0:
            return status, data
        data += rest[eol + 2:eol + 2 + size]
        pos = eol + 2 + size + 2


def error_problem(status, body, want_status, want_param):
    """None if body is OpenAI's error shape with that status (and param)."""
    try:
        err = json.loads(body)
    except ValueError:
        return f"{status}: not JSON: {body[:100]!r}"
    if status != want_status:
        return f"status {status}, wanted {want_status}: {err}"
    if set(err) != {"error"} or set(err["error"]) != {"message", "type", "param", "code"}:
        return f"not OpenAI's error shape: {err}"
    if not err["error"]["message"]:
        return f"no message: {err}"
    if want_param is not None and err["error"]["param"] != want_param:
        return f"param {err['error']['param']!r}, wanted {want_param!r}: {err}"
    return None


def check_stream(body, want_tokens, want_reason="length"):
    """(problem or None, text, completion_tokens) of a whole SSE body."""
    events = [e[len(b"data: "):] for e in body.split(b"\n\n") if e]
    if not events or events[-1] != b"[DONE]":
        return f"no [DONE]: {events[-2:]}", None, None
    text, logprob_tokens, usage, reasons, has_logprobs = "", 0, None, [], False
    for e in events[:-1]:
        chunk = json.loads(e)
        if "error" in chunk:
            return f"error event: {chunk}", None, None
        if not chunk["choices"]:
            usage = chunk["usage"]["completion_tokens"]
            continue
        c = chunk["choices"][0]
        text += c["delta"].get("content", "") if "delta" in c else c["text"]
        if c["finish_reason"]:
            reasons.append(c["finish_reason"])
        lp = c["logprobs"]
        if lp:
            has_logprobs = True
            logprob_tokens += len(lp["content"]) if "content" in lp else len(lp["tokens"])
    if reasons != [want_reason]:
        return f"finish reasons {reasons}, wanted {want_reason}", None, None
    if want_tokens is not None:
        if usage != want_tokens:
            return f"usage {usage} tokens, wanted {want_tokens}", None, None
        if has_logprobs and logprob_tokens != want_tokens:
            return f"{logprob_tokens} logprobs, wanted {want_tokens}", None, None
    return None, text, usage


class Round:
    """The shared state of one round's tasks."""

    def __init__(self, expected_admissions):
        self.opened = 0
        self.release = asyncio.Event()
        self.admitted = 0  # answered (headers) or refused
        self.expected_admissions = expected_admissions
        self.all_admitted = asyncio.Event()
        self.finished = 0

    def admit(self):
        self.admitted += 1
        if self.admitted >= self.expected_admissions:
            self.all_admitted.set()


async def read_until(reader, raw, marker, count):
    while raw.count(marker) < count:
        data = await reader.read(65536)
        if not data:
            break
        raw += data
    return raw


async def one_request(port, rnd, round_no, i, kind, abort):
    """Runs request i of a round; returns (outcome, problem or None, text)."""
    if isinstance(kind, tuple):
        (path, body), want_status, want_param = BAD_REQUESTS[kind[1]]
    else:
        path, body = spec(i)
        if kind == "abort":
            body = dict(body, request_id=f"soak-{round_no}-{i}")
    admitted = kind == "cancel_early"  # not counted
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
    try:
        rnd.opened += 1
        await rnd.release.wait()
        writer.write(request_bytes(path, body))
        await writer.drain()
        if kind == "cancel_early":
            return "cancelled early", None, None
        raw = await read_until(reader, b"", b"\r\n\r\n", 1)
        rnd.admit()
        admitted = True
        if not raw.startswith(b"HTTP/1.1 200") and not isinstance(kind, tuple):
            raw += await reader.read()
            status, data = parse_response(raw)
            return "failed", f"HTTP {status}: {data[:300]!r}", None
        if isinstance(kind, tuple):
            raw += await reader.read()
            status, data = parse_response(raw)
            problem = error_problem(status, data, want_status, want_param)
            return f"refused {status}", problem, None
        if kind == "cancel_mid":
            raw = await read_until(reader, raw, b"data: ", 1 + i % 3)
            if raw.count(b"data: ") < 1 + i % 3:
                return "failed", f"ended before it was cancelled: {raw[-200:]!r}", None
            return "cancelled mid-stream", None, None
        if kind == "abort":
            raw = await read_until(reader, raw, b"data: ", 2)
            found = await abort(body["request_id"])
            raw += await reader.read()
            _, data = parse_response(raw)
            problem, _, tokens = check_stream(data, None, "abort" if found else "length")
            if problem is None and found and tokens >= body["max_tokens"]:
                problem = f"aborted after all {tokens} tokens"
            return ("aborted" if found else "finished before its abort"), problem, None
        raw += await reader.read()
        _, data = parse_response(raw)
        problem, text, _ = check_stream(data, body["max_tokens"])
        rnd.finished += 1
        return "finished", problem, text
    finally:
        if not admitted:  # failed before its answer began: do not hold the round up
            rnd.admit()
        writer.close()


async def burst_request(port, i):
    body = {"prompt": f"{PROMPTS[i % len(PROMPTS)]} burst", "max_tokens": BURST_TOKENS,
            "ignore_eos": True, "temperature": 0}
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
    try:
        writer.write(request_bytes("/v1/completions", body))
        await writer.drain()
        status, data = parse_response(await reader.read())
    finally:
        writer.close()
    if status == 429:
        problem = error_problem(status, data, 429, None)
        if problem is None and json.loads(data)["error"]["type"] != "rate_limit_error":
            problem = f"429 of type {json.loads(data)['error']['type']}"
        return "burst 429", problem, None
    if status != 200:
        return "failed", f"burst HTTP {status}: {data[:300]!r}", None
    tokens = json.loads(data)["usage"]["completion_tokens"]
    return "burst 200", (None if tokens == BURST_TOKENS else f"burst: {tokens} tokens"), None


async def with_timeout(coro, what):
    try:
        return await asyncio.wait_for(coro, STREAM_TIMEOUT_S)
    except asyncio.TimeoutError:
        return "hung", f"{what}: no end within {STREAM_TIMEOUT_S} s", None
    except (OSError, ValueError, KeyError, IndexError) as e:
        return "failed", f"{what}: {type(e).__name__}: {e}", None


async def run_round(port, round_no, pool, abort, fault):
    """One round; returns [(index or 'burst', kind, outcome, problem, text)].
    abort(request_id) and fault() block: they run on `pool`."""
    kinds = plan(round_no)
    rnd = Round(sum(1 for k in kinds if k != "cancel_early"))
    loop = asyncio.get_running_loop()

    async def abort_async(request_id):
        return await loop.run_in_executor(pool, abort, request_id)

    tasks = [asyncio.create_task(with_timeout(one_request(port, rnd, round_no, i, k, abort_async),
                                              f"round {round_no} request {i} ({k})"))
             for i, k in enumerate(kinds)]
    deadline = time.monotonic() + 60
    while rnd.opened < len(tasks) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    rnd.release.set()
    extra = []
    if round_no == BURST_ROUND:
        # Every regular request is queued (or refused) first: only the burst
        # may meet the bound.
        await asyncio.wait_for(rnd.all_admitted.wait(), STREAM_TIMEOUT_S)
        burst = [asyncio.create_task(with_timeout(burst_request(port, b), f"burst {b}"))
                 for b in range(BURST_REQUESTS)]
        extra = [("burst", "burst") + r for r in await asyncio.gather(*burst)]
    if round_no == KILL_ROUND:
        await asyncio.wait_for(rnd.all_admitted.wait(), STREAM_TIMEOUT_S)
        deadline = time.monotonic() + STREAM_TIMEOUT_S
        while rnd.finished < 100 and time.monotonic() < deadline:  # mid-round: some done
            await asyncio.sleep(0.02)
        await loop.run_in_executor(pool, fault, sum(not t.done() for t in tasks))
    results = await asyncio.gather(*tasks)
    return [(i, kinds[i]) + r for i, r in enumerate(results)] + extra


class SoakTest(unittest.TestCase):
    def test_soak(self):
        start = time.monotonic()
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 8192)), hard))
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        cluster = LocalCluster(os.path.join(tmp.name, "scheduler.log"), http=True,
                               tensor_parallel_size=TP,
                               scheduler_flags=("--max-num-seqs", str(MAX_NUM_SEQS),
                                                "--max-waiting-requests", str(MAX_WAITING)))
        stopped = {}

        def stop():
            if "code" not in stopped:
                stopped["code"] = cluster.stop()
            return stopped["code"]

        self.addCleanup(stop)  # also when the test fails: no process outlives it
        port = cluster.http_port
        cluster.wait_ready(lambda: http_healthy(port))
        grpc = folio_client.FolioClient(
            cluster.address, folio_client.generate_stubs(os.path.join(tmp.name, "stubs")),
            timeout=30)
        self.addCleanup(grpc.close)
        grpc.wait_ready(timeout=60)
        pool = concurrent.futures.ThreadPoolExecutor(8)
        self.addCleanup(pool.shutdown)
        kill = {}

        def fault(in_flight):
            kill["in_flight"] = in_flight
            t = time.monotonic()
            cluster.workers[VICTIM].kill()  # SIGKILL
            cluster.workers[VICTIM].wait()
            wait_until(lambda: not http_healthy(port), 30, "/health 503 after the kill",
                       alive=cluster.alive)
            kill["noticed_s"] = time.monotonic() - t
            cluster.restart_worker(VICTIM)

        outcomes = collections.Counter()
        problems, reference, rss, round_seconds = [], {}, [], []
        kill_round_compared = 0
        aborted_before = metric(port, "folio_request_success_total", 'finish_reason="abort"')
        round_no = 0
        # Another round only while it should end within SOAK_SECONDS.
        while round_no < MIN_ROUNDS or (
                time.monotonic() - start + max(round_seconds[-3:]) < SOAK_SECONDS):
            t0 = time.monotonic()
            results = asyncio.run(run_round(port, round_no, pool, grpc.abort, fault))
            round_seconds.append(time.monotonic() - t0)
            for i, kind, outcome, problem, text in results:
                outcomes[outcome] += 1
                if problem is None and text is not None:
                    if i in reference:
                        if reference[i] != text:
                            problem = f"text {text!r}, an earlier round's {reference[i]!r}"
                        kill_round_compared += round_no == KILL_ROUND
                    reference.setdefault(i, text)
                if problem is not None:
                    problems.append(f"round {round_no} request {i} ({kind}): {problem}")
            if round_no == KILL_ROUND:
                wait_until(lambda: http_healthy(port), 60, "/health 200 after the restart")
            wait_until(lambda: metric(port, "folio_requests_running") == 0
                       and metric(port, "folio_requests_waiting") == 0, 60,
                       f"idle after round {round_no}")
            used = metric(port, "folio_kv_cache_blocks_used", 'pool="device"')
            if used:
                problems.append(f"round {round_no}: {used:.0f} device blocks used when idle")
            rss.append(vm_rss_kib(cluster.scheduler.pid))
            print(f"soak round {round_no}: {round_seconds[-1]:.1f} s, "
                  f"scheduler VmRSS {rss[-1] / 1024:.1f} MiB", flush=True)
            self.assertEqual(problems[:10], [], f"{len(problems)} requests ended wrong")
            round_no += 1

        used = metric(port, "folio_kv_cache_blocks_used", 'pool="device"')
        running = metric(port, "folio_requests_running")
        waiting = metric(port, "folio_requests_waiting")
        failures = metric(port, "folio_worker_failures_total")
        aborted = (metric(port, "folio_request_success_total", 'finish_reason="abort"')
                   - aborted_before)
        code = stop()
        log = cluster.log()
        wall = time.monotonic() - start

        post_warmup, after_faults, last = rss[0] / 1024, rss[KILL_ROUND] / 1024, rss[-1] / 1024
        bound = post_warmup + max(RSS_BOUND_MIB, RSS_BOUND_RATIO * post_warmup)
        print(f"\nsoak: {round_no} rounds of {ROUND_REQUESTS} concurrent requests in "
              f"{wall:.0f} s wall (rounds {', '.join(f'{s:.0f}' for s in round_seconds)} s); "
              f"overload burst of {BURST_REQUESTS} in round {BURST_ROUND}; TP={TP}, rank "
              f"{VICTIM} killed (SIGKILL) in round {KILL_ROUND} with {kill['in_flight']} "
              f"requests in flight, /health 503 {kill['noticed_s']:.1f} s after the kill, "
              f"restarted", flush=True)
        print("soak outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())),
              flush=True)
        print(f"soak: {kill_round_compared} streams of the kill round had the text of an "
              f"undisturbed round; {int(aborted)} requests aborted by the server "
              f"(client gone or Abort)", flush=True)
        print("soak scheduler VmRSS (MiB) after each round: "
              + ", ".join(f"{k / 1024:.1f}" for k in rss)
              + f"; bound {bound:.1f} (first post-warm-up {post_warmup:.1f} + "
              f"max({RSS_BOUND_MIB} MiB, {RSS_BOUND_RATIO:.0%})), and at most "
              f"{after_faults + RSS_STEADY_MIB:.1f} (+{RSS_STEADY_MIB} MiB over the kill round's)",
              flush=True)

        self.assertEqual(problems[:10], [])
        self.assertEqual(outcomes["hung"] + outcomes["failed"], 0)
        self.assertGreater(outcomes["burst 429"], 0, "the burst met no --max-waiting-requests")
        self.assertGreater(outcomes["burst 200"], 0)
        self.assertGreater(outcomes["aborted"], 0)
        self.assertGreater(kill_round_compared, 500)
        # Every mid-stream cancellation and Abort RPC that found its request
        # ended it by abort (early cancellations may end before submission).
        self.assertGreaterEqual(aborted, outcomes["cancelled mid-stream"] + outcomes["aborted"])
        self.assertLessEqual(last, bound, f"scheduler VmRSS grew (KiB): {rss}")
        self.assertLessEqual(last, after_faults + RSS_STEADY_MIB,
                             f"scheduler VmRSS grew after the faults (KiB): {rss}")
        self.assertEqual(used, 0)
        self.assertEqual((running, waiting), (0, 0))
        self.assertEqual(failures, 1)
        self.assertEqual(code, 0, f"folio-scheduler exited {code} (leaked blocks?):\n{log[-3000:]}")


if __name__ == "__main__":
    unittest.main()
