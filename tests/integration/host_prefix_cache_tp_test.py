"""The prefix cache's host tier under tensor parallelism, with real processes
(local_cluster.py): folio-scheduler and two folio-worker ranks on the demo
model, a device pool too small to keep a shared prompt prefix while other
prompts run, and a host pool. The prefix's cached blocks are copied to the host
as the device evicts them and come back by swap-in on the next prefix hit, on
every rank (each worker's folio_worker_swap_bytes_total), and the tokens,
greedy and seeded-sampled, are the ones computed without the tier
(--no-host-prefix-cache) and with one rank. Every cluster must exit 0 (no KV
block leaked). The in-process twin is tests/worker/host_prefix_cache_test.cc.
Run by ctest under /usr/bin/python3."""

import os
import re
import sys
import tempfile
import threading
import unittest
import urllib.request

from local_cluster import SOURCE_DIR, LocalCluster, free_port, http_healthy, wait_until

sys.path.insert(0, os.path.join(SOURCE_DIR, "client", "python"))

import folio_client  # noqa: E402

BLOCK_SIZE = 16
DEVICE_BLOCKS = 12  # 192 token slots: two 96-token requests fill the pool
HOST_BLOCKS = 32
MAX_TOKENS = 8
# 4 full blocks shared by every turn of the conversation.
PREFIX_BLOCKS = 4


def tokens(n, base):
    """n token ids, none special (the demo's BOS/EOS are 2046/2047)."""
    return [base + (i * 7) % 200 for i in range(n)]


PREFIX = tokens(PREFIX_BLOCKS * BLOCK_SIZE, 3)
# The conversation's turns: the shared prefix and a continuation each.
FIRST_TURN = PREFIX + [1500, 1501, 1502, 1503, 1504, 1505]
SECOND_TURN = PREFIX + [1600, 1601, 1602, 1603, 1604, 1605, 1606, 1607, 1608]
SAMPLED_TURN = PREFIX + [1700, 1701, 1702]
# Other long prompts: 88 + 8 tokens = 6 blocks each, so two of them running
# together take the whole device pool and evict every cached block.
OTHERS = [tokens(88, base) for base in (300, 600, 900, 1200, 150, 1800)]
GREEDY = dict(max_tokens=MAX_TOKENS, temperature=0.0)
SAMPLED = dict(max_tokens=MAX_TOKENS, temperature=0.9, top_p=1.0, seed=1234)


