"""scheduler.httpPort, folio-scheduler's HTTP API: --http-port, the container's and the
Service's http port and the scheduler's NetworkPolicy agree (plaintext and TLS), 0 turns
the API off everywhere, and the port may not be one the scheduler already uses.
"""
import unittest

from chart_tls_test import Tls
from chart_util import (container, flag_value, helm_template, matches, of_kind, one,
                        only_own_tests, render, scheduler_probe)

load_tests = only_own_tests(__name__)  # Tls is imported for Tls.VALUES only


def scheduler_np(objs):
    return one(objs, "NetworkPolicy", "scheduler")


def np_ports(rule):
    return {p["port"] for p in rule.get("ports", [])}


def leaves(tree):
    """Every scalar of a rendered object tree (dict keys excluded)."""
    if isinstance(tree, dict):
        return [v for x in tree.values() for v in leaves(x)]
    if isinstance(tree, list):
        return [v for x in tree for v in leaves(x)]
    return [tree]


class HttpApi(unittest.TestCase):
    """scheduler.httpPort: --http-port, the container's and the Service's http port, the
    scheduler's NetworkPolicy; 0 turns it off everywhere."""

    @classmethod
    def setUpClass(cls):
        cls.objs = render()
        cls.dep = one(cls.objs, "Deployment", "scheduler")
        cls.c = container(cls.dep["spec"]["template"]["spec"], "scheduler")

    def http_everywhere(self, objs):
        """The http port of the container, the Service and the NetworkPolicy, and --http-port."""
        dep = one(objs, "Deployment", "scheduler")
        c = container(dep["spec"]["template"]["spec"], "scheduler")
        container_port = {p["name"]: p["containerPort"] for p in c["ports"]}.get("http")
        svc = self.scheduler_service(objs)
        svc_port = next((p for p in svc["spec"]["ports"] if p["name"] == "http"), None)
        return flag_value(c["args"], "--http-port"), container_port, svc_port, scheduler_np(objs)

    @staticmethod
    def scheduler_service(objs):
        return next(s for s in of_kind(objs, "Service")
                    if s["metadata"]["labels"]["app.kubernetes.io/component"] == "scheduler")

    def test_defaults(self):
        flag, container_port, svc_port, np = self.http_everywhere(self.objs)
        self.assertEqual(flag, "8000")
        self.assertEqual(container_port, 8000)
        self.assertEqual(svc_port, {"name": "http", "port": 8000, "targetPort": "http",
                                    "protocol": "TCP", "appProtocol": "http"})
        # Bound on the pod's every address, like gRPC.
        self.assertEqual(flag_value(self.c["args"], "--host"), "0.0.0.0")
        # The probes stay on grpc.health.v1 at the client port.
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            self.assertEqual(self.c[probe]["grpc"], scheduler_probe(probe, 50051), probe)
            self.assertNotIn("httpGet", self.c[probe])

    def test_values_reach_everything(self):
        objs = render("--set", "scheduler.httpPort=8080")
        flag, container_port, svc_port, np = self.http_everywhere(objs)
        self.assertEqual((flag, container_port, svc_port["port"]), ("8080", 8080, 8080))
        self.assertEqual(int(flag), container_port)
        clients = [r for r in np["spec"]["ingress"] if 8080 in np_ports(r)]
        self.assertEqual(len(clients), 1)
        self.assertIn(50051, np_ports(clients[0]))

    def test_network_policy(self):
        np = scheduler_np(self.objs)
        sched_labels = self.dep["spec"]["template"]["metadata"]["labels"]
        worker_labels = one(self.objs, "StatefulSet", "worker")["spec"]["template"]["metadata"]["labels"]
        self.assertTrue(matches(np["spec"]["podSelector"]["matchLabels"], sched_labels))
        self.assertFalse(matches(np["spec"]["podSelector"]["matchLabels"], worker_labels))
        self.assertEqual(np["spec"]["policyTypes"], ["Ingress"])
        rules = np["spec"]["ingress"]
        # Clients reach grpc and http alike: one rule, from anywhere.
        clients = [r for r in rules if 50051 in np_ports(r)]
        self.assertEqual(len(clients), 1)
        self.assertEqual(np_ports(clients[0]), {50051, 8000})
        self.assertNotIn("from", clients[0])
        for p in clients[0]["ports"]:
            self.assertEqual(p["protocol"], "TCP")
        metrics = [r for r in rules if 9400 in np_ports(r)]
        self.assertEqual(len(metrics), 1)
        self.assertNotIn("from", metrics[0])
        # Every port of the container is open to someone.
        open_ports = set().union(*(np_ports(r) for r in rules))
        self.assertEqual(open_ports, {p["containerPort"] for p in self.c["ports"]})

    def test_network_policy_under_tls(self):
        objs = render(*Tls.VALUES)
        rules = scheduler_np(objs)["spec"]["ingress"]
        c = container(one(objs, "Deployment", "scheduler")["spec"]["template"]["spec"], "scheduler")
        self.assertEqual(set().union(*(np_ports(r) for r in rules)),
                         {p["containerPort"] for p in c["ports"]})
        health = [r for r in rules if 50052 in np_ports(r)]
        self.assertNotIn("from", health[0])  # the kubelet's probes
        rendezvous = [r for r in rules if 50053 in np_ports(r)]
        self.assertEqual(len(rendezvous), 1)
        worker_labels = one(objs, "StatefulSet", "worker")["spec"]["template"]["metadata"]["labels"]
        peers = rendezvous[0]["from"]
        self.assertEqual(len(peers), 1)
        self.assertTrue(matches(peers[0]["podSelector"]["matchLabels"], worker_labels))
        clients = [r for r in rules if 50051 in np_ports(r)]
        self.assertEqual(np_ports(clients[0]), {50051, 8000})

    def test_tls(self):
        objs = render(*Tls.VALUES)
        flag, container_port, svc_port, _ = self.http_everywhere(objs)
        self.assertEqual((flag, container_port), ("8000", 8000))
        # The same --tls-cert serves HTTPS on the http port.
        self.assertEqual(svc_port["appProtocol"], "https")

    def test_zero_turns_it_off(self):
        objs = render("--set", "scheduler.httpPort=0")
        flag, container_port, svc_port, np = self.http_everywhere(objs)
        # folio-scheduler's own default is 8000: the chart must say 0.
        self.assertEqual(flag, "0")
        self.assertIsNone(container_port)
        self.assertIsNone(svc_port)
        self.assertNotIn(8000, set().union(*(np_ports(r) for r in np["spec"]["ingress"])))
        pod = one(objs, "Pod", "test")
        self.assertEqual([c["name"] for c in pod["spec"]["containers"]], ["generate"])
        self.assertNotIn(8000, leaves(objs))
        self.assertFalse([v for v in leaves(objs) if isinstance(v, str) and ":8000" in v])
        objs = render(*Tls.VALUES, "--set", "scheduler.httpPort=0")
        self.assertEqual([c["name"] for c in one(objs, "Pod", "test")["spec"]["containers"]],
                         ["generate"])
        self.assertIsNone(self.http_everywhere(objs)[1])

    def test_port_must_be_its_own(self):
        for args in (["--set", "scheduler.httpPort=50051"],
                     ["--set", "scheduler.httpPort=9400"],
                     [*Tls.VALUES, "--set", "scheduler.httpPort=50052"],
                     [*Tls.VALUES, "--set", "scheduler.httpPort=50053"]):
            with self.subTest(args=args):
                proc = helm_template(*args, check=False)
                self.assertNotEqual(proc.returncode, 0)
                self.assertIn("scheduler.httpPort (", proc.stderr)
        # Without TLS the health and rendezvous ports are not used: 50052 is free.
        self.assertEqual(self.http_everywhere(render("--set", "scheduler.httpPort=50052"))[0],
                         "50052")


if __name__ == "__main__":
    unittest.main()
