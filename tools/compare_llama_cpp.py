#!/usr/bin/env python3
"""folio against llama.cpp on this machine, in one run, on the very same
weights (an f32 GGUF from tools/export_gguf.py):

- one stream: ms per output token of `folio run --timing` and of llama-bench's
  text generation test (-p 0 -n N);
- served: output tokens/s of `folio serve` and of `llama-server` (continuous
  batching, one slot per stream), both driven by `folio bench --backend openai`
  with the same seeded random-token workload (ignore_eos, greedy) at each
  --max-concurrency.

Rounds alternate the two systems. tools/build_llama_cpp.sh builds llama.cpp.

    /usr/bin/python3 tools/compare_llama_cpp.py --model /tmp/m/llama7m \\
        --gguf /tmp/m/llama7m.gguf --llama-bin /tmp/llama.cpp/build/bin \\
        --concurrency 1,16,32 --num-prompts 64 --input-len 128 --output-len 256
"""

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url, proc, timeout=180):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited {proc.returncode} before {url} answered")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer within {timeout} s")


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        return proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        return proc.wait()


def bench(folio, port, concurrency, args, tmp, tag):
    path = os.path.join(tmp, f"{tag}.json")
    r = subprocess.run(
        [folio, "bench", "--backend", "openai", "--address", f"127.0.0.1:{port}",
         "--dataset", "random", "--input-len", str(args.input_len), "--output-len",
         str(args.output_len), "--vocab-size", str(args.vocab_size), "--num-prompts",
         str(max(args.num_prompts, concurrency)), "--max-concurrency", str(concurrency),
         "--seed", "1", "--json", path], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"folio bench ({tag}) failed: {r.stdout}{r.stderr}")
    with open(path) as f:
        j = json.load(f)
    if j["failed"]:
        raise RuntimeError(f"folio bench ({tag}): {j['failed']} requests failed")
    return j["output_throughput"], j["tpot_ms"]["mean"]


def serve_folio(folio, args, concurrency, log):
    port = free_port()
    proc = subprocess.Popen(
        [folio, "serve", "--model", args.model, "--port", str(free_port()), "--http-port",
         str(port), "--metrics-port", "0", "--worker-base-port", str(free_port()),
         "--max-model-len", str(args.input_len + args.output_len + 16), *args.folio_flags,
         *args.folio_serve_flags],
        stdout=log, stderr=log, start_new_session=True)
    wait_http(f"http://127.0.0.1:{port}/health", proc)
    return proc, port


def serve_llama(args, concurrency, log):
    port = free_port()
    ctx = concurrency * (args.input_len + args.output_len + 16)
    proc = subprocess.Popen(
        [os.path.join(args.llama_bin, "llama-server"), "-m", args.gguf, "--host", "127.0.0.1",
         "--port", str(port), "-t", str(args.threads), "-tb", str(args.threads),
         "-np", str(concurrency), "-c", str(ctx), "--cont-batching", "-ngl", "0",
         "--no-webui", *args.llama_flags],
        stdout=log, stderr=log, start_new_session=True)
    wait_http(f"http://127.0.0.1:{port}/health", proc)
    return proc, port


def one_stream_folio(folio, args):
    r = subprocess.run(
        [folio, "run", "--model", args.model, "--prompt", "hello world",
         "--max-tokens", str(args.one_stream_tokens), "--ignore-eos", "--temperature", "0",
         "--timing", *args.folio_flags], capture_output=True, text=True)
    m = re.search(r"([0-9.]+) ms per output token", r.stderr)
    if r.returncode != 0 or m is None:
        raise RuntimeError(f"folio run failed: {r.stderr}")
    return float(m.group(1))


def one_stream_llama(args):
    r = subprocess.run(
        [os.path.join(args.llama_bin, "llama-bench"), "-m", args.gguf, "-t", str(args.threads),
         "-p", "0", "-n", str(args.one_stream_tokens), "-r", "2", "-o", "json", *args.llama_flags],
        capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"llama-bench failed: {r.stderr}")
    tests = json.loads(r.stdout)
    return 1000.0 / tests[0]["avg_ts"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--llama-bin", required=True)
    ap.add_argument("--bin-dir", default=os.path.join(REPO, "build", "bin"))
    ap.add_argument("--concurrency", default="1,16,32")
    ap.add_argument("--num-prompts", type=int, default=64)
    ap.add_argument("--input-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=256)
    ap.add_argument("--one-stream-tokens", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--folio-flags", default="", help="extra flags for folio run / serve")
    ap.add_argument("--folio-serve-flags", default="",
                    help="extra flags for folio serve only (e.g. --stream-interval 8)")
    ap.add_argument("--llama-flags", default="", help="extra flags for llama-server / bench")
    args = ap.parse_args()
    args.folio_flags = args.folio_flags.split()
    args.folio_serve_flags = args.folio_serve_flags.split()
    args.llama_flags = args.llama_flags.split()
    with open(os.path.join(args.model, "config.json")) as f:
        args.vocab_size = json.load(f)["vocab_size"]
    folio = os.path.join(args.bin_dir, "folio")
    levels = [int(c) for c in args.concurrency.split(",")]

    rows = {"one stream": {"folio": [], "llama.cpp": []}}
    rows.update({c: {"folio": [], "llama.cpp": []} for c in levels})
    with tempfile.TemporaryDirectory() as tmp:
        for rnd in range(args.rounds):
            order = ["llama.cpp", "folio"] if rnd % 2 == 0 else ["folio", "llama.cpp"]
            for system in order:
                ms = one_stream_llama(args) if system == "llama.cpp" else one_stream_folio(folio, args)
                rows["one stream"][system].append(ms)
                print(f"round {rnd} {system} one stream: {ms:.2f} ms/token", file=sys.stderr, flush=True)
            for c in levels:
                for system in order:
                    with open(os.path.join(tmp, f"{system}-{c}-{rnd}.log"), "w") as log:
                        proc, port = (serve_llama(args, c, log) if system == "llama.cpp"
                                      else serve_folio(folio, args, c, log))
                        try:
                            tps, tpot = bench(folio, port, c, args, tmp, f"{system}-{c}-{rnd}")
                        finally:
                            code = stop(proc)
                    if system == "folio" and code != 0:
                        sys.exit(f"folio serve exited {code} (leaked KV blocks?)")
                    rows[c][system].append(tps)
                    print(f"round {rnd} {system} {c} streams: {tps:.0f} tok/s, TPOT {tpot:.2f} ms",
                          file=sys.stderr, flush=True)

    print(f"| {os.path.basename(os.path.normpath(args.model))} | llama.cpp | folio | folio / llama.cpp |")
    print("|---|---|---|---|")
    fmt = lambda v: ", ".join(f"{x:.2f}" if x < 100 else f"{x:.0f}" for x in v)
    one = rows.pop("one stream")
    print(f"| one stream, ms/token | {fmt(one['llama.cpp'])} | {fmt(one['folio'])} | "
          f"{sum(one['folio']) / sum(one['llama.cpp']):.2f}× the time |")
    for c, r in rows.items():
        print(f"| {c} streams, output tok/s | {fmt(r['llama.cpp'])} | {fmt(r['folio'])} | "
              f"{sum(r['folio']) / sum(r['llama.cpp']):.2f}× |")


if __name__ == "__main__":
    main()
