"""A small Python client for folio's public API (folio.v1.Generation).

Uses Debian's python3-grpcio and python3-protobuf. The message and stub
modules are generated from proto/ with the same protoc as the C++ build:

    stubs = folio_client.generate_stubs("/tmp/folio_stubs")   # once
    client = folio_client.FolioClient("127.0.0.1:50051", stubs)
    for chunk in client.stream("In the beginning", max_tokens=32, temperature=0):
        print(chunk.text, end="", flush=True)
    result = client.generate("And God said", max_tokens=16, temperature=0)
    print(result.sequences[0].text, result.sequences[0].finish_reason)

A secured endpoint (folio-scheduler --api-key, --tls-cert/--tls-key,
--tls-client-ca; docs/operations.md):

    client = folio_client.FolioClient("folio.example:50051", stubs, api_key="...",
                                      root_certificates=open("ca.crt", "rb").read())

api_key adds `authorization: Bearer <key>` to every call; root_certificates
(or tls=True for the system's roots) makes the channel TLS; certificate_chain
and private_key present a client certificate (mutual TLS); server_name
overrides the name expected in the server's certificate.

Run as a script for a one-off generation:
    /usr/bin/python3 client/python/folio_client.py --address 127.0.0.1:50051 "prompt"
    (--api-key or FOLIO_API_KEY, --tls, --tls-ca FILE, --tls-server-name NAME)
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
    "min_tokens", "ignore_eos", "logprobs", "prompt_logprobs", "priority", "cache_salt",
    "include_stop_str_in_output", "skip_special_tokens", "truncate_prompt_tokens",
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
    # With prompt_logprobs=N: (token_id, logprob, [(alt_id, alt_logprob), ...])
    # for each prompt token after the first, in prompt order; None otherwise
    # (and for a one-token prompt, which has nothing to score).
    prompt_logprobs: Optional[list] = None


@dataclasses.dataclass
class Delta:
    request_id: str
    index: int
    text: str
    token_ids: List[int]
    finish_reason: Optional[str]


def make_channel(address: str, tls: bool = False, root_certificates: Optional[bytes] = None,
                 certificate_chain: Optional[bytes] = None, private_key: Optional[bytes] = None,
                 server_name: Optional[str] = None, options=()) -> grpc.Channel:
    """A channel to folio-scheduler: plaintext, or TLS when tls is true or any TLS
    material is given (root_certificates None = the system's roots)."""
    options = list(options)
    if not (tls or root_certificates or certificate_chain or private_key or server_name):
        return grpc.insecure_channel(address, options=options)
    if server_name:
        options.append(("grpc.ssl_target_name_override", server_name))
    creds = grpc.ssl_channel_credentials(root_certificates=root_certificates,
                                         private_key=private_key,
                                         certificate_chain=certificate_chain)
    return grpc.secure_channel(address, creds, options=options)


class _ApiKey(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Adds `authorization: Bearer <key>` to every call of the channel."""

    def __init__(self, key: str):
        self._metadata = ("authorization", f"Bearer {key}")

    def _with_key(self, details):
        metadata = list(details.metadata or []) + [self._metadata]
        return _CallDetails(details.method, details.timeout, metadata, details.credentials,
                            getattr(details, "wait_for_ready", None),
                            getattr(details, "compression", None))

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._with_key(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._with_key(details), request)


class _CallDetails(grpc.ClientCallDetails):
    def __init__(self, method, timeout, metadata, credentials, wait_for_ready, compression):
        self.method = method
        self.timeout = timeout
        self.metadata = metadata
        self.credentials = credentials
        self.wait_for_ready = wait_for_ready
        self.compression = compression


class FolioClient:
    """Blocking client; one instance may be shared by threads (gRPC channels are).

    api_key: sent as `authorization: Bearer <key>` on every call.
    tls / root_certificates / certificate_chain / private_key / server_name: see
    make_channel (PEM bytes)."""

    def __init__(self, address: str, stubs_dir: str, timeout: float = 600.0,
                 api_key: Optional[str] = None, tls: bool = False,
                 root_certificates: Optional[bytes] = None,
                 certificate_chain: Optional[bytes] = None, private_key: Optional[bytes] = None,
                 server_name: Optional[str] = None):
        if stubs_dir not in sys.path:
            sys.path.insert(0, stubs_dir)
        self.pb = importlib.import_module("folio.v1.generation_pb2")
        grpc_mod = importlib.import_module("folio.v1.generation_pb2_grpc")
        # The raw channel (health, reflection) and the one Generation calls go over.
        self.channel = make_channel(address, tls, root_certificates, certificate_chain,
                                    private_key, server_name)
        calls = self.channel
        if api_key:
            calls = grpc.intercept_channel(self.channel, _ApiKey(api_key))
        self.stub = grpc_mod.GenerationStub(calls)
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
                logit_bias=None, allowed_token_ids=(), bad_words=(), **sampling):
        """Builds a GenerateRequest; unknown sampling keywords raise TypeError.

        logit_bias: {token_id: bias} added to those logits, as in OpenAI's API.
        allowed_token_ids: sample only among these (vLLM's); bad_words: words never
        to generate (vLLM's).
        """
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
        for token, bias in (logit_bias or {}).items():
            sp.logit_bias[int(token)] = bias
        sp.allowed_token_ids.extend(allowed_token_ids)
        sp.bad_words.extend(bad_words)
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
                if msg.chunk.prompt_logprobs:  # the first chunks' (a long prompt's: several)
                    result.prompt_logprobs = (result.prompt_logprobs or []) + [
                        (lp.token_id, lp.logprob, [(t.token_id, t.logprob) for t in lp.top_logprobs])
                        for lp in msg.chunk.prompt_logprobs]
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

    def detokenize(self, token_ids, skip_special_tokens: bool = True) -> str:
        req = self.pb.DetokenizeRequest(token_ids=list(token_ids),
                                        skip_special_tokens=skip_special_tokens)
        return self.stub.Detokenize(req, timeout=30).text


def main():
    parser = argparse.ArgumentParser(description="Stream a generation from a folio cluster.")
    parser.add_argument("prompt")
    parser.add_argument("--address", default="127.0.0.1:50051")
    parser.add_argument("--stubs-dir", default=os.path.join("/tmp", "folio_python_stubs"))
    # Unset: the model's defaults (its generation_config.json), else 16 and 1.0.
    parser.add_argument("--max-tokens", type=int)
    parser.add_argument("--temperature", type=float)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--api-key", default=os.environ.get("FOLIO_API_KEY"),
                        help="sent as `authorization: Bearer <key>` (default: $FOLIO_API_KEY)")
    parser.add_argument("--tls", action="store_true", help="TLS with the system's root CAs")
    parser.add_argument("--tls-ca", help="TLS, the server verified against this PEM CA")
    parser.add_argument("--tls-server-name", help="name expected in the server's certificate")
    args = parser.parse_args()
    roots = None
    if args.tls_ca:
        with open(args.tls_ca, "rb") as f:
            roots = f.read()
    client = FolioClient(args.address, generate_stubs(args.stubs_dir), api_key=args.api_key,
                         tls=args.tls, root_certificates=roots, server_name=args.tls_server_name)
    for delta in client.stream(args.prompt, max_tokens=args.max_tokens,
                               temperature=args.temperature, seed=args.seed):
        print(delta.text, end="", flush=True)
    print()


if __name__ == "__main__":
    main()
