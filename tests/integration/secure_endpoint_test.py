"""A secured client endpoint, end to end: folio-scheduler with an API key,
TLS and mutual TLS, each against real folio-worker processes on 127.0.0.1
started by the test (local_cluster.py). A throwaway CA, server and client
certificates are made with the `openssl` CLI at test time. Checks the
Python client (client/python/folio_client.py) and `folio generate`, that
grpc.health.v1 stays open (on the client port, and on --health-port when the
client port speaks TLS), and that every scheduler exits 0 (no leaked KV
blocks). Run by ctest with FOLIO_BIN_DIR and FOLIO_SOURCE_DIR set, under
/usr/bin/python3."""

import os
import subprocess
import sys
import tempfile
import unittest

import local_cluster
from local_cluster import BIN_DIR, DEMO, SOURCE_DIR, LocalCluster, free_port

sys.path.insert(0, os.path.join(SOURCE_DIR, "client", "python"))

import grpc  # noqa: E402
import folio_client  # noqa: E402

FOLIO = os.path.join(BIN_DIR, "folio")
SCHEDULER = os.path.join(BIN_DIR, "folio-scheduler")
KEY = "folio-test-key-0123456789abcdef"
SERVING = b"\x08\x01"  # HealthCheckResponse{status: SERVING}
MISSING = "missing authorization metadata (authorization: Bearer <api key>)"
PROMPT = "And God said"

TMP = None
STUBS = None
CERTS = {}


def openssl(*args, cwd):
    proc = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise AssertionError(f"openssl {' '.join(args)}: {proc.stderr}")


def make_pki(d):
    """ca.crt/key, server.crt/key (localhost, folio.test, 127.0.0.1), client.crt/key
    signed by the CA; other-ca.crt and a client certificate it signed."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]

    def ca(name):
        openssl("req", "-x509", *ec, "-keyout", f"{name}.key", "-out", f"{name}.crt", "-days", "2",
                "-subj", f"/CN=folio test {name}", "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)

    def leaf(name, issuer, ext):
        with open(os.path.join(d, f"{name}.ext"), "w") as f:
            f.write(ext)
        openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj",
                f"/CN={name}", cwd=d)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{issuer}.crt", "-CAkey",
                f"{issuer}.key", "-CAcreateserial", "-CAserial", f"{issuer}.srl", "-out",
                f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext", cwd=d)

    ca("ca")
    ca("other-ca")
    leaf("server", "ca", "subjectAltName=DNS:localhost,DNS:folio.test,IP:127.0.0.1\n"
                         "extendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n")
    leaf("client", "ca", "extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n")
    leaf("stranger", "other-ca", "extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n")
    for name in ("ca", "other-ca", "server", "client", "stranger"):
        for ext in ("crt", "key"):
            CERTS[f"{name}.{ext}"] = os.path.join(d, f"{name}.{ext}")


def pem(name):
    with open(CERTS[name], "rb") as f:
        return f.read()


def setUpModule():
    global TMP, STUBS
    TMP = tempfile.TemporaryDirectory()
    STUBS = folio_client.generate_stubs(os.path.join(TMP.name, "stubs"))
    make_pki(TMP.name)


def tearDownModule():
    TMP.cleanup()


def health_check(channel, timeout=5):
    return channel.unary_unary("/grpc.health.v1.Health/Check")(b"", timeout=timeout)


def serving(channel):
    try:
        return health_check(channel, timeout=2) == SERVING
    except grpc.RpcError:
        return False


def folio_generate(*args, env=None):
    return subprocess.run(
        [FOLIO, "generate", "--temperature", "0", "--max-tokens", "12", "--ignore-eos",
         "--timeout-s", "120", *args, PROMPT],
        capture_output=True, text=True, timeout=180, env=dict(os.environ, **(env or {})))


class ClusterTest(unittest.TestCase):
    """One cluster for the class; tearDownClass checks the scheduler's exit status."""
    TP = 1

    @classmethod
    def flags(cls):
        return []

    @classmethod
    def env(cls):
        return {}

    @classmethod
    def probe_channel(cls, cluster):
        return grpc.insecure_channel(cluster.address)

    @classmethod
    def setUpClass(cls):
        log = os.path.join(TMP.name, f"{cls.__name__}.log")
        cls.cluster = LocalCluster(log, cls.TP, cls.flags(), cls.env())
        cls.probe = cls.probe_channel(cls.cluster)
        try:
            cls.cluster.wait_ready(lambda: serving(cls.probe))
        except AssertionError:
            cls.cluster.stop()
            raise AssertionError(cls.cluster.log())
        cls.clients = []

    @classmethod
    def client(cls, **kwargs):
        c = folio_client.FolioClient(cls.cluster.address, STUBS, timeout=120, **kwargs)
        cls.clients.append(c)
        return c

    @classmethod
    def tearDownClass(cls):
        for c in cls.clients:
            c.close()
        cls.probe.close()
        code = cls.cluster.stop()
        # Non-zero when KV blocks leaked (or the scheduler crashed).
        assert code == 0, f"folio-scheduler exited with {code}:\n{cls.cluster.log()}"

    def assertStreams(self, client):
        pieces = [d.text for d in client.stream(PROMPT, max_tokens=12, temperature=0.0,
                                                ignore_eos=True)]
        self.assertGreater(len(pieces), 1)
        self.assertTrue("".join(pieces).strip())

    def assertRefused(self, call, code, message=None):
        with self.assertRaises(grpc.RpcError) as err:
            call()
        self.assertEqual(err.exception.code(), code, err.exception.details())
        if message is not None:
            self.assertEqual(err.exception.details(), message)


