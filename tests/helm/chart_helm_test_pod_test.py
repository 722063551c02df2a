"""The helm test pod's completions container (POST /v1/completions on the Service's
http port, with the API key and TLS material of the `folio generate` container): as
rendered for several value sets (HelmTestCompletions); run here, as rendered, with sh and
the local curl against a stub HTTP(S) server standing for the Service
(HelmTestCompletionsRun; openssl for the TLS cases); and against a real folio-scheduler
with one CPU worker and the demo model, when built (HelmTestCompletionsAgainstFolio).
"""
import base64
import http.server
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import unittest
import urllib.parse

from chart_tls_test import Tls
from chart_util import (BIN_DIR, NAMESPACE, RELEASE, SOURCE_DIR, TLS_DIR, container,
                        flag_value, of_kind, one, only_own_tests, render)

load_tests = only_own_tests(__name__)  # Tls is imported for Tls.VALUES only


SCHED_HOST = f"{RELEASE}-folio-scheduler.{NAMESPACE}.svc"


class HelmTestCompletions(unittest.TestCase):
    """The helm test pod's second container: POST /v1/completions on the Service's http
    port, with the API key and TLS material the `folio generate` container uses."""

    def completions(self, *args):
        pod = one(render(*args), "Pod", "test")
        names = [c["name"] for c in pod["spec"]["containers"]]
        self.assertEqual(names, ["generate", "completions"])
        return pod, pod["spec"]["containers"][1]

    def test_plaintext(self):
        pod, c = self.completions()
        self.assertEqual(c["image"], pod["spec"]["containers"][0]["image"])
        self.assertEqual(c["command"], ["sh", "-c"])
        script, name, url, *opts = c["args"]
        self.assertEqual(url, f"http://{SCHED_HOST}:8000/v1/completions")
        self.assertEqual(opts, [])
        self.assertIn("curl ", script)
        self.assertIn('"$url"', script)
        self.assertRegex(script, r'\[ "\$code" != 200 \]')
        self.assertIn('"choices"', script)
        env = {e["name"]: e for e in c["env"]}
        self.assertEqual(json.loads(env["FOLIO_TEST_REQUEST"]["value"]),
                         {"prompt": "hello", "max_tokens": 8})
        self.assertNotIn("FOLIO_API_KEY", env)  # no Secret
        self.assertNotIn("volumeMounts", c)
        self.assertNotIn("volumes", pod["spec"])
        r = subprocess.run(["sh", "-n", "-c", script], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_values(self):
        _, c = self.completions("--set", "scheduler.httpPort=8443", "--set", "tests.prompt=a \"b\"",
                                "--set", "tests.maxTokens=3")
        self.assertEqual(c["args"][2], f"http://{SCHED_HOST}:8443/v1/completions")
        env = {e["name"]: e for e in c["env"]}
        self.assertEqual(json.loads(env["FOLIO_TEST_REQUEST"]["value"]),
                         {"prompt": 'a "b"', "max_tokens": 3})

    def test_api_key(self):
        _, c = self.completions("--set", "secret.create=true", "--set", "secret.apiKey=abc")
        ref = {e["name"]: e for e in c["env"]}["FOLIO_API_KEY"]["valueFrom"]["secretKeyRef"]
        self.assertEqual((ref["name"], ref["key"], ref["optional"]),
                         (f"{RELEASE}-folio-secret", "api-key", True))
        self.assertIn('-H "Authorization: Bearer ${FOLIO_API_KEY}"', c["args"][0])
        self.assertTrue(c["args"][2].startswith("http://"))

    def test_tls_with_the_ca(self):
        pod, c = self.completions(*Tls.VALUES)
        _, _, url, *opts = c["args"]
        self.assertEqual(url, f"https://{SCHED_HOST}:8000/v1/completions")
        self.assertEqual(opts, ["--cacert", f"{TLS_DIR}/ca.crt"])
        self.assertEqual({m["name"]: m["mountPath"] for m in c["volumeMounts"]},
                         {"secret": TLS_DIR})
        self.assertEqual(pod["spec"]["volumes"][0]["secret"]["secretName"],
                         f"{RELEASE}-folio-secret")
        self.assertIn("FOLIO_API_KEY", {e["name"] for e in c["env"]})

    def test_tls_with_system_roots(self):
        _, c = self.completions("--set", "secret.create=true", "--set", "secret.tls.crt=CRT",
                                "--set", "secret.tls.key=KEY")
        self.assertTrue(c["args"][2].startswith("https://"))
        self.assertEqual(c["args"][3:], [])

    def test_mutual_tls_and_existing_secret(self):
        _, c = self.completions(*Tls.VALUES, "--set", "secret.tls.clientAuth=true",
                                "--set", "secret.tls.clientCrt=C", "--set", "secret.tls.clientKey=K")
        opts = c["args"][3:]
        self.assertEqual(flag_value(opts, "--cacert"), f"{TLS_DIR}/ca.crt")
        self.assertEqual(flag_value(opts, "--cert"), f"{TLS_DIR}/client.crt")
        self.assertEqual(flag_value(opts, "--key"), f"{TLS_DIR}/client.key")
        _, c = self.completions("--set", "secret.existingSecret=folio-tls",
                                "--set", "secret.tls.enabled=true")
        self.assertEqual(flag_value(c["args"][3:], "--cacert"), f"{TLS_DIR}/ca.crt")
        ref = {e["name"]: e for e in c["env"]}["FOLIO_API_KEY"]["valueFrom"]["secretKeyRef"]
        self.assertEqual(ref["name"], "folio-tls")

    def test_curl_flags_exist(self):
        if not shutil.which("curl"):
            self.skipTest("no curl")
        help_text = subprocess.run(["curl", "--help", "all"], capture_output=True, text=True).stdout
        _, c = self.completions(*Tls.VALUES, "--set", "secret.tls.clientAuth=true",
                                "--set", "secret.tls.clientCrt=C", "--set", "secret.tls.clientKey=K")
        flags = set(re.findall(r"(?<=\s)--[a-z-]+", c["args"][0])) | {
            a for a in c["args"][3:] if a.startswith("--")}
        for flag in flags:
            self.assertRegex(help_text, r"(^|\s)%s\b" % re.escape(flag), flag)


class _Stub:
    """An HTTP(S) server on 127.0.0.1 standing for the scheduler Service: each POST gets
    the next of `answers` (code, body), the last one repeating; `requests` records them."""

    def __init__(self, answers, tls=None):
        stub = self
        self.answers, self.requests = list(answers), []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
                stub.requests.append({"path": self.path, "headers": dict(self.headers),
                                      "body": body})
                code, answer = stub.answers[min(len(stub.requests), len(stub.answers)) - 1]
                data = answer.encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls:
            cert, key, client_ca = tls
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(cert, key)
            if client_ca:
                ctx.verify_mode = ssl.CERT_REQUIRED
                ctx.load_verify_locations(client_ca)
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def run_completions(tc, objs, port, tmp):
    """Runs the rendered helm test pod's completions container here: its command and args,
    its env (the Secret's values resolved), the Secret's files at the mount path (a
    directory under tmp), and `--resolve` sending the Service's name to 127.0.0.1:port."""
    pod = one(objs, "Pod", "test")
    c = container(pod["spec"], "completions")
    secrets = {s["metadata"]["name"]: s.get("data") or {} for s in of_kind(objs, "Secret")}
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    for e in c.get("env", []):
        if "value" in e:
            env[e["name"]] = e["value"]
            continue
        ref = e["valueFrom"]["secretKeyRef"]
        data = secrets.get(ref["name"], {})
        if ref["key"] in data:
            env[e["name"]] = base64.b64decode(data[ref["key"]]).decode()
        else:
            tc.assertTrue(ref.get("optional"), e)
    mount = tempfile.mkdtemp(dir=tmp)
    for m in c.get("volumeMounts", []):
        tc.assertEqual(m["mountPath"], TLS_DIR)
        vol = next(v for v in pod["spec"]["volumes"] if v["name"] == m["name"])
        for key, value in secrets[vol["secret"]["secretName"]].items():
            with open(os.path.join(mount, key), "wb") as f:
                f.write(base64.b64decode(value))
    script, name, url, *opts = [a.replace(TLS_DIR, mount) for a in c["args"]]
    host = urllib.parse.urlsplit(url).hostname
    tc.assertEqual(host, SCHED_HOST)
    tc.assertEqual(urllib.parse.urlsplit(url).port, port)
    cmd = [*c["command"], script, name, url, "--resolve", f"{host}:{port}:127.0.0.1", *opts]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=400)


