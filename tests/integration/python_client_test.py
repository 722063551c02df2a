"""The Python client (client/python/folio_client.py) against a real cluster:
folio-scheduler and two folio-worker processes on 127.0.0.1, started by the
test (local_cluster.py). Stubs are generated from proto/ at test time. Run by
ctest with FOLIO_BIN_DIR and FOLIO_SOURCE_DIR set, under /usr/bin/python3."""

import json
import os
import sys
import tempfile
import threading
import unittest

from local_cluster import DEMO, SOURCE_DIR, LocalCluster

sys.path.insert(0, os.path.join(SOURCE_DIR, "client", "python"))

import grpc  # noqa: E402
import folio_client  # noqa: E402

MAX_TOKENS = 20


class PythonClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.stubs = folio_client.generate_stubs(os.path.join(cls.tmp.name, "stubs"))
        cls.cluster = LocalCluster(os.path.join(cls.tmp.name, "scheduler.log"),
                                   tensor_parallel_size=2)
        cls.client = folio_client.FolioClient(cls.cluster.address, cls.stubs)
        cls.info = cls.client.wait_ready(timeout=120)
        with open(os.path.join(DEMO, "reference.json")) as f:
            cls.cases = json.load(f)["cases"]

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.exit_code = cls.cluster.stop()
        log = cls.cluster.log()
        cls.tmp.cleanup()
        # The scheduler exits non-zero when KV blocks leaked.
        assert cls.exit_code == 0, f"folio-scheduler exited with {cls.exit_code}:\n{log}"

    def test_model_info(self):
        self.assertEqual(self.info.model_name, "folio-demo")
        self.assertEqual(self.info.tensor_parallel_size, 2)
        self.assertEqual(self.info.block_size, 16)
        self.assertEqual(self.info.kv_token_capacity, self.info.num_device_blocks * 16)

    def test_tokenize_matches_the_reference_prompt_ids(self):
        for case in self.cases[:3]:
            self.assertEqual(self.client.tokenize(case["prompt"]), case["prompt_token_ids"])

    def test_detokenize_inverts_tokenize(self):
        case = self.cases[0]
        self.assertEqual(self.client.detokenize(case["prompt_token_ids"]), case["prompt"])
        self.assertEqual(self.client.detokenize(case["output_token_ids"]), case["output_text"])
        with self.assertRaises(grpc.RpcError) as err:
            self.client.detokenize([5, -1])
        self.assertEqual(err.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("token_ids[1]", err.exception.details())

    def test_greedy_generations_reproduce_the_reference(self):
        results = [None] * len(self.cases)

        def run(i):
            results[i] = self.client.generate(self.cases[i]["prompt"], max_tokens=MAX_TOKENS,
                                              temperature=0.0, ignore_eos=True, logprobs=0)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(self.cases))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for case, result in zip(self.cases, results):
            seq = result.sequences[0]
            self.assertEqual(seq.token_ids, case["output_token_ids"][:MAX_TOKENS])
            for got, want in zip(seq.logprobs, case["logprobs"]):
                self.assertAlmostEqual(got, want, delta=1e-3)
            self.assertEqual(seq.finish_reason, "length")
            self.assertEqual(result.completion_tokens, MAX_TOKENS)
            self.assertEqual(result.prompt_tokens, len(case["prompt_token_ids"]))

    def test_streaming_text_concatenates_to_the_whole(self):
        prompt = self.cases[0]["prompt"]
        pieces = [d.text for d in self.client.stream(prompt, max_tokens=MAX_TOKENS, temperature=0.0,
                                                     ignore_eos=True)]
        whole = self.client.generate(prompt, max_tokens=MAX_TOKENS, temperature=0.0, ignore_eos=True)
        self.assertGreater(len(pieces), 1)
        self.assertEqual("".join(pieces), whole.sequences[0].text)

    def test_logit_bias_min_tokens_and_text_options_reach_the_workers(self):
        # A bias forces EOS; min_tokens holds it off for four tokens, which
        # are then the model's own (the plan carries both to every rank).
        case = self.cases[0]
        eos = 2047
        result = self.client.generate(case["prompt"], max_tokens=MAX_TOKENS, temperature=0.0,
                                      logit_bias={eos: 100.0}, min_tokens=4,
                                      include_stop_str_in_output=True, skip_special_tokens=False)
        seq = result.sequences[0]
        self.assertEqual(seq.token_ids, case["output_token_ids"][:4] + [eos])
        self.assertEqual(seq.finish_reason, "eos")
        self.assertTrue(seq.text.endswith("<|end_of_text|>"), seq.text)
        plain = self.client.generate(case["prompt"], max_tokens=MAX_TOKENS, temperature=0.0,
                                     logit_bias={eos: 100.0}, min_tokens=4)
        self.assertEqual(plain.sequences[0].text, seq.text[:-len("<|end_of_text|>")])
        with self.assertRaises(grpc.RpcError) as err:
            self.client.generate("hello", logit_bias={5: 250.0})
        self.assertEqual(err.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("sampling_params.logit_bias[5]", err.exception.details())

    def test_allowed_token_ids_and_bad_words_reach_the_workers(self):
        case = self.cases[0]
        allowed = [case["output_token_ids"][2], case["output_token_ids"][5]]
        result = self.client.generate(case["prompt"], max_tokens=MAX_TOKENS, temperature=0.0,
                                      ignore_eos=True, allowed_token_ids=allowed)
        self.assertEqual(len(result.sequences[0].token_ids), MAX_TOKENS)
        self.assertTrue(set(result.sequences[0].token_ids) <= set(allowed),
                        result.sequences[0].token_ids)
        # " and" (267) is in the free run; bad_words ["and"] bans it.
        free = self.client.generate(case["prompt"], max_tokens=MAX_TOKENS, temperature=0.0,
                                    ignore_eos=True)
        self.assertIn(267, free.sequences[0].token_ids)
        banned = self.client.generate(case["prompt"], max_tokens=MAX_TOKENS, temperature=0.0,
                                      ignore_eos=True, bad_words=["and"])
        self.assertNotIn(267, banned.sequences[0].token_ids)
        self.assertNotIn(" and", banned.sequences[0].text)
        with self.assertRaises(grpc.RpcError) as err:
            self.client.generate("hello", allowed_token_ids=[3, 99999])
        self.assertEqual(err.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("sampling_params.allowed_token_ids[1]", err.exception.details())

    def test_prompt_logprobs_score_the_prompt_across_worker_processes(self):
        # The reference prompt followed by its greedy output: scoring it gives
        # the output's log-probs as the reference computed them (torch).
        case = self.cases[1]
        k = 6
        ids = case["prompt_token_ids"] + case["output_token_ids"][:k]
        result = self.client.generate(token_ids=ids, max_tokens=1, temperature=0.0,
                                      prompt_logprobs=2)
        self.assertEqual(len(result.prompt_logprobs), len(ids) - 1)
        self.assertEqual([t for t, _, _ in result.prompt_logprobs], ids[1:])
        start = len(case["prompt_token_ids"]) - 1
        for i in range(k):
            token, logprob, top = result.prompt_logprobs[start + i]
            self.assertAlmostEqual(logprob, case["logprobs"][i], delta=1e-3)
            self.assertEqual(len(top), 2)
            self.assertEqual(top[0][0], token)  # greedy: the top token
        self.assertEqual(result.cached_prompt_tokens, 0)
        with self.assertRaises(grpc.RpcError) as err:
            self.client.generate("hello", prompt_logprobs=21)
        self.assertEqual(err.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("sampling_params.prompt_logprobs", err.exception.details())

    def test_bad_input_is_invalid_argument_naming_the_field(self):
        with self.assertRaises(grpc.RpcError) as err:
            self.client.generate("hello", top_p=1.5)
        self.assertEqual(err.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("sampling_params.top_p", err.exception.details())

    def test_abort_and_cancel_mid_stream(self):
        call = self.client.stream_raw(self.client.request("In the beginning", max_tokens=5000,
                                                          temperature=0.0, ignore_eos=True,
                                                          request_id="py-abort"))
        first = next(call)
        self.assertEqual(first.request_id, "py-abort")
        self.assertTrue(self.client.abort("py-abort"))
        result = self.client.collect(call)
        self.assertEqual(result.sequences[0].finish_reason, "abort")
        self.assertFalse(self.client.abort("py-abort"))

        cancelled = self.client.stream_raw(self.client.request("And God said", max_tokens=5000,
                                                               ignore_eos=True))
        next(cancelled)
        cancelled.cancel()
        with self.assertRaises(grpc.RpcError) as err:
            for _ in cancelled:
                pass
        self.assertEqual(err.exception.code(), grpc.StatusCode.CANCELLED)

    def test_standard_health_and_reflection_services(self):
        # What Kubernetes gRPC probes and grpcurl call, as raw protobuf bytes:
        # HealthCheckRequest{service=""} is empty; SERVING is field 1 = 1.
        check = self.client.channel.unary_unary("/grpc.health.v1.Health/Check")
        self.assertEqual(check(b"", timeout=10), b"\x08\x01")
        # ServerReflectionRequest{list_services=""} (field 7); the answer names our services.
        reflect = self.client.channel.stream_stream(
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo")
        answer = b"".join(reflect(iter([b"\x3a\x00"]), timeout=10))
        self.assertIn(b"folio.v1.Generation", answer)
        self.assertIn(b"grpc.health.v1.Health", answer)

    def test_seeded_parallel_sampling_repeats(self):
        kwargs = dict(max_tokens=12, temperature=0.8, seed=5, n=3)
        a = self.client.generate("And the earth", **kwargs)
        b = self.client.generate("And the earth", **kwargs)
        self.assertEqual(len(a.sequences), 3)
        self.assertEqual([s.token_ids for s in a.sequences], [s.token_ids for s in b.sequences])



class SmallKvCacheTest(unittest.TestCase):
    """A KV cache smaller than the model's 512 positions: max_model_len is capped
    at what it holds (and the log says so), longer prompts are refused by name,
    and a --max-model-len it cannot hold stops the scheduler at startup."""

    def test_max_model_len_is_capped_at_the_cache(self):
        with tempfile.TemporaryDirectory() as tmp:
            cluster = LocalCluster(os.path.join(tmp, "scheduler.log"),
                                   scheduler_flags=("--num-device-blocks", "10"))
            stubs = folio_client.generate_stubs(os.path.join(tmp, "stubs"))
            client = folio_client.FolioClient(cluster.address, stubs)
            try:
                info = client.wait_ready(timeout=120)
                self.assertEqual(info.kv_token_capacity, 160)
                self.assertEqual(info.max_model_len, 160)
                self.assertIn("max_model_len capped at 160", cluster.log())
                with self.assertRaises(grpc.RpcError) as err:
                    client.generate(token_ids=[1] * 200, max_tokens=4)
                self.assertEqual(err.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
                self.assertIn("max_model_len is 160", err.exception.details())
                done = client.generate("And God said", max_tokens=4, temperature=0.0)
                self.assertEqual(len(done.sequences[0].token_ids), 4)
            finally:
                client.close()
                self.assertEqual(cluster.stop(), 0, cluster.log())

    def test_a_max_model_len_the_cache_cannot_hold_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            cluster = LocalCluster(os.path.join(tmp, "scheduler.log"),
                                   scheduler_flags=("--num-device-blocks", "10",
                                                    "--max-model-len", "400"))
            try:
                code = cluster.scheduler.wait(timeout=120)
            finally:
                cluster.stop()
            self.assertNotEqual(code, 0)
            self.assertIn("--max-model-len 400 exceeds the 160 token slots", cluster.log())


if __name__ == "__main__":
    unittest.main()
