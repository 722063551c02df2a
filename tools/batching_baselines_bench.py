#!/usr/bin/env python3
"""The PagedAttention paper's Figure 12 on the real engine: normalized latency
(each request's end-to-end latency over its output tokens, averaged) against
request rate, for folio's paged KV with continuous batching and for the
paper's baselines, each played by folio-scheduler itself:

    folio        --reservation-policy none (blocks as tokens arrive), continuous batching
    orca-max     --reservation-policy max  (max-model-len slots a request), continuous
    orca-pow2    --reservation-policy pow2 (prompt + output rounded up to 2^k), continuous
    ft           --reservation-policy max --batching static (FasterTransformer behind a
                 request-level batcher: a batch runs until its last request ends)

For every system a fresh `folio serve` (one worker) on free 127.0.0.1 ports,
then `folio bench` at each Poisson request rate on the same seeded workload.
Prints a Markdown table, writes every figure to --json and, with --plot, a
PNG (matplotlib, Debian's python3-matplotlib).

    /usr/bin/python3 tools/batching_baselines_bench.py --model /tmp/m/llama7m \\
        --kv-cache-mb 32 --rates 1,2,3,4,6 --num-prompts 100 \\
        --json /tmp/fig12.json --plot docs/figures/batching_baselines.png
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SYSTEMS = {
    "folio": ("folio (paged, continuous)", []),
    "orca-max": ("Orca (Max)", ["--reservation-policy", "max"]),
    "orca-pow2": ("Orca (Pow2)", ["--reservation-policy", "pow2"]),
    "ft": ("FasterTransformer (static, max)",
           ["--reservation-policy", "max", "--batching", "static"]),
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`folio serve` with one system's flags; stop() is its exit status
    (non-zero when KV blocks leaked)."""

    def __init__(self, folio, model, engine_flags, log):
        self.port = free_port()
        self.proc = subprocess.Popen(
            [folio, "serve", "--model", model, "--port", str(self.port), "--http-port", "0",
             "--metrics-port", "0", "--worker-base-port", str(free_port()), *engine_flags],
            stdout=log, stderr=log, start_new_session=True)
        # `folio generate --wait-s` returns once the cluster serves (after its warm-up).
        probe = subprocess.run(
            [folio, "generate", "--address", f"127.0.0.1:{self.port}", "--wait-s", "180",
             "--max-tokens", "1", "--token-ids", "5 6"], capture_output=True, text=True)
        if probe.returncode != 0:
            self.stop()
            raise RuntimeError(f"folio serve did not come up: {probe.stderr.strip()}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            return self.proc.wait()


def run_bench(folio, port, rate, args, out_path):
    cmd = [folio, "bench", "--address", f"127.0.0.1:{port}", "--dataset", args.dataset,
           "--num-prompts", str(args.num_prompts), "--request-rate", str(rate),
           "--seed", str(args.seed), "--timeout-s", str(args.timeout_s), "--json", out_path]
    if args.dataset == "random":
        cmd += ["--input-len", str(args.input_len), "--output-len", str(args.output_len)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"folio bench at {rate} req/s failed: {r.stdout}{r.stderr}")
    with open(out_path) as f:
        j = json.load(f)
    return {
        "rate": rate,
        "normalized_latency_ms": j["normalized_latency_ms"]["mean"],
        "request_throughput": j["request_throughput"],
        "output_throughput": j["output_throughput"],
        "ttft_ms_mean": j["ttft_ms"]["mean"],
        "completed": j["completed"],
        "failed": j["failed"],
    }


def sustained_rate(points, bound_ms):
    """The highest request rate measured whose normalized latency stays
    within bound_ms at that rate and every lower one."""
    best = 0.0
    for p in sorted(points, key=lambda p: p["rate"]):
        if p["failed"] or p["normalized_latency_ms"] > bound_ms:
            break
        best = p["rate"]
    return best


def table(results, rates, bound_ms):
    names = list(results)
    lines = ["| request rate (req/s) | " + " | ".join(SYSTEMS[n][0] for n in names) + " |",
             "|---|" + "---|" * len(names)]
    for rate in rates:
        cells = []
        for n in names:
            p = next(p for p in results[n] if p["rate"] == rate)
            cell = f"{p['normalized_latency_ms']:.2f}"
            if p["failed"]:
                cell += f" ({p['failed']} failed)"
            cells.append(cell)
        lines.append(f"| {rate:g} | " + " | ".join(cells) + " |")
    lines.append(f"| **sustained at ≤ {bound_ms:.1f} ms/token** | " +
                 " | ".join(f"**{sustained_rate(results[n], bound_ms):g}**" for n in names) + " |")
    return "\n".join(lines)


def plot(results, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
    for name, points in results.items():
        pts = sorted(points, key=lambda p: p["rate"])
        ax.plot([p["rate"] for p in pts], [p["normalized_latency_ms"] / 1000 for p in pts],
                marker="o", label=SYSTEMS[name][0])
    ax.set_xlabel("request rate (req/s)")
    ax.set_ylabel("normalized latency (s/token)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--bin-dir", default=os.path.join(REPO, "build", "bin"))
    ap.add_argument("--systems", default=",".join(SYSTEMS),
                    help="comma-separated, of: " + ", ".join(SYSTEMS))
    ap.add_argument("--rates", default="1,2,3,4,6", help="request rates, req/s")
    ap.add_argument("--num-prompts", type=int, default=100)
    ap.add_argument("--dataset", default="sharegpt", help="as folio bench --dataset")
    ap.add_argument("--input-len", type=int, default=64, help="--dataset random")
    ap.add_argument("--output-len", type=int, default=64, help="--dataset random")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout-s", type=float, default=3600)
    ap.add_argument("--latency-bound-ms", type=float, default=0,
                    help="for the sustained-rate row; 0 = 4x folio's latency at the lowest rate")
    ap.add_argument("--json", help="write every figure here")
    ap.add_argument("--plot", help="write the figure here (PNG)")
    ap.add_argument("engine_flags", nargs="*",
                    help="after --: flags for every `folio serve` (e.g. -- --kv-cache-mb 32)")
    args = ap.parse_args()
    folio = os.path.join(args.bin_dir, "folio")
    systems = [s for s in args.systems.split(",") if s]
    for s in systems:
        if s not in SYSTEMS:
            ap.error(f"--systems: unknown system '{s}' (expected {', '.join(SYSTEMS)})")
    try:
        rates = [float(r) for r in args.rates.split(",")]
    except ValueError:
        ap.error(f"--rates: expected comma-separated numbers, got '{args.rates}'")
    if not rates or any(r <= 0 for r in rates):
        ap.error("--rates must be positive")

    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in systems:
            with open(os.path.join(tmp, f"{name}.log"), "w") as log:
                server = Server(folio, args.model, args.engine_flags + SYSTEMS[name][1], log)
                try:
                    results[name] = []
                    for rate in rates:
                        point = run_bench(folio, server.port, rate, args,
                                          os.path.join(tmp, f"{name}-{rate}.json"))
                        results[name].append(point)
                        print(f"{name} at {rate:g} req/s: {point['normalized_latency_ms']:.2f} "
                              f"ms/token, {point['output_throughput']:.0f} tok/s",
                              file=sys.stderr, flush=True)
                finally:
                    code = server.stop()
            if code != 0:
                with open(os.path.join(tmp, f"{name}.log")) as f:
                    sys.exit(f"folio serve ({name}) exited {code}:\n{f.read()[-3000:]}")
    bound = args.latency_bound_ms
    if bound <= 0:
        base = results.get("folio") or next(iter(results.values()))
        bound = 4 * min(base, key=lambda p: p["rate"])["normalized_latency_ms"]
    print(table(results, rates, bound))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rates": rates, "latency_bound_ms": bound, "engine_flags": args.engine_flags,
                       "dataset": args.dataset, "num_prompts": args.num_prompts,
                       "results": results}, f, indent=1)
    if args.plot:
        plot(results, args.plot, f"{os.path.basename(os.path.normpath(args.model))}, "
                                 f"{args.dataset}, {args.num_prompts} requests a point")


if __name__ == "__main__":
    main()