OK_ANSWER = json.dumps({"id": "cmpl-1", "object": "text_completion", "model": "models",
                        "choices": [{"index": 0, "text": " world", "logprobs": None,
                                     "finish_reason": "length"}]})


@unittest.skipUnless(shutil.which("curl") and shutil.which("sh"), "needs sh and curl")
class HelmTestCompletionsRun(unittest.TestCase):
    """Runs the completions container as rendered (its sh script, curl flags, env and the
    Secret's files at the mount path) with the local curl against a stub server for the
    Service; `--resolve` points the Service's name at it. The image's curl is Debian's."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.pki = None
        if shutil.which("openssl"):
            cls.pki = cls.make_pki(cls.tmp)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @staticmethod
    def make_pki(d):
        """A CA, a server certificate naming the Service, and a client certificate."""
        def ssl_cmd(*args):
            subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)
        ssl_cmd("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
                "-out", "ca.crt", "-days", "2", "-subj", "/CN=folio-test-ca")
        for name, ext in (("server", f"subjectAltName=DNS:{SCHED_HOST}\n"),
                          ("client", "extendedKeyUsage=clientAuth\n")):
            with open(os.path.join(d, name + ".ext"), "w") as f:
                f.write(ext)
            ssl_cmd("req", "-newkey", "rsa:2048", "-nodes", "-keyout", name + ".key",
                    "-out", name + ".csr", "-subj", "/CN=" + name)
            ssl_cmd("x509", "-req", "-in", name + ".csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                    "-CAcreateserial", "-out", name + ".crt", "-days", "2",
                    "-extfile", name + ".ext")
        return {n: os.path.join(d, n) for n in ("ca.crt", "server.crt", "server.key",
                                                 "client.crt", "client.key")}

    def tls_values(self, client_auth=False, ca=True):
        if not self.pki:
            self.skipTest("no openssl")
        p = self.pki
        values = ["--set", "secret.create=true",
                  "--set-file", f"secret.tls.crt={p['server.crt']}",
                  "--set-file", f"secret.tls.key={p['server.key']}"]
        if ca:
            values += ["--set-file", f"secret.tls.ca={p['ca.crt']}"]
        if client_auth:
            values += ["--set", "secret.tls.clientAuth=true",
                       "--set-file", f"secret.tls.clientCrt={p['client.crt']}",
                       "--set-file", f"secret.tls.clientKey={p['client.key']}"]
        return values

    def run_pod(self, answers, *values, server_tls=None):
        stub = _Stub(answers, server_tls)
        self.addCleanup(stub.close)
        objs = render("--set", f"scheduler.httpPort={stub.port}", *values)
        return run_completions(self, objs, stub.port, self.tmp), stub.requests

    def test_200_with_a_choice(self):
        proc, reqs = self.run_pod([(200, OK_ANSWER)])
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("ok: HTTP 200 with a choice", proc.stdout)
        self.assertEqual(len(reqs), 1)
        self.assertEqual(reqs[0]["path"], "/v1/completions")
        self.assertEqual(reqs[0]["headers"]["Content-Type"], "application/json")
        self.assertNotIn("Authorization", reqs[0]["headers"])
        self.assertEqual(json.loads(reqs[0]["body"]), {"prompt": "hello", "max_tokens": 8})

    def test_fails_without_a_choice_or_on_an_error(self):
        for answer in [(200, json.dumps({"object": "text_completion", "choices": []})),
                       (200, "not json"),
                       (401, json.dumps({"error": {"message": "bad key", "code": 401}})),
                       (400, json.dumps({"error": {"message": "bad", "code": 400}}))]:
            with self.subTest(answer=answer):
                proc, reqs = self.run_pod([answer])
                self.assertNotEqual(proc.returncode, 0, proc.stdout)
                self.assertEqual(len(reqs), 1)  # 4xx is not retried

    def test_retries_while_loading(self):
        unavailable = (503, json.dumps({"error": {"message": "the model is still loading"}}))
        proc, reqs = self.run_pod([unavailable, (200, OK_ANSWER)])
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertEqual(len(reqs), 2)

    def test_api_key(self):
        proc, reqs = self.run_pod([(200, OK_ANSWER)], "--set", "secret.create=true",
                                  "--set", "secret.apiKey=s3cret")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertEqual(reqs[0]["headers"]["Authorization"], "Bearer s3cret")
        # A Secret without api-key: no header.
        proc, reqs = self.run_pod([(200, OK_ANSWER)], "--set", "secret.create=true")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertNotIn("Authorization", reqs[0]["headers"])

    def test_tls_verifies_the_server_with_the_ca(self):
        values = self.tls_values()
        server = (self.pki["server.crt"], self.pki["server.key"], None)
        proc, reqs = self.run_pod([(200, OK_ANSWER)], *values, "--set", "secret.apiKey=k",
                                  server_tls=server)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertEqual(reqs[0]["headers"]["Authorization"], "Bearer k")
        # Without the CA the system's roots do not know the test CA: curl must refuse.
        proc, reqs = self.run_pod([(200, OK_ANSWER)], *self.tls_values(ca=False),
                                  server_tls=server)
        self.assertNotEqual(proc.returncode, 0, proc.stdout)
        self.assertEqual(reqs, [])

    def test_mutual_tls(self):
        values = self.tls_values(client_auth=True)
        server = (self.pki["server.crt"], self.pki["server.key"], self.pki["ca.crt"])
        proc, reqs = self.run_pod([(200, OK_ANSWER)], *values, server_tls=server)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertEqual(len(reqs), 1)
        # The same server refuses a client without a certificate.
        proc, reqs = self.run_pod([(200, OK_ANSWER)], *self.tls_values(), server_tls=server)
        self.assertNotEqual(proc.returncode, 0, proc.stdout)
        self.assertEqual(reqs, [])


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for sock in socks:
        sock.bind(("127.0.0.1", 0))
    ports = [sock.getsockname()[1] for sock in socks]
    for sock in socks:
        sock.close()
    return ports


class HelmTestCompletionsAgainstFolio(unittest.TestCase):
    """The completions container, as rendered, against a real folio-scheduler (with one
    CPU worker and the demo model) serving the HTTP API: it must pass, with and without
    an API key, and fail on a wrong key. Needs the built binaries (FOLIO_BIN_DIR) with
    --http-port, and sh and curl."""

    @classmethod
    def setUpClass(cls):
        sched = os.path.join(BIN_DIR, "folio-scheduler")
        worker = os.path.join(BIN_DIR, "folio-worker")
        cls.model = os.path.join(SOURCE_DIR, "models", "folio-demo")
        if not (BIN_DIR and os.path.exists(sched) and os.path.exists(worker)):
            raise unittest.SkipTest("folio-scheduler / folio-worker not built")
        if "--http-port " not in subprocess.run([sched, "--help"], capture_output=True,
                                                text=True).stdout:
            raise unittest.SkipTest("folio-scheduler has no --http-port")
        if not (shutil.which("curl") and shutil.which("sh") and os.path.isdir(cls.model)):
            raise unittest.SkipTest("needs sh, curl and models/folio-demo")
        cls.sched, cls.worker = sched, worker
        cls.tmp = tempfile.mkdtemp()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def start_folio(self, *flags):
        worker_port, grpc_port, http_port = free_ports(3)
        procs = []
        for cmd in ([self.worker, "--rank", "0", "--port", str(worker_port),
                     "--metrics-port", "0"],
                    [self.sched, "--model", self.model, "--workers", f"127.0.0.1:{worker_port}",
                     "--port", str(grpc_port), "--http-port", str(http_port),
                     "--metrics-port", "0", *flags]):
            log = open(os.path.join(self.tmp, os.path.basename(cmd[0]) + ".log"), "ab")
            self.addCleanup(log.close)
            procs.append(subprocess.Popen(cmd, stdout=log, stderr=log))

        def stop():
            for proc in reversed(procs):
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.addCleanup(stop)
        return http_port

    def test_passes(self):
        port = self.start_folio()
        proc = run_completions(self, render("--set", f"scheduler.httpPort={port}"), port, self.tmp)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("ok: HTTP 200 with a choice", proc.stdout)

    def test_api_key(self):
        port = self.start_folio("--api-key", "s3cret")
        for key, rc in (("s3cret", 0), ("wrong", 1)):
            with self.subTest(key=key):
                objs = render("--set", f"scheduler.httpPort={port}", "--set", "secret.create=true",
                              "--set", f"secret.apiKey={key}")
                proc = run_completions(self, objs, port, self.tmp)
                self.assertEqual(proc.returncode, rc, proc.stdout + proc.stderr)
                if rc:
                    self.assertIn("HTTP 401", proc.stderr)


if __name__ == "__main__":
    unittest.main()