class StartupErrorsTest(unittest.TestCase):
    """Wrong security settings stop folio-scheduler before it loads the model,
    with a message naming the flag."""

    def run_scheduler(self, *flags, env=None):
        port = str(free_port())
        return subprocess.run(
            [SCHEDULER, "--model", DEMO, "--port", port, "--metrics-port", "0",
             "--workers", f"127.0.0.1:{free_port()}", "--connect-timeout-s", "5",
             *(f.replace("{port}", port) for f in flags)],
            capture_output=True, text=True, timeout=60, env=dict(os.environ, **(env or {})))

    def test_bad_flags(self):
        missing = os.path.join(TMP.name, "missing.pem")
        cases = [
            (["--tls-cert", CERTS["server.crt"]], "--tls-cert needs --tls-key"),
            (["--tls-key", CERTS["server.key"]], "--tls-key needs --tls-cert"),
            (["--tls-cert", missing, "--tls-key", CERTS["server.key"]],
             f"--tls-cert: {missing} does not exist"),
            (["--tls-cert", CERTS["server.crt"], "--tls-key", missing],
             f"--tls-key: {missing} does not exist"),
            (["--tls-cert", CERTS["server.key"], "--tls-key", CERTS["server.key"]],
             "--tls-cert: " + CERTS["server.key"] + " holds no PEM certificate"),
            (["--tls-cert", CERTS["server.crt"], "--tls-key", CERTS["client.key"]],
             "is not the key of --tls-cert"),
            (["--tls-cert", CERTS["server.crt"], "--tls-key", CERTS["server.key"],
              "--tls-client-ca", missing], f"--tls-client-ca: {missing} does not exist"),
            (["--tls-client-ca", CERTS["ca.crt"]], "--tls-client-ca needs --tls-cert"),
            (["--api-key-file", missing], f"--api-key-file: {missing} does not exist"),
            (["--api-key", "two words"], "--api-key (FOLIO_API_KEY) must be printable ASCII"),
            (["--api-key", "a", "--api-key-file", CERTS["ca.crt"]], "not both"),
            (["--health-port", "-1"], "--health-port must be in [0, 65535]"),
            (["--health-port", "{port}"], "--health-port must differ from --port"),
        ]
        for flags, message in cases:
            with self.subTest(flags=flags):
                proc = self.run_scheduler(*flags)
                self.assertEqual(proc.returncode, 1, proc.stderr)
                self.assertIn(message, proc.stderr)
                self.assertNotIn("waiting for", proc.stderr)  # it stopped before listening
        # The environment variables behave like the flags.
        proc = self.run_scheduler(env={"FOLIO_TLS_CERT": CERTS["server.crt"]})
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("--tls-cert needs --tls-key", proc.stderr)


