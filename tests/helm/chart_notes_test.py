"""templates/NOTES.txt, rendered with several value sets: the `folio generate` command
(Notes) and the curl for /v1/completions (NotesHttp) that reach the scheduler from
outside the cluster through a port-forward, plaintext, with the API key and with TLS;
their flags are checked against the built folio and the local curl.
"""
import json
import os
import re
import shutil
import subprocess
import unittest

from chart_tls_test import Tls
from chart_util import BIN_DIR, NAMESPACE, RELEASE, flag_value, only_own_tests, render_notes

load_tests = only_own_tests(__name__)  # Tls is imported for Tls.VALUES only


def generate_command(notes):
    """The `folio generate ...` command of NOTES.txt, continuation lines joined."""
    m = re.search(r"^ *(folio generate (?:.*\\\n)*.*)$", notes, re.M)
    assert m, notes
    return re.sub(r"\\\n\s*", "", m.group(1))


class Notes(unittest.TestCase):
    """NOTES.txt: the command to reach the scheduler from outside the cluster."""
    SCHED = f"{RELEASE}-folio-scheduler"

    def check_flags(self, command):
        path = os.path.join(BIN_DIR, "folio")
        if not BIN_DIR or not os.path.exists(path):
            return
        help_text = subprocess.run([path, "generate", "--help"], capture_output=True,
                                   text=True).stdout
        for flag in re.findall(r"(?<=\s)--[a-z-]+", command):
            self.assertIn(flag + " ", help_text)

    def test_plaintext(self):
        notes = render_notes()
        self.assertIn(f"port-forward svc/{self.SCHED} 50051:50051", notes)
        cmd = generate_command(notes)
        self.assertEqual(cmd, 'folio generate --address 127.0.0.1:50051 "hello"')
        self.assertIn('served as "models"', notes)
        self.assertIn("model.name", notes)

    def test_named_model_has_no_hint(self):
        for args in (["--set", "model.name=m"], ["--set", "model.subPath=m"]):
            self.assertNotIn("served as", render_notes(*args))

    def test_api_key_and_tls(self):
        cmd = generate_command(render_notes(*Tls.VALUES))
        secret = f"{RELEASE}-folio-secret"
        self.assertIn(f"get secret {secret} -o jsonpath='{{.data.api-key}}'", cmd)
        args = cmd.split()
        self.assertIn("--api-key", args)
        self.assertIn("--tls", args)
        self.assertEqual(flag_value(args, "--tls-ca"), "ca.crt")
        self.assertEqual(flag_value(args, "--tls-server-name"), f"{self.SCHED}.{NAMESPACE}.svc")
        self.check_flags(cmd)

    def test_api_key_only(self):
        cmd = generate_command(render_notes("--set", "secret.create=true",
                                            "--set", "secret.apiKey=abc"))
        self.assertIn("--api-key", cmd.split())
        self.assertNotIn("--tls", cmd)

    def test_tls_with_system_roots_and_client_auth(self):
        cmd = generate_command(render_notes(
            "--set", "secret.existingSecret=s", "--set", "secret.tls.enabled=true",
            "--set", "secret.tls.clientAuth=true"))
        args = cmd.split()
        self.assertEqual(flag_value(args, "--tls-ca"), "ca.crt")  # an existingSecret's ca.crt
        self.assertEqual(flag_value(args, "--tls-client-cert"), "client.crt")
        self.check_flags(cmd)
        cmd = generate_command(render_notes("--set", "secret.create=true",
                                            "--set", "secret.tls.crt=C",
                                            "--set", "secret.tls.key=K"))
        self.assertIn("--tls", cmd.split())
        self.assertNotIn("--tls-ca", cmd)
        self.assertNotIn("--api-key", cmd)


class NotesHttp(unittest.TestCase):
    """NOTES.txt's curl for /v1/completions through a port-forward of the http port."""
    SCHED = f"{RELEASE}-folio-scheduler"

    @staticmethod
    def curl_command(notes):
        m = re.search(r"^ *(curl (?:.*\\\n)*.*)$", notes, re.M)
        assert m, notes
        return re.sub(r"\\\n\s*", "", m.group(1))

    def check_curl_flags(self, cmd):
        if not shutil.which("curl"):
            return
        help_text = subprocess.run(["curl", "--help", "all"], capture_output=True, text=True).stdout
        for flag in re.findall(r"(?<=\s)--?[a-zA-Z][a-z-]*", cmd):
            self.assertRegex(help_text, r"(^|\s)%s\b" % re.escape(flag), flag)

    def body(self, cmd):
        return json.loads(re.search(r"-d '([^']*)'", cmd).group(1))

    def test_plaintext(self):
        notes = render_notes()
        self.assertIn(f"port-forward svc/{self.SCHED} 8000:8000", notes)
        cmd = self.curl_command(notes)
        self.assertTrue(cmd.startswith("curl -sS http://127.0.0.1:8000/v1/completions "), cmd)
        self.assertIn("-H 'Content-Type: application/json'", cmd)
        self.assertEqual(self.body(cmd), {"model": "models", "prompt": "hello", "max_tokens": 8})
        self.assertNotIn("Authorization", cmd)
        self.check_curl_flags(cmd)
        cmd = self.curl_command(render_notes("--set", "model.subPath=org/llama-3-8b",
                                             "--set", "scheduler.httpPort=8080"))
        self.assertIn("http://127.0.0.1:8080/v1/completions", cmd)
        self.assertEqual(self.body(cmd)["model"], "llama-3-8b")

    def test_api_key_and_tls(self):
        cmd = self.curl_command(render_notes(*Tls.VALUES))
        host = f"{self.SCHED}.{NAMESPACE}.svc"
        self.assertIn(f"https://{host}:8000/v1/completions", cmd)
        args = cmd.split()
        self.assertEqual(flag_value(args, "--resolve"), f"{host}:8000:127.0.0.1")
        self.assertEqual(flag_value(args, "--cacert"), "ca.crt")
        self.assertIn(f"get secret {RELEASE}-folio-secret -o jsonpath='{{.data.api-key}}'", cmd)
        self.assertIn('-H "Authorization: Bearer $(kubectl', cmd)
        self.assertNotIn("--cert", args)
        self.check_curl_flags(cmd)

    def test_mutual_tls_and_system_roots(self):
        cmd = self.curl_command(render_notes("--set", "secret.existingSecret=s",
                                             "--set", "secret.tls.enabled=true",
                                             "--set", "secret.tls.clientAuth=true"))
        args = cmd.split()
        self.assertEqual(flag_value(args, "--cert"), "client.crt")
        self.assertEqual(flag_value(args, "--key"), "client.key")
        self.check_curl_flags(cmd)
        cmd = self.curl_command(render_notes("--set", "secret.create=true",
                                             "--set", "secret.tls.crt=C", "--set", "secret.tls.key=K"))
        self.assertIn("https://", cmd)
        self.assertNotIn("--cacert", cmd)
        self.assertNotIn("Authorization", cmd)

    def test_off(self):
        notes = render_notes("--set", "scheduler.httpPort=0")
        self.assertNotIn("curl", notes)
        self.assertNotIn("8000", notes)
        self.assertIn("folio generate", notes)


if __name__ == "__main__":
    unittest.main()
