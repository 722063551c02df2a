"""A small Python client for folio's public API (folio.v1.Generation).

Uses Debian's python3-grpcio and python3-protobuf. The message and stub
modules are generated from proto/ with the same protoc as the C++ build:

    stubs = folio_client.generate_stubs("/tmp/folio_stubs")   # once
    client = folio_client.FolioClient("127.0.0.1:50051", stubs)
    for chunk in client.stream("In the beginning", max_tokens=32, temperature=0):
        print(chunk.text, end="", flush=True)
    result = client.generate("And God said", max_tokens=16, temperature=0)
    print(result.sequences[0].text, result.sequences[0].finish_reason)

Run as a script for a one-off generation:
    /usr/bin/python3 client/python/folio_client.py --address 127.0.0.1:50051 "prompt"
"""

import argparse
import dataclasses
import importlib
import os
import subprocess
import sys
from typing import Iterator, List, Optional

import grpc

PROTO_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "proto")
FINISH_REASONS = {0: None, 1: "length", 2: "stop", 3: "eos", 4: "abort", 5: "error"}

# Sampling keyword arguments and the SamplingParams field each sets.
_SAMPLING_FIELDS = (
    "temperature", "top_k", "top_p", "min_p", "repetition_penalty", "presence_penalty",
    "frequency_penalty", "seed", "n", "best_of", "beam_width", "length_penalty", "max_tokens",
    "ignore_eos", "logprobs", "priority", "cache_salt",
)


def generate_stubs(out_dir: str, proto_root: str = PROTO_ROOT) -> str:
    """Writes folio/v1/*_pb2.py and *_pb2_grpc.py under out_dir; returns out_dir."""
    os.makedirs(out_dir, exist_ok=True)
    protos = [os.path.join("folio", "v1", name) for name in ("generation.proto", "worker.proto")]
    subprocess.run(
        ["protoc", f"--proto_path={proto_root}", f"--python_out={out_dir}", f"--grpc_out={out_dir}",
         "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin", *protos],
        check=True, cwd=proto_root)
    for package in ("folio", os.path.join("folio", "v1")):
        open(os.path.join(out_dir, package, "__init__.py"), "a").close()
    return out_dir


@dataclasses.dataclass
class Sequence:
    index: int
    text: str = ""
    token_ids: List[int] = dataclasses.field(default_factory=list)
    logprobs: List[float] = dataclasses.field(default_factory=list)
    finish_reason: Optional[str] = None
    stop: Optional[object] = None  # the matched stop string or stop token id
    error: str = ""
    cumulative_logprob: float = 0.0


@dataclasses.dataclass
class Result:
    request_id: str
    sequences: List[Sequence]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0


@dataclasses.dataclass
class Delta:
    request_id: str
    index: int
    text: str
    token_ids: List[int]
    finish_reason: Optional[str]


class FolioClient:
    """Blocking client; one instance may be shared by threads (gRPC channels are)."""

    def __init__(self, address: str, stubs_dir: str, timeout: float = 600.0):
        if stubs_dir not in sys.path:
            sys.path.insert(0, stubs_dir)
        self.pb = importlib.import_module("folio.v1.generation_pb2")
        grpc_mod = importlib.import_module("folio.v1.generation_pb2_grpc")
        self.channel = grpc.insecure_channel(address)
        self.stub = grpc_mod.GenerationStub(self.channel)
        self.timeout = timeout

    def close(self):
        self.channel.close()

    def wait_ready(self, timeout: float = 60.0):
        """Blocks until the server answers GetModelInfo (the model is loaded)."""
        import time
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.model_info()
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def request(self, prompt=None, token_ids=None, stop=(), stop_token_ids=(), request_id=None,
                **sampling):
        """Builds a GenerateRequest; unknown sampling keywords raise TypeError."""
        req = self.pb.GenerateRequest()
        if request_id is not None:
            req.request_id = request_id
        if token_ids is not None:
            req.token_ids.ids.extend(token_ids)
        elif prompt is not None:
            req.text = prompt
        sp = req.sampling_params
        for key, value in sampling.items():
            if key not in _SAMPLING_FIELDS:
                raise TypeError(f"unknown sampling parameter {key!r}")
            if value is not None:
                setattr(sp, key, value)
        sp.stop.extend(stop)
        sp.stop_token_ids.extend(stop_token_ids)
        return req

    def stream_raw(self, req):
        """The GenerateResponse messages of one call; cancel() on it aborts the request."""
        return self.stub.Generate(req, timeout=self.timeout)

    def stream(self, prompt=None, **kwargs) -> Iterator[Delta]:
        """Yields each sequence's new text as it arrives."""
        for msg in self.stream_raw(self.request(prompt, **kwargs)):
            if msg.WhichOneof("kind") != "chunk":
                continue
            for d in msg.chunk.deltas:
                yield Delta(msg.request_id, d.index, d.text, list(d.token_ids),
                            FINISH_REASONS[d.finish_reason])

    def generate(self, prompt=None, **kwargs) -> Result:
        """Runs one request to the end and assembles its sequences."""
        return self.collect(self.stream_raw(self.request(prompt, **kwargs)))

    def collect(self, responses) -> Result:
        result = Result(request_id="", sequences=[])

        def seq(i):
            while len(result.sequences) <= i:
                result.sequences.append(Sequence(index=len(result.sequences)))
            return result.sequences[i]

        for msg in responses:
            result.request_id = msg.request_id
            if msg.WhichOneof("kind") == "chunk":
                for d in msg.chunk.deltas:
                    s = seq(d.index)
                    s.text += d.text
                    s.token_ids.extend(d.token_ids)
                    s.logprobs.extend(lp.logprob for lp in d.logprobs)
            else:
                for f in msg.finished.sequences:
                    s = seq(f.index)
                    s.finish_reason = FINISH_REASONS[f.reason]
                    s.error = f.error_message
                    s.cumulative_logprob = f.cumulative_logprob
                    which = f.WhichOneof("matched_stop")
                    s.stop = getattr(f, which) if which else None
                usage = msg.finished.usage
                result.prompt_tokens = usage.prompt_tokens
                result.completion_tokens = usage.completion_tokens
                result.cached_prompt_tokens = usage.cached_prompt_tokens
        return result

    def abort(self, request_id: str) -> bool:
        return self.stub.Abort(self.pb.AbortRequest(request_id=request_id), timeout=30).found

    def model_info(self):
        return self.stub.GetModelInfo(self.pb.GetModelInfoRequest(), timeout=30)

    def tokenize(self, text: str, add_special_tokens: bool = True) -> List[int]:
        req = self.pb.TokenizeRequest(text=text, add_special_tokens=add_special_tokens)
        return list(self.stub.Tokenize(req, timeout=30).token_ids)


def main():
    parser = argparse.ArgumentParser(description="Stream a generation from a folio cluster.")
    parser.add_argument("prompt")
    parser.add_argument("--address", default="127.0.0.1:50051")
    parser.add_argument("--stubs-dir", default=os.path.join("/tmp", "folio_python_stubs"))
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--seed", type=int)
    args = parser.parse_args()
    client = FolioClient(args.address, generate_stubs(args.stubs_dir))
    for delta in client.stream(args.prompt, max_tokens=args.max_tokens,
                               temperature=args.temperature, seed=args.seed):
        print(delta.text, end="", flush=True)
    print()


if __name__ == "__main__":
    main()