class ApiKeyTest(ClusterTest):
    """Plaintext, the key from FOLIO_API_KEY."""

    @classmethod
    def env(cls):
        return {"FOLIO_API_KEY": KEY}

    def test_every_generation_call_needs_the_key(self):
        for client, message in ((self.client(), MISSING),
                                (self.client(api_key="wrong"), "invalid API key"),
                                (self.client(api_key=KEY + "x"), "invalid API key"),
                                (self.client(api_key=KEY[:-1]), "invalid API key")):
            self.assertRefused(lambda: client.generate(PROMPT, max_tokens=4),
                               grpc.StatusCode.UNAUTHENTICATED, message)
            self.assertRefused(client.model_info, grpc.StatusCode.UNAUTHENTICATED, message)
            self.assertRefused(lambda: client.tokenize("hello"),
                               grpc.StatusCode.UNAUTHENTICATED, message)
            self.assertRefused(lambda: client.abort("some-id"),
                               grpc.StatusCode.UNAUTHENTICATED, message)

    def test_other_schemes_are_missing_the_key(self):
        client = self.client()
        for value in (KEY, f"Basic {KEY}", f"Token {KEY}"):
            self.assertRefused(
                lambda: client.stub.GetModelInfo(client.pb.GetModelInfoRequest(), timeout=10,
                                                 metadata=[("authorization", value)]),
                grpc.StatusCode.UNAUTHENTICATED, MISSING)
        # The scheme is case-insensitive (RFC 6750).
        info = client.stub.GetModelInfo(client.pb.GetModelInfoRequest(), timeout=10,
                                        metadata=[("authorization", f"bearer {KEY}")])
        self.assertEqual(info.model_name, "folio-demo")

    def test_the_right_key_streams(self):
        client = self.client(api_key=KEY)
        self.assertStreams(client)
        self.assertEqual(client.model_info().model_name, "folio-demo")
        self.assertTrue(client.tokenize("hello"))
        self.assertFalse(client.abort("no-such-request"))

    def test_health_and_reflection_need_no_key(self):
        channel = self.client().channel  # no key on this channel
        self.assertEqual(health_check(channel), SERVING)
        reflect = channel.stream_stream(
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo")
        answer = b"".join(reflect(iter([b"\x3a\x00"]), timeout=10))
        self.assertIn(b"folio.v1.Generation", answer)

    def test_folio_generate(self):
        address = ["--address", self.cluster.address]
        no_key = folio_generate(*address, env={"FOLIO_API_KEY": ""})
        self.assertEqual(no_key.returncode, 1, no_key.stderr)
        self.assertIn("not authenticated: " + MISSING, no_key.stderr)
        self.assertIn("pass --api-key or set FOLIO_API_KEY", no_key.stderr)
        wrong = folio_generate(*address, "--api-key", "wrong", env={"FOLIO_API_KEY": ""})
        self.assertEqual(wrong.returncode, 1, wrong.stderr)
        self.assertIn("invalid API key", wrong.stderr)
        for args, env in ((["--api-key", KEY], {"FOLIO_API_KEY": ""}),
                          ([], {"FOLIO_API_KEY": KEY})):
            ok = folio_generate(*address, *args, env=env)
            self.assertEqual(ok.returncode, 0, ok.stderr)
            self.assertIn("finish: length", ok.stderr)
            self.assertTrue(ok.stdout.strip())


class TlsTest(ClusterTest):
    """TLS on the client port, the key from --api-key-file, health on --health-port.
    Two ranks: their rendezvous moves to a plaintext port of its own."""
    TP = 2

    @classmethod
    def flags(cls):
        key_file = os.path.join(TMP.name, "api-key")
        with open(key_file, "w") as f:
            f.write(KEY + "\n")
        cls.health_port = free_port()
        return ["--tls-cert", CERTS["server.crt"], "--tls-key", CERTS["server.key"],
                "--api-key-file", key_file, "--health-port", str(cls.health_port)]

    @classmethod
    def probe_channel(cls, cluster):
        return grpc.insecure_channel(f"127.0.0.1:{cls.health_port}")

    def test_tls_with_the_right_ca_and_key_streams(self):
        client = self.client(api_key=KEY, root_certificates=pem("ca.crt"))
        self.assertStreams(client)
        info = client.model_info()
        self.assertEqual(info.tensor_parallel_size, 2)
        # The key is still checked over TLS.
        no_key = self.client(root_certificates=pem("ca.crt"))
        self.assertRefused(no_key.model_info, grpc.StatusCode.UNAUTHENTICATED, MISSING)
        # Health on the TLS port needs TLS but no key.
        self.assertEqual(health_check(no_key.channel), SERVING)
        self.assertIn("listening on 127.0.0.1:%d (TLS, API key required)" % self.cluster.port,
                      self.cluster.log())
        self.assertIn("worker rendezvous (plaintext)", self.cluster.log())

    def test_server_name_override(self):
        good = self.client(api_key=KEY, root_certificates=pem("ca.crt"), server_name="folio.test")
        self.assertEqual(good.model_info().model_name, "folio-demo")
        bad = self.client(api_key=KEY, root_certificates=pem("ca.crt"),
                          server_name="wrong.example")
        self.assertRefused(bad.model_info, grpc.StatusCode.UNAVAILABLE)

    def test_plaintext_or_an_unknown_ca_fails(self):
        plain = self.client(api_key=KEY)
        self.assertRefused(plain.model_info, grpc.StatusCode.UNAVAILABLE)
        self.assertRefused(lambda: health_check(plain.channel), grpc.StatusCode.UNAVAILABLE)
        other = self.client(api_key=KEY, root_certificates=pem("other-ca.crt"))
        self.assertRefused(other.model_info, grpc.StatusCode.UNAVAILABLE)

    def test_health_port_serves_health_alone_in_plaintext(self):
        channel = grpc.insecure_channel(f"127.0.0.1:{self.health_port}")
        try:
            self.assertEqual(health_check(channel), SERVING)
            stub = folio_client.FolioClient(f"127.0.0.1:{self.health_port}", STUBS, api_key=KEY)
            self.clients.append(stub)
            self.assertRefused(stub.model_info, grpc.StatusCode.UNIMPLEMENTED)
            reflect = channel.stream_stream(
                "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo")
            self.assertRefused(lambda: b"".join(reflect(iter([b"\x3a\x00"]), timeout=10)),
                               grpc.StatusCode.UNIMPLEMENTED)
        finally:
            channel.close()

    def test_folio_generate(self):
        tls = ["--address", self.cluster.address, "--tls-ca", CERTS["ca.crt"]]
        ok = folio_generate(*tls, "--api-key", KEY)
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertIn("finish: length", ok.stderr)
        self.assertTrue(ok.stdout.strip())
        ok = folio_generate(*tls, "--tls-server-name", "folio.test", env={"FOLIO_API_KEY": KEY})
        self.assertEqual(ok.returncode, 0, ok.stderr)
        no_key = folio_generate(*tls, env={"FOLIO_API_KEY": ""})
        self.assertEqual(no_key.returncode, 1, no_key.stderr)
        self.assertIn("not authenticated: " + MISSING, no_key.stderr)
        plain = folio_generate("--address", self.cluster.address, "--api-key", KEY,
                               "--timeout-s", "5")
        self.assertEqual(plain.returncode, 1, plain.stderr)
        self.assertIn("if it speaks TLS, pass --tls-ca FILE or --tls", plain.stderr)
        missing_ca = folio_generate(*tls[:2], "--tls-ca", os.path.join(TMP.name, "nope.crt"))
        self.assertEqual(missing_ca.returncode, 2)
        self.assertIn("--tls-ca: cannot read", missing_ca.stderr)


class MutualTlsTest(ClusterTest):
    """--tls-client-ca: only clients with a certificate the CA signed get in."""

    @classmethod
    def flags(cls):
        cls.health_port = free_port()
        return ["--tls-cert", CERTS["server.crt"], "--tls-key", CERTS["server.key"],
                "--tls-client-ca", CERTS["ca.crt"], "--health-port", str(cls.health_port)]

    @classmethod
    def probe_channel(cls, cluster):
        return grpc.insecure_channel(f"127.0.0.1:{cls.health_port}")

    def test_a_client_certificate_is_required(self):
        good = self.client(root_certificates=pem("ca.crt"), certificate_chain=pem("client.crt"),
                           private_key=pem("client.key"))
        self.assertStreams(good)
        no_cert = self.client(root_certificates=pem("ca.crt"))
        self.assertRefused(no_cert.model_info, grpc.StatusCode.UNAVAILABLE)
        stranger = self.client(root_certificates=pem("ca.crt"),
                               certificate_chain=pem("stranger.crt"),
                               private_key=pem("stranger.key"))
        self.assertRefused(stranger.model_info, grpc.StatusCode.UNAVAILABLE)
        self.assertIn("(mutual TLS)", self.cluster.log())

    def test_folio_generate(self):
        tls = ["--address", self.cluster.address, "--tls-ca", CERTS["ca.crt"]]
        ok = folio_generate(*tls, "--tls-client-cert", CERTS["client.crt"], "--tls-client-key",
                            CERTS["client.key"])
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertIn("finish: length", ok.stderr)
        no_cert = folio_generate(*tls, "--timeout-s", "5")
        self.assertNotEqual(no_cert.returncode, 0)


if __name__ == "__main__":
    unittest.main()