def metrics_text(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode()


def metric(text, name, **labels):
    """Sum of the series `name` whose labels include `labels` (0 when absent)."""
    total = 0.0
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(3) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(m.group(4))
    return total


class WorkerMetricsCluster(LocalCluster):
    """A LocalCluster whose workers serve Prometheus metrics, each on a port of
    its own (self.worker_metrics_ports[rank])."""

    def _spawn_worker(self, rank):
        if not hasattr(self, "worker_metrics_ports"):
            self.worker_metrics_ports = [free_port() for _ in self._worker_args]
        args = self._worker_args[rank]
        args[args.index("--metrics-port") + 1] = str(self.worker_metrics_ports[rank])
        return super()._spawn_worker(rank)


class Run:
    """One cluster's run of the workload: its outputs, scheduler metrics and
    per-rank swap bytes."""

    def __init__(self, outputs, usage, metrics, worker_swap, block_bytes, info):
        self.outputs, self.usage, self.metrics = outputs, usage, metrics
        self.worker_swap, self.block_bytes, self.info = worker_swap, block_bytes, info


def run_workload(tmp, name, tensor_parallel_size, host_tier):
    flags = ["--block-size", str(BLOCK_SIZE), "--num-device-blocks", str(DEVICE_BLOCKS),
             "--swap-space-mb", "8", "--num-host-blocks", str(HOST_BLOCKS),
             "--enable-prefix-caching", "--max-num-seqs", "2",
             "--host-prefix-cache" if host_tier else "--no-host-prefix-cache"]
    cluster = WorkerMetricsCluster(os.path.join(tmp, f"{name}.log"),
                                   tensor_parallel_size=tensor_parallel_size,
                                   scheduler_flags=flags, http=True)
    client = None
    try:
        cluster.wait_ready(lambda: http_healthy(cluster.http_port), timeout=60)
        client = folio_client.FolioClient(cluster.address, STUBS, timeout=60)
        info = client.wait_ready(timeout=30)
        outputs, usage = {}, {}

        def generate(key, prompt, params):
            result = client.generate(token_ids=prompt, **params)
            seq = result.sequences[0]
            assert seq.finish_reason == "length", (key, seq)
            outputs[key] = list(seq.token_ids)
            usage[key] = result.cached_prompt_tokens

        def together(*requests):
            """Runs the requests at once (they share the batch) and waits for all."""
            threads = [threading.Thread(target=generate, args=r) for r in requests]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            for key, _, _ in requests:
                assert key in outputs, f"{name}: request {key} failed (see {cluster.log_path})"

        # Turn 1: the conversation starts; its prefix blocks are cached.
        generate("first", FIRST_TURN, GREEDY)
        generate("sampled", SAMPLED_TURN, SAMPLED)
        # Other long prompts, two at a time, take every device block: the
        # prefix's cached blocks are evicted (to the host, with the tier).
        together(("other0", OTHERS[0], GREEDY), ("other1", OTHERS[1], GREEDY))
        together(("other2", OTHERS[2], GREEDY), ("other3", OTHERS[3], SAMPLED))
        # Turn 2: the prefix again, with another continuation (the prefix hit
        # that the tier serves from the host); then turn 1 again (a device
        # hit), which must repeat its tokens.
        generate("second", SECOND_TURN, GREEDY)
        generate("first_again", FIRST_TURN, GREEDY)
        # Evicted once more (by prompts seen for the first time, so that the
        # only host hits are the prefix's), the prefix comes back from the
        # host for the seeded sampled request, which must repeat its tokens too.
        together(("other4", OTHERS[4], GREEDY), ("other5", OTHERS[5], GREEDY))
        generate("sampled_again", SAMPLED_TURN, SAMPLED)

        # The scheduler records a step's metrics before it delivers its
        # outputs; a worker records its step after answering it.
        text = metrics_text(cluster.http_port)
        expect_in = metric(text, "folio_prefix_cache_host_tier_bytes_total", direction="from_host")
        expect_out = metric(text, "folio_prefix_cache_host_tier_bytes_total", direction="to_host")

        def worker_swap():
            swap = []
            for port in cluster.worker_metrics_ports:
                w = metrics_text(port)
                swap.append((metric(w, "folio_worker_swap_bytes_total", direction="in"),
                             metric(w, "folio_worker_swap_bytes_total", direction="out")))
            totals = (sum(s[0] for s in swap), sum(s[1] for s in swap))
            return swap if totals == (expect_in, expect_out) else None

        swap = wait_until(worker_swap, 10, f"{name}: the workers' swap bytes adding up to the "
                          f"scheduler's ({expect_in} in, {expect_out} out)")
        block_bytes = metric(text, "folio_prefix_cache_host_tier_bytes_total") / max(
            metric(text, "folio_prefix_cache_host_tier_blocks_total"), 1)
        return Run(outputs, usage, text, swap, block_bytes, info)
    finally:
        if client is not None:
            client.close()
        code = cluster.stop()
        assert code == 0, f"{name}: folio-scheduler exited with {code} (a leaked KV block?):\n" + \
            cluster.log()


STUBS = None


class HostPrefixCacheTpTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        global STUBS
        cls.tmp = tempfile.TemporaryDirectory()
        STUBS = folio_client.generate_stubs(os.path.join(cls.tmp.name, "stubs"))
        cls.on = run_workload(cls.tmp.name, "tp2-tier-on", 2, host_tier=True)
        cls.off = run_workload(cls.tmp.name, "tp2-tier-off", 2, host_tier=False)
        cls.tp1 = run_workload(cls.tmp.name, "tp1-tier-on", 1, host_tier=True)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def value(self, run, name, **labels):
        return metric(run.metrics, name, **labels)

    def test_configuration(self):
        for run, tp, tier in ((self.on, 2, True), (self.off, 2, False), (self.tp1, 1, True)):
            self.assertEqual(run.info.tensor_parallel_size, tp)
            self.assertEqual(run.info.num_device_blocks, DEVICE_BLOCKS)
            self.assertEqual(run.info.host_prefix_cache, tier)
            self.assertEqual(self.value(run, "folio_kv_cache_blocks_total", pool="host"),
                             HOST_BLOCKS)

    def test_the_tier_moves_the_evicted_prefix_to_the_host_and_back(self):
        for run in (self.on, self.tp1):
            to_host = self.value(run, "folio_prefix_cache_host_tier_blocks_total",
                                 direction="to_host")
            from_host = self.value(run, "folio_prefix_cache_host_tier_blocks_total",
                                   direction="from_host")
            host_hits = self.value(run, "folio_prefix_cache_host_hits_total")
            # The second turn and the repeated sampled one find the prefix's
            # 4 blocks on the host only: 2 x 64 tokens, 2 x 4 blocks swapped in.
            self.assertEqual(host_hits, 2 * len(PREFIX))
            self.assertEqual(from_host, 2 * PREFIX_BLOCKS)
            self.assertGreaterEqual(to_host, from_host)
            self.assertEqual(run.usage["second"], len(PREFIX))
            self.assertEqual(run.usage["sampled_again"], len(PREFIX))
            self.assertEqual(self.value(run, "folio_prefix_cache_host_tier_over_budget_blocks_total"),
                             0)

    def test_every_rank_swaps_its_shard(self):
        to_host = self.value(self.on, "folio_prefix_cache_host_tier_blocks_total",
                             direction="to_host")
        from_host = self.value(self.on, "folio_prefix_cache_host_tier_blocks_total",
                               direction="from_host")
        per_rank = self.on.block_bytes / 2
        self.assertEqual(len(self.on.worker_swap), 2)
        for rank, (swap_in, swap_out) in enumerate(self.on.worker_swap):
            self.assertEqual(swap_in, from_host * per_rank, f"rank {rank}")
            self.assertEqual(swap_out, to_host * per_rank, f"rank {rank}")
            self.assertGreater(swap_in, 0, f"rank {rank}")
            self.assertGreater(swap_out, 0, f"rank {rank}")
        # A rank holds half the KV heads: half the bytes of a one-rank block.
        self.assertEqual(self.tp1.block_bytes, self.on.block_bytes)
        tp1_from_host = self.value(self.tp1, "folio_prefix_cache_host_tier_blocks_total",
                                   direction="from_host")
        self.assertEqual(self.tp1.worker_swap, [(tp1_from_host * 2 * per_rank,
                                                 self.value(self.tp1,
                                                            "folio_prefix_cache_host_tier_blocks_total",
                                                            direction="to_host") * 2 * per_rank)])

    def test_without_the_tier_nothing_moves_and_the_prefix_is_computed_again(self):
        for name in ("folio_prefix_cache_host_hits_total",
                     "folio_prefix_cache_host_tier_blocks_total",
                     "folio_prefix_cache_host_tier_bytes_total",
                     "folio_prefix_cache_host_tier_over_budget_blocks_total"):
            self.assertEqual(self.value(self.off, name), 0, name)
        for rank, swap in enumerate(self.off.worker_swap):
            self.assertEqual(swap, (0.0, 0.0), f"rank {rank}")
        self.assertEqual(self.off.usage["second"], 0)
        self.assertEqual(self.off.usage["sampled_again"], 0)
        # The prefix cache itself works: the sampled turn finds the first one's prefix.
        self.assertEqual(self.off.usage["sampled"], len(PREFIX))

    def test_outputs_equal_recomputation(self):
        self.assertEqual(self.on.outputs.keys(), self.off.outputs.keys())
        for key in self.on.outputs:
            self.assertEqual(self.on.outputs[key], self.off.outputs[key], key)
            self.assertEqual(self.on.outputs[key], self.tp1.outputs[key], key)
            self.assertEqual(len(self.on.outputs[key]), MAX_TOKENS, key)
        for run in (self.on, self.off, self.tp1):
            self.assertEqual(run.outputs["first_again"], run.outputs["first"])
            self.assertEqual(run.outputs["sampled_again"], run.outputs["sampled"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
