"""A model's generation_config.json sampling recommendations (folio-scheduler
--generation-config): requests that leave temperature, top_k, max_tokens etc.
unset sample with the model's values, a request's own values win, `none`
turns them off, and a file no request could use stops the scheduler at
startup with a message naming the field. Real folio-scheduler and
folio-worker processes (local_cluster.py) on a copy of the demo model whose
files are symlinked next to a generation_config.json written here. Run by
ctest with FOLIO_BIN_DIR and FOLIO_SOURCE_DIR set, under /usr/bin/python3."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

from local_cluster import BIN_DIR, DEMO, SOURCE_DIR, LocalCluster, wait_until

sys.path.insert(0, os.path.join(SOURCE_DIR, "client", "python"))

import folio_client  # noqa: E402

# Greedy and six tokens; top_k 50 is transformers' own default: no recommendation.
GENERATION_CONFIG = {"bos_token_id": 2046, "eos_token_id": 2047, "do_sample": False,
                     "temperature": 0.0, "top_k": 50, "max_new_tokens": 6}


def model_with_generation_config(root, name, config):
    """A model directory: the demo model's files, symlinked, plus `config`."""
    path = os.path.join(root, name)
    os.makedirs(path)
    for f in os.listdir(DEMO):
        if f.endswith((".json", ".safetensors")) and f != "generation_config.json":
            os.symlink(os.path.join(DEMO, f), os.path.join(path, f))
    with open(os.path.join(path, "generation_config.json"), "w") as f:
        json.dump(config, f)
    return path


class GenerationConfigTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.stubs = folio_client.generate_stubs(os.path.join(cls.tmp.name, "stubs"))
        cls.model = model_with_generation_config(cls.tmp.name, "model", GENERATION_CONFIG)
        with open(os.path.join(DEMO, "reference.json")) as f:
            cls.case = json.load(f)["cases"][0]

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def serve(self, name, flags=()):
        cluster = LocalCluster(os.path.join(self.tmp.name, name + ".log"),
                               scheduler_flags=flags, model_dir=self.model)
        client = folio_client.FolioClient(cluster.address, self.stubs)
        try:
            client.wait_ready(timeout=120)
        except Exception:
            cluster.stop()
            raise
        return cluster, client

    def stop(self, cluster, client):
        client.close()
        code = cluster.stop()
        self.assertEqual(code, 0, cluster.log())  # non-zero when KV blocks leaked

    def test_unset_fields_take_the_models_recommendations(self):
        cluster, client = self.serve("auto")
        try:
            # Nothing set: greedy (temperature 0) and six tokens, the reference's.
            plain = client.generate(token_ids=self.case["prompt_token_ids"], ignore_eos=True)
            self.assertEqual(plain.sequences[0].token_ids, self.case["output_token_ids"][:6])
            # A request's own values win over the model's.
            short = client.generate(token_ids=self.case["prompt_token_ids"], ignore_eos=True,
                                    max_tokens=3)
            self.assertEqual(short.sequences[0].token_ids, self.case["output_token_ids"][:3])
            sampled = client.generate(token_ids=self.case["prompt_token_ids"], ignore_eos=True,
                                      temperature=1.0, seed=11, max_tokens=12)
            # folio generate sends only the flags given: the model's six greedy tokens.
            cli = subprocess.run(
                [os.path.join(BIN_DIR, "folio"), "generate", "--address", cluster.address,
                 "--ignore-eos", "--json", "--token-ids",
                 " ".join(str(t) for t in self.case["prompt_token_ids"])],
                capture_output=True, text=True, timeout=120)
            self.assertEqual(cli.returncode, 0, cli.stderr)
            streamed = [t for line in cli.stdout.splitlines()
                        for d in json.loads(line).get("chunk", {}).get("deltas", [])
                        for t in d.get("token_ids", [])]
            self.assertEqual(streamed, self.case["output_token_ids"][:6])
            log = cluster.log()
        finally:
            self.stop(cluster, client)
        self.assertIn("temperature=0 max_tokens=6", log)
        self.assertNotIn("top_k", log)  # 50 is no recommendation

        # Without the model's recommendations: vLLM's defaults, and the same
        # seeded draws for the request that set its own temperature.
        cluster, client = self.serve("none", ["--generation-config", "none"])
        try:
            plain = client.generate(token_ids=self.case["prompt_token_ids"], ignore_eos=True,
                                    temperature=0.0)
            self.assertEqual(len(plain.sequences[0].token_ids), 16)  # max_tokens unset = 16
            again = client.generate(token_ids=self.case["prompt_token_ids"], ignore_eos=True,
                                    temperature=1.0, seed=11, max_tokens=12)
            self.assertEqual(again.sequences[0].token_ids, sampled.sequences[0].token_ids)
            log = cluster.log()
        finally:
            self.stop(cluster, client)
        self.assertNotIn("generation_config.json", log)

    def test_a_file_no_request_could_use_stops_the_scheduler(self):
        bad = model_with_generation_config(self.tmp.name, "bad", {"top_p": 0.0})
        cluster = LocalCluster(os.path.join(self.tmp.name, "bad.log"), model_dir=bad)
        try:
            wait_until(lambda: not cluster.alive(), 60, "folio-scheduler to exit")
        finally:
            for w in cluster.workers:  # never initialized: nothing stops them
                w.kill()
            code = cluster.stop()
        self.assertNotEqual(code, 0)
        log = cluster.log()
        self.assertIn("generation_config.json: field 'top_p' must be in (0, 1], got 0", log)
        self.assertIn("--generation-config none", log)


if __name__ == "__main__":
    unittest.main()
