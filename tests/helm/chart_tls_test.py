"""TLS from the chart's Secret (secret.tls.*): folio-scheduler serves TLS with the
Secret's files, its probes call the plaintext health port, the workers' rendezvous has a
port of its own, and the helm test pod verifies the server with the CA and sends the API
key; also mutual TLS, an existing Secret, and no CA (the system's roots).
"""
import os
import subprocess
import unittest

from chart_util import (BIN_DIR, TLS_DIR, container, flag_value, one, render,
                        scheduler_probe)

class Tls(unittest.TestCase):
    """TLS material in a Secret the chart makes: folio-scheduler serves TLS, the probes
    call the plaintext health port, the workers' rendezvous has a port of its own, and
    the helm test pod verifies the server with the CA and sends the API key."""
    VALUES = ["--set", "secret.create=true", "--set", "secret.apiKey=abc",
              "--set", "secret.tls.crt=CRT", "--set", "secret.tls.key=KEY",
              "--set", "secret.tls.ca=CA"]

    @classmethod
    def setUpClass(cls):
        cls.objs = render(*cls.VALUES)
        cls.dep = one(cls.objs, "Deployment", "scheduler")
        cls.pod_spec = cls.dep["spec"]["template"]["spec"]
        cls.c = container(cls.pod_spec, "scheduler")
        cls.secret = one(cls.objs, "Secret")
        cls.test_pod = one(cls.objs, "Pod", "test")

    def secret_file(self, path):
        """The Secret key that `path` (under the mount) is, after checking the mount."""
        mounts = {m["name"]: m["mountPath"] for m in self.c["volumeMounts"]}
        self.assertEqual(mounts["secret"], TLS_DIR)
        vol = next(v for v in self.pod_spec["volumes"] if v["name"] == "secret")
        self.assertEqual(vol["secret"]["secretName"], self.secret["metadata"]["name"])
        self.assertTrue(path.startswith(TLS_DIR + "/"), path)
        key = path[len(TLS_DIR) + 1:]
        self.assertIn(key, self.secret["data"])
        return key

    def test_scheduler_serves_tls_from_the_secret(self):
        args = self.c["args"]
        self.assertEqual(self.secret_file(flag_value(args, "--tls-cert")), "tls.crt")
        self.assertEqual(self.secret_file(flag_value(args, "--tls-key")), "tls.key")
        self.assertIsNone(flag_value(args, "--tls-client-ca"))

    def test_probes_use_the_health_port(self):
        args = self.c["args"]
        health = int(flag_value(args, "--health-port"))
        self.assertEqual(health, 50052)
        self.assertNotEqual(health, int(flag_value(args, "--port")))
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            self.assertEqual(self.c[probe]["grpc"], scheduler_probe(probe, health), probe)
        ports = {p["name"]: p["containerPort"] for p in self.c["ports"]}
        self.assertEqual(ports, {"grpc": 50051, "http": 8000, "metrics": 9400, "health": 50052,
                                 "rendezvous": 50053})

    def test_workers_rendezvous_on_the_plaintext_port(self):
        rendezvous = flag_value(self.c["args"], "--rendezvous-port")
        env = {e["name"]: e for e in self.c["env"]}
        self.assertEqual(env["FOLIO_ADVERTISE_ADDRESS"]["value"], f"$(POD_IP):{rendezvous}")

    def test_helm_test_pod(self):
        c = self.test_pod["spec"]["containers"][0]
        self.assertEqual(flag_value(c["args"], "--tls-ca"), f"{TLS_DIR}/ca.crt")
        self.assertEqual(c["args"][-1], "hello")
        self.assertEqual({m["name"]: m["mountPath"] for m in c["volumeMounts"]},
                         {"secret": TLS_DIR})
        vol = self.test_pod["spec"]["volumes"][0]
        self.assertEqual(vol["secret"]["secretName"], self.secret["metadata"]["name"])
        env = {e["name"]: e for e in c["env"]}
        self.assertEqual(env["FOLIO_API_KEY"]["valueFrom"]["secretKeyRef"]["key"], "api-key")

    def test_flags_exist_in_binaries(self):
        for binary, args, help_args in [
                ("folio-scheduler", self.c["args"], ["--help"]),
                ("folio", self.test_pod["spec"]["containers"][0]["args"],
                 ["generate", "--help"])]:
            path = os.path.join(BIN_DIR, binary)
            if not BIN_DIR or not os.path.exists(path):
                self.skipTest(f"{binary} not built")
            help_text = subprocess.run([path, *help_args], capture_output=True, text=True).stdout
            for a in args:
                if a.startswith("--"):
                    self.assertIn(a.split("=")[0] + " ", help_text, binary)

    def test_mutual_tls(self):
        objs = render(*self.VALUES, "--set", "secret.tls.clientAuth=true",
                      "--set", "secret.tls.clientCrt=C", "--set", "secret.tls.clientKey=K")
        c = container(one(objs, "Deployment", "scheduler")["spec"]["template"]["spec"],
                      "scheduler")
        self.assertEqual(flag_value(c["args"], "--tls-client-ca"), f"{TLS_DIR}/ca.crt")
        data = one(objs, "Secret")["data"]
        for key in ("ca.crt", "client.crt", "client.key"):
            self.assertIn(key, data)
        args = one(objs, "Pod", "test")["spec"]["containers"][0]["args"]
        self.assertEqual(flag_value(args, "--tls-client-cert"), f"{TLS_DIR}/client.crt")
        self.assertEqual(flag_value(args, "--tls-client-key"), f"{TLS_DIR}/client.key")

    def test_existing_secret(self):
        objs = render("--set", "secret.existingSecret=folio-tls",
                      "--set", "secret.tls.enabled=true", "--set", "scheduler.healthPort=8081")
        self.assertNotIn("Secret", {k for k, _ in objs})
        c = container(one(objs, "Deployment", "scheduler")["spec"]["template"]["spec"],
                      "scheduler")
        self.assertEqual(flag_value(c["args"], "--tls-cert"), f"{TLS_DIR}/tls.crt")
        self.assertEqual(flag_value(c["args"], "--health-port"), "8081")
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            self.assertEqual(c[probe]["grpc"], scheduler_probe(probe, 8081), probe)
        args = one(objs, "Pod", "test")["spec"]["containers"][0]["args"]
        self.assertEqual(flag_value(args, "--tls-ca"), f"{TLS_DIR}/ca.crt")

    def test_without_a_ca_the_test_pod_uses_system_roots(self):
        objs = render("--set", "secret.create=true", "--set", "secret.tls.crt=CRT",
                      "--set", "secret.tls.key=KEY")
        args = one(objs, "Pod", "test")["spec"]["containers"][0]["args"]
        self.assertIn("--tls", args)
        self.assertIsNone(flag_value(args, "--tls-ca"))


if __name__ == "__main__":
    unittest.main()
