"""Renders helm/folio with `helm template` and checks the objects it makes.

Run by ctest (tests/helm/CMakeLists.txt) with FOLIO_HELM (a Helm 3 binary),
FOLIO_CHART (the chart) and, when built, FOLIO_BIN_DIR (folio-scheduler and
folio-worker, whose --help the rendered flags are checked against). With sh and curl
on the machine (openssl for the TLS cases) it also runs the helm test pod's
/v1/completions container, as rendered, against a stub server and, when built, against
a real folio-scheduler with the demo model.
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

import yaml

HELM = os.environ.get("FOLIO_HELM", "helm")
CHART = os.environ.get(
    "FOLIO_CHART", os.path.join(os.path.dirname(__file__), "..", "..", "helm", "folio"))
BIN_DIR = os.environ.get("FOLIO_BIN_DIR", "")
SOURCE_DIR = os.environ.get(
    "FOLIO_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
RELEASE = "rel"
NAMESPACE = "serving"



def scheduler_probe(probe, port):
    """The scheduler's gRPC probe: readiness and start-up ask for the server's status,
    liveness for the "liveness" service (SERVING while the worker group is rebuilt)."""
    return {"port": port, "service": "liveness"} if probe == "livenessProbe" else {"port": port}

def helm_template(*args, check=True):
    cmd = [HELM, "template", RELEASE, CHART, "--namespace", NAMESPACE, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed:\n{proc.stderr}")
    return proc


def render(*args):
    docs = [d for d in yaml.safe_load_all(helm_template(*args).stdout) if d]
    objects = {}
    for d in docs:
        key = (d["kind"], d["metadata"]["name"])
        assert key not in objects, f"duplicate {key}"
        objects[key] = d
    return objects


def of_kind(objects, kind):
    return [o for (k, _), o in objects.items() if k == kind]


def one(objects, kind, component=None):
    found = [o for o in of_kind(objects, kind)
             if component is None
             or o["metadata"]["labels"].get("app.kubernetes.io/component") == component]
    assert len(found) == 1, f"{len(found)} {kind} ({component})"
    return found[0]


def matches(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


def container(pod_spec, name):
    return next(c for c in pod_spec["containers"] if c["name"] == name)


def flag_value(args, flag):
    """Value of `--flag value` or `--flag=value` in an argument list."""
    for i, a in enumerate(args):
        if a == flag:
            return args[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def render_notes(*args):
    """templates/NOTES.txt rendered with the given values. `helm template` skips it and
    `helm install --dry-run` needs a cluster, so a copy of the chart renders it through
    `tpl` into a ConfigMap."""
    with tempfile.TemporaryDirectory() as tmp:
        chart = os.path.join(tmp, "folio")
        shutil.copytree(CHART, chart)
        shutil.copy(os.path.join(chart, "templates", "NOTES.txt"), os.path.join(chart, "notes.txt"))
        with open(os.path.join(chart, "templates", "zz-notes.yaml"), "w") as f:
            f.write("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\n"
                    "data:\n  notes: {{ tpl (.Files.Get \"notes.txt\") . | quote }}\n")
        cmd = [HELM, "template", RELEASE, chart, "--namespace", NAMESPACE,
               "-s", "templates/zz-notes.yaml", *args]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} failed:\n{proc.stderr}")
        return yaml.safe_load(proc.stdout)["data"]["notes"]


def generate_command(notes):
    """The `folio generate ...` command of NOTES.txt, continuation lines joined."""
    m = re.search(r"^ *(folio generate (?:.*\\\n)*.*)$", notes, re.M)
    assert m, notes
    return re.sub(r"\\\n\s*", "", m.group(1))


def rules_jobs():
    """The job="..." values deploy/prometheus/folio-rules.yml selects."""
    with open(os.path.join(SOURCE_DIR, "deploy", "prometheus", "folio-rules.yml")) as f:
        return set(re.findall(r'\bjob="([^"]+)"', f.read()))


GPU_TP4 = ["-f", os.path.join(CHART, "ci", "gpu-tp4-values.yaml")]


class DefaultValues(unittest.TestCase):
    """The defaults: CPU-only, one rank, model on a PVC."""

    @classmethod
    def setUpClass(cls):
        cls.objs = render()
        cls.sts = one(cls.objs, "StatefulSet", "worker")
        cls.dep = one(cls.objs, "Deployment", "scheduler")
        cls.cm = cls.objs[("ConfigMap", f"{RELEASE}-folio-engine")]

    def test_kinds(self):
        kinds = sorted({k for k, _ in self.objs})
        for k in ["ConfigMap", "Deployment", "NetworkPolicy", "PersistentVolumeClaim",
                  "PodDisruptionBudget", "Pod", "Service", "ServiceAccount", "StatefulSet"]:
            self.assertIn(k, kinds)
        self.assertNotIn("ServiceMonitor", kinds)  # off by default
        self.assertNotIn("PrometheusRule", kinds)
        self.assertNotIn("Secret", kinds)  # off by default

    def test_statefulset(self):
        spec = self.sts["spec"]
        self.assertEqual(spec["replicas"], 1)
        self.assertEqual(spec["podManagementPolicy"], "Parallel")
        self.assertTrue(matches(spec["selector"]["matchLabels"],
                                spec["template"]["metadata"]["labels"]))
        headless = self.objs[("Service", spec["serviceName"])]
        self.assertEqual(headless["spec"]["clusterIP"], "None")
        self.assertTrue(matches(headless["spec"]["selector"],
                                spec["template"]["metadata"]["labels"]))
        self.assertTrue(headless["spec"].get("publishNotReadyAddresses"))

    def test_cpu_only_has_no_gpu_resource(self):
        c = container(self.sts["spec"]["template"]["spec"], "worker")
        for section in ("limits", "requests"):
            for name in c["resources"].get(section, {}):
                self.assertIn(name, ("cpu", "memory", "ephemeral-storage"))
        self.assertEqual(self.cm["data"]["FOLIO_DEVICE"], "cpu")

    def test_worker_container(self):
        pod = self.sts["spec"]["template"]["spec"]
        c = container(pod, "worker")
        # The rank is the pod ordinal, taken from HOSTNAME by a shell.
        self.assertEqual(c["command"][:2], ["sh", "-c"])
        self.assertIn('--rank "${HOSTNAME##*-}"', c["command"][2])
        self.assertIn("exec folio-worker", c["command"][2])
        args = c["args"]
        self.assertEqual(flag_value(args, "--host"), "0.0.0.0")
        self.assertEqual(flag_value(args, "--port"), "50061")
        self.assertEqual(flag_value(args, "--metrics-port"), "9401")
        # folio-worker does not take --flag=value.
        self.assertFalse([a for a in args if a.startswith("--") and "=" in a], args)
        env = {e["name"]: e for e in c["env"]}
        self.assertEqual(env["FOLIO_WORKER_COLLECTIVE_HOST"]["valueFrom"]["fieldRef"]["fieldPath"],
                         "status.podIP")
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        self.assertEqual(ports, {"grpc": 50061, "metrics": 9401})
        for probe in ("readinessProbe", "livenessProbe"):
            self.assertEqual(c[probe]["grpc"], {"port": 50061}, probe)
        # /dev/shm is a memory emptyDir.
        mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
        vols = {v["name"]: v for v in pod["volumes"]}
        self.assertEqual(vols[mounts["/dev/shm"]]["emptyDir"]["medium"], "Memory")
        self.assertIn("persistentVolumeClaim", vols[mounts["/models"]])

    def test_scheduler(self):
        spec = self.dep["spec"]
        self.assertTrue(matches(spec["selector"]["matchLabels"],
                                spec["template"]["metadata"]["labels"]))
        c = container(spec["template"]["spec"], "scheduler")
        self.assertEqual(c["command"], ["folio-scheduler"])
        self.assertEqual(flag_value(c["args"], "--host"), "0.0.0.0")
        self.assertEqual(flag_value(c["args"], "--port"), "50051")
        self.assertEqual(flag_value(c["args"], "--metrics-port"), "9400")
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        self.assertEqual(ports, {"grpc": 50051, "http": 8000, "metrics": 9400})
        # Plaintext: the probes call the client port (health needs no API key).
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            self.assertEqual(c[probe]["grpc"], scheduler_probe(probe, int(flag_value(c["args"], "--port"))),
                             probe)
        for flag in ("--health-port", "--tls-cert", "--tls-key", "--tls-client-ca"):
            self.assertIsNone(flag_value(c["args"], flag), flag)
        self.assertEqual(c["envFrom"][0]["configMapRef"]["name"], self.cm["metadata"]["name"])
        env = {e["name"]: e for e in c["env"]}
        self.assertEqual(env["FOLIO_ADVERTISE_ADDRESS"]["value"], "$(POD_IP):50051")
        svc = next(s for s in of_kind(self.objs, "Service")
                   if s["spec"].get("clusterIP") != "None")
        self.assertTrue(matches(svc["spec"]["selector"], spec["template"]["metadata"]["labels"]))
        self.assertEqual({p["name"]: p["port"] for p in svc["spec"]["ports"]},
                         {"grpc": 50051, "http": 8000, "metrics": 9400})

    def test_engine_configmap(self):
        d = self.cm["data"]
        self.assertEqual(d["FOLIO_TENSOR_PARALLEL_SIZE"], "1")
        self.assertEqual(d["FOLIO_MODEL"], "/models")
        # No name: folio-scheduler calls it "models" (NOTES.txt says so).
        self.assertNotIn("FOLIO_MODEL_NAME", d)
        self.assertEqual(d["FOLIO_GENERATION_CONFIG"], "auto")
        self.assertEqual(
            d["FOLIO_WORKERS"],
            f"{RELEASE}-folio-worker-0.{RELEASE}-folio-worker-headless.{NAMESPACE}.svc:50061")
        for k, v in d.items():
            self.assertRegex(k, r"^FOLIO_[A-Z0-9_]+$")
            self.assertIsInstance(v, str)
        # Worker failures and shutdown.
        self.assertEqual(d["FOLIO_ON_WORKER_FAILURE"], "requeue")
        self.assertEqual(d["FOLIO_MAX_REQUEUES"], "2")
        self.assertEqual(d["FOLIO_STEP_TIMEOUT_MIN_S"], "10")
        self.assertEqual(d["FOLIO_DRAIN_TIMEOUT_S"], "30")

    def test_termination_grace_period_covers_the_drain(self):
        self.assertEqual(self.dep["spec"]["template"]["spec"]["terminationGracePeriodSeconds"], 45)
        objs = render("--set-json", "engine.drainTimeoutS=100.5")
        dep = one(objs, "Deployment", "scheduler")
        self.assertEqual(dep["spec"]["template"]["spec"]["terminationGracePeriodSeconds"], 116)
        d = objs[("ConfigMap", f"{RELEASE}-folio-engine")]["data"]
        self.assertEqual(d["FOLIO_DRAIN_TIMEOUT_S"], "100.5")

    def test_weight_storage_flags(self):
        self.assertNotIn("FOLIO_DTYPE", self.cm["data"])
        self.assertNotIn("FOLIO_QUANTIZATION", self.cm["data"])
        objs = render("--set", "engine.dtype=bfloat16", "--set", "engine.quantization=int8")
        d = objs[("ConfigMap", f"{RELEASE}-folio-engine")]["data"]
        self.assertEqual(d["FOLIO_DTYPE"], "bfloat16")
        self.assertEqual(d["FOLIO_QUANTIZATION"], "int8")

    def test_network_policy_selects_workers(self):
        np = one(self.objs, "NetworkPolicy", "worker")
        worker_labels = self.sts["spec"]["template"]["metadata"]["labels"]
        sched_labels = self.dep["spec"]["template"]["metadata"]["labels"]
        self.assertTrue(matches(np["spec"]["podSelector"]["matchLabels"], worker_labels))
        self.assertFalse(matches(np["spec"]["podSelector"]["matchLabels"], sched_labels))
        rules = np["spec"]["ingress"]
        grpc_rules = [r for r in rules if {"port": 50061, "protocol": "TCP"} in r.get("ports", [])]
        self.assertEqual(len(grpc_rules), 1)
        peers = grpc_rules[0]["from"]
        self.assertEqual(len(peers), 1)
        self.assertTrue(matches(peers[0]["podSelector"]["matchLabels"], sched_labels))
        self.assertFalse(matches(peers[0]["podSelector"]["matchLabels"], worker_labels))
        # Ranks reach each other (collectives), and metrics are open by default.
        self.assertTrue(any(
            "ports" not in r and any(matches(p.get("podSelector", {}).get("matchLabels", {"x": "y"}),
                                             worker_labels) for p in r["from"])
            for r in rules))
        metrics = [r for r in rules if {"port": 9401, "protocol": "TCP"} in r.get("ports", [])]
        self.assertEqual(len(metrics), 1)
        self.assertNotIn("from", metrics[0])

    def test_pdbs_select_pods(self):
        pdbs = of_kind(self.objs, "PodDisruptionBudget")
        self.assertEqual(len(pdbs), 2)
        labels = [self.sts["spec"]["template"]["metadata"]["labels"],
                  self.dep["spec"]["template"]["metadata"]["labels"]]
        for pdb, l in zip(sorted(pdbs, key=lambda p: p["metadata"]["name"], reverse=True), labels):
            self.assertTrue(matches(pdb["spec"]["selector"]["matchLabels"], l))

    def test_dashboard_configmap(self):
        cm = self.objs[("ConfigMap", f"{RELEASE}-folio-dashboard")]
        self.assertEqual(cm["metadata"]["labels"]["grafana_dashboard"], "1")
        dash = json.loads(cm["data"]["folio-dashboard.json"])
        self.assertIn("panels", dash)
        # The chart's copy is deploy/grafana's dashboard, byte for byte.
        upstream = os.path.join(SOURCE_DIR, "deploy", "grafana", "folio-dashboard.json")
        if os.path.exists(upstream):
            with open(upstream) as a, open(os.path.join(CHART, "dashboards",
                                                        "folio-dashboard.json")) as b:
                self.assertEqual(a.read(), b.read(),
                                 "copy deploy/grafana/folio-dashboard.json to "
                                 "helm/folio/dashboards/")

    def test_helm_test_pod(self):
        pod = one(self.objs, "Pod", "test")
        self.assertEqual(pod["metadata"]["annotations"]["helm.sh/hook"], "test")
        c = pod["spec"]["containers"][0]
        self.assertEqual(c["command"], ["folio"])
        self.assertEqual(c["args"][0], "generate")
        self.assertEqual(flag_value(c["args"], "--address"),
                         f"{RELEASE}-folio-scheduler.{NAMESPACE}.svc:50051")
        self.assertEqual(flag_value(c["args"], "--max-tokens"), "8")
        self.assertEqual(c["args"][-1], "hello")

    def test_flags_exist_in_binaries(self):
        """Every flag the chart passes is one the built binaries document."""
        checks = [("folio-scheduler", container(self.dep["spec"]["template"]["spec"],
                                                "scheduler")["args"]),
                  ("folio-worker", container(self.sts["spec"]["template"]["spec"],
                                             "worker")["args"] + ["--rank"]),
                  ("folio", None)]
        for binary, args in checks:
            path = os.path.join(BIN_DIR, binary)
            if not BIN_DIR or not os.path.exists(path):
                self.skipTest(f"{binary} not built")
            if args is None:
                pod = one(self.objs, "Pod", "test")
                args = pod["spec"]["containers"][0]["args"]
                help_text = subprocess.run([path, "generate", "--help"], capture_output=True,
                                           text=True).stdout
            else:
                help_text = subprocess.run([path, "--help"], capture_output=True,
                                           text=True).stdout
            for a in args:
                if a.startswith("--"):
                    self.assertIn(a.split("=")[0], help_text, binary)
        # And every FOLIO_* key of the engine ConfigMap is one folio-scheduler reads.
        path = os.path.join(BIN_DIR, "folio-scheduler")
        help_text = subprocess.run([path, "--help"], capture_output=True, text=True).stdout
        for key in self.cm["data"]:
            self.assertIn(f"[{key}]", help_text)


class GpuTp4(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.objs = render(*GPU_TP4)
        cls.sts = one(cls.objs, "StatefulSet", "worker")

    def test_replicas_and_workers(self):
        self.assertEqual(self.sts["spec"]["replicas"], 4)
        cm = self.objs[("ConfigMap", f"{RELEASE}-folio-engine")]
        self.assertEqual(cm["data"]["FOLIO_TENSOR_PARALLEL_SIZE"], "4")
        self.assertEqual(cm["data"]["FOLIO_DEVICE"], "cuda")
        # The KV cache comes from each worker's memory profile.
        self.assertEqual(cm["data"]["FOLIO_KV_CACHE_MB"], "-1")
        self.assertEqual(cm["data"]["FOLIO_GPU_MEMORY_UTILIZATION"], "0.9")
        workers = cm["data"]["FOLIO_WORKERS"].split(",")
        self.assertEqual(workers, [
            f"{RELEASE}-folio-worker-{r}.{RELEASE}-folio-worker-headless.{NAMESPACE}.svc:50061"
            for r in range(4)])

    def test_gpu_resource(self):
        c = container(self.sts["spec"]["template"]["spec"], "worker")
        self.assertEqual(c["resources"]["limits"]["nvidia.com/gpu"], 1)
        self.assertEqual(c["resources"]["requests"]["nvidia.com/gpu"], 1)
        self.assertEqual(c["resources"]["limits"]["memory"], "16Gi")  # defaults kept

    def test_hostpath_model(self):
        pod = self.sts["spec"]["template"]["spec"]
        vol = next(v for v in pod["volumes"] if v["name"] == "model")
        self.assertEqual(vol["hostPath"]["path"], "/var/lib/folio/models")
        self.assertNotIn("PersistentVolumeClaim", {k for k, _ in self.objs})
        cm = self.objs[("ConfigMap", f"{RELEASE}-folio-engine")]
        self.assertEqual(cm["data"]["FOLIO_MODEL"], "/models/llama-3-8b")
        self.assertEqual(cm["data"]["FOLIO_MODEL_NAME"], "llama-3-8b")

    def test_service_monitor(self):
        sm = one(self.objs, "ServiceMonitor")
        self.assertEqual(sm["apiVersion"], "monitoring.coreos.com/v1")
        self.assertEqual(sm["spec"]["endpoints"][0]["port"], "metrics")
        services = [s for s in of_kind(self.objs, "Service")
                    if matches(sm["spec"]["selector"]["matchLabels"], s["metadata"]["labels"])]
        self.assertEqual(len(services), 2)  # the scheduler's and the headless workers'
        for s in services:
            self.assertIn("metrics", [p["name"] for p in s["spec"]["ports"]])
        # The Operator sets job from the Service label named by jobLabel (else the
        # Service's name, which depends on the release): it must be the job the
        # rules' FolioSchedulerDown / FolioWorkerDown select.
        job_label = sm["spec"]["jobLabel"]
        jobs = {s["metadata"]["labels"]["app.kubernetes.io/component"]:
                s["metadata"]["labels"][job_label] for s in services}
        self.assertEqual(jobs, {"scheduler": "folio-scheduler", "worker": "folio-worker"})
        self.assertEqual(set(jobs.values()), rules_jobs())
        self.assertNotIn("relabelings", sm["spec"]["endpoints"][0])

    def test_prometheus_rule(self):
        rule = one(self.objs, "PrometheusRule")
        self.assertEqual(rule["apiVersion"], "monitoring.coreos.com/v1")
        # The chart's copy is deploy/prometheus/folio-rules.yml, byte for byte.
        upstream = os.path.join(SOURCE_DIR, "deploy", "prometheus", "folio-rules.yml")
        with open(upstream) as a, open(os.path.join(CHART, "rules", "folio-rules.yml")) as b:
            text = a.read()
            self.assertEqual(text, b.read(),
                             "copy deploy/prometheus/folio-rules.yml to helm/folio/rules/")
        self.assertEqual(rule["spec"], yaml.safe_load(text))
        alerts = [r["alert"] for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r]
        self.assertIn("FolioWorkerDown", alerts)
        objs = render(*GPU_TP4, "--set", "serviceMonitor.rules=false")
        self.assertNotIn("PrometheusRule", {k for k, _ in objs})

    def test_monitoring_labels(self):
        objs = render(*GPU_TP4, "--set", "serviceMonitor.labels.release=kps")
        for kind in ("ServiceMonitor", "PrometheusRule"):
            self.assertEqual(one(objs, kind)["metadata"]["labels"]["release"], "kps", kind)


class Variants(unittest.TestCase):
    def test_mig_resource_name(self):
        objs = render("--set", "worker.gpu.resourceName=nvidia.com/mig-1g.10gb",
                      "--set", "worker.gpu.count=1", "--set", "tensorParallelSize=2")
        c = container(one(objs, "StatefulSet", "worker")["spec"]["template"]["spec"], "worker")
        self.assertEqual(c["resources"]["limits"]["nvidia.com/mig-1g.10gb"], 1)

    def test_empty_resource_name_is_cpu_only(self):
        objs = render("--set", "worker.gpu.resourceName=", "--set", "worker.gpu.count=1")
        c = container(one(objs, "StatefulSet", "worker")["spec"]["template"]["spec"], "worker")
        self.assertNotIn("nvidia.com/gpu", c["resources"].get("limits", {}))

    def test_image_model_init_container(self):
        objs = render("--set", "model.source=image",
                      "--set", "model.image.repository=registry.example/models/tiny")
        for obj in (one(objs, "StatefulSet", "worker"), one(objs, "Deployment", "scheduler")):
            pod = obj["spec"]["template"]["spec"]
            init = pod["initContainers"][0]
            self.assertEqual(init["image"], "registry.example/models/tiny:latest")
            vol = next(v for v in pod["volumes"] if v["name"] == "model")
            self.assertIn("emptyDir", vol)

    def test_secret(self):
        objs = render("--set", "secret.create=true", "--set", "secret.apiKey=abc")
        s = one(objs, "Secret")
        self.assertIn("api-key", s["data"])
        # The API key reaches the scheduler and the helm test pod as FOLIO_API_KEY; no TLS.
        c = container(one(objs, "Deployment", "scheduler")["spec"]["template"]["spec"],
                      "scheduler")
        pod = one(objs, "Pod", "test")["spec"]["containers"][0]
        for env in (c["env"], pod["env"]):
            ref = {e["name"]: e for e in env}["FOLIO_API_KEY"]["valueFrom"]["secretKeyRef"]
            self.assertEqual((ref["name"], ref["key"]), (s["metadata"]["name"], "api-key"))
        self.assertIsNone(flag_value(c["args"], "--tls-cert"))
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            self.assertEqual(c[probe]["grpc"], scheduler_probe(probe, 50051), probe)
        self.assertIsNone(flag_value(pod["args"], "--tls-ca"))

    def test_tls_needs_its_files_and_distinct_ports(self):
        for args, message in [
            (["--set", "secret.tls.enabled=true"], "secret.tls.enabled needs"),
            (["--set", "secret.tls.clientAuth=true", "--set", "secret.create=true"],
             "secret.tls.clientAuth needs TLS"),
            (["--set", "secret.create=true", "--set", "secret.tls.enabled=true",
              "--set", "secret.tls.crt=x"], "needs secret.tls.crt and secret.tls.key"),
            (["--set", "secret.existingSecret=s", "--set", "secret.tls.enabled=true",
              "--set", "scheduler.healthPort=50051"], "must differ"),
        ]:
            with self.subTest(args=args):
                proc = helm_template(*args, check=False)
                self.assertNotEqual(proc.returncode, 0)
                self.assertIn(message, proc.stderr)

    def test_metrics_from(self):
        objs = render("--set-json",
                      'networkPolicy.metricsFrom=[{"namespaceSelector":{"matchLabels":'
                      '{"kubernetes.io/metadata.name":"monitoring"}}}]')
        rules = one(objs, "NetworkPolicy", "worker")["spec"]["ingress"]
        metrics = [r for r in rules if {"port": 9401, "protocol": "TCP"} in r.get("ports", [])]
        self.assertEqual(metrics[0]["from"][0]["namespaceSelector"]["matchLabels"],
                         {"kubernetes.io/metadata.name": "monitoring"})

    def test_model_name(self):
        for args, name in [(["--set", "model.subPath=org/llama-3-8b/"], "llama-3-8b"),
                           (["--set", "model.subPath=x", "--set", "model.name=mine"], "mine"),
                           (["--set", "model.name=mine"], "mine")]:
            with self.subTest(args=args):
                cm = render(*args)[("ConfigMap", f"{RELEASE}-folio-engine")]
                self.assertEqual(cm["data"]["FOLIO_MODEL_NAME"], name)

    def test_optional_parts_off(self):
        objs = render("--set", "networkPolicy.enabled=false",
                      "--set", "podDisruptionBudget.enabled=false",
                      "--set", "dashboard.enabled=false", "--set", "tests.enabled=false")
        kinds = {k for k, _ in objs}
        for k in ("NetworkPolicy", "PodDisruptionBudget", "Pod"):
            self.assertNotIn(k, kinds)
        self.assertNotIn(("ConfigMap", f"{RELEASE}-folio-dashboard"), objs)


TLS_DIR = "/etc/folio/tls"


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


def scheduler_np(objs):
    return one(objs, "NetworkPolicy", "scheduler")


def np_ports(rule):
    return {p["port"] for p in rule.get("ports", [])}


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


def leaves(tree):
    """Every scalar of a rendered object tree (dict keys excluded)."""
    if isinstance(tree, dict):
        return [v for x in tree.values() for v in leaves(x)]
    if isinstance(tree, list):
        return [v for x in tree for v in leaves(x)]
    return [tree]


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


EPP_METRICS = {  # what the EPP reads -> folio's gauge, as the README gives them
    "--total-queued-requests-metric": "folio_requests_waiting",
    "--total-running-requests-metric": "folio_requests_running",
    "--kv-cache-usage-percentage-metric": "folio_kv_cache_usage_ratio{pool=device}",
}


class InferencePool(unittest.TestCase):
    """inferencePool.enabled: a Gateway API Inference Extension InferencePool of the
    scheduler pod at the http port (off by default)."""

    @classmethod
    def setUpClass(cls):
        cls.objs = render("--set", "inferencePool.enabled=true")
        cls.pool = one(cls.objs, "InferencePool")
        cls.sched_labels = one(cls.objs, "Deployment", "scheduler")["spec"]["template"]["metadata"]["labels"]
        cls.worker_labels = one(cls.objs, "StatefulSet", "worker")["spec"]["template"]["metadata"]["labels"]

    def test_off_by_default(self):
        self.assertNotIn("InferencePool", {k for k, _ in render()})

    def test_v1(self):
        pool = self.pool
        self.assertEqual(pool["apiVersion"], "inference.networking.k8s.io/v1")
        self.assertEqual(pool["metadata"]["name"], f"{RELEASE}-folio")
        spec = pool["spec"]
        self.assertEqual(set(spec), {"selector", "targetPorts", "endpointPickerRef"})
        self.assertEqual(set(spec["selector"]), {"matchLabels"})
        # The scheduler pod (it serves the HTTP API), never the workers.
        self.assertTrue(matches(spec["selector"]["matchLabels"], self.sched_labels))
        self.assertFalse(matches(spec["selector"]["matchLabels"], self.worker_labels))
        self.assertEqual(spec["targetPorts"], [{"number": 8000}])
        c = container(one(self.objs, "Deployment", "scheduler")["spec"]["template"]["spec"],
                      "scheduler")
        self.assertEqual(spec["targetPorts"][0]["number"], int(flag_value(c["args"], "--http-port")))
        self.assertEqual(spec["endpointPickerRef"],
                         {"kind": "Service", "name": f"{RELEASE}-folio-epp",
                          "port": {"number": 9002}, "failureMode": "FailClose"})

    def test_v1alpha2(self):
        objs = render("--set", "inferencePool.enabled=true",
                      "--set", "inferencePool.apiVersion=inference.networking.x-k8s.io/v1alpha2",
                      "--set", "scheduler.httpPort=8080",
                      "--set", "inferencePool.endpointPicker.serviceName=my-epp",
                      "--set", "inferencePool.endpointPicker.port=9102",
                      "--set", "inferencePool.endpointPicker.failureMode=FailOpen")
        pool = one(objs, "InferencePool")
        self.assertEqual(pool["apiVersion"], "inference.networking.x-k8s.io/v1alpha2")
        spec = pool["spec"]
        self.assertEqual(set(spec), {"selector", "targetPortNumber", "extensionRef"})
        self.assertTrue(matches(spec["selector"], self.sched_labels))
        self.assertFalse(matches(spec["selector"], self.worker_labels))
        self.assertEqual(spec["targetPortNumber"], 8080)
        self.assertEqual(spec["extensionRef"],
                         {"name": "my-epp", "portNumber": 9102, "failureMode": "FailOpen"})

    def test_match_labels_and_port(self):
        objs = render("--set", "inferencePool.enabled=true", "--set", "scheduler.httpPort=8080",
                      "--set-json", 'inferencePool.matchLabels={"app.kubernetes.io/name":"folio",'
                                    '"app.kubernetes.io/component":"scheduler"}')
        spec = one(objs, "InferencePool")["spec"]
        self.assertEqual(spec["selector"]["matchLabels"],
                         {"app.kubernetes.io/name": "folio", "app.kubernetes.io/component": "scheduler"})
        self.assertTrue(matches(spec["selector"]["matchLabels"], self.sched_labels))
        self.assertEqual(spec["targetPorts"], [{"number": 8080}])

    def test_needs_the_http_api(self):
        proc = helm_template("--set", "inferencePool.enabled=true", "--set", "scheduler.httpPort=0",
                             check=False)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("inferencePool.enabled needs the HTTP API", proc.stderr)

    def test_readme_metric_specs(self):
        """The README's EPP flags name folio's gauges in the EPP's spec syntax (label values
        unquoted: stringToMetricSpec keeps quotes), and folio registers those gauges."""
        with open(os.path.join(CHART, "README.md")) as f:
            readme = f.read()
        section = readme[readme.index("## Gateway API Inference Extension"):]
        with open(os.path.join(SOURCE_DIR, "scheduler", "server", "scheduler_metrics.cc")) as f:
            registered = set(re.findall(r'"(folio_[a-z_]+)"', f.read()))
        for flag, spec in EPP_METRICS.items():
            self.assertIn(f"{flag}={spec}", section)
            name, _, labels = spec.partition("{")
            self.assertIn(name, registered)
            for pair in filter(None, labels.rstrip("}").split(",")):
                self.assertNotIn('"', pair)
        for key, spec in (("queuedRequestsSpec", EPP_METRICS["--total-queued-requests-metric"]),
                          ("runningRequestsSpec", EPP_METRICS["--total-running-requests-metric"]),
                          ("kvUsageSpec", EPP_METRICS["--kv-cache-usage-percentage-metric"])):
            self.assertIn(f"{key}: {spec}", section)
        # The README's pool is what the chart renders for `helm install folio -n folio`.
        doc = yaml.safe_load(re.search(r"```yaml\n(apiVersion: inference\.networking\.k8s\.io/v1\n.*?)```",
                                       section, re.S).group(1))
        cmd = [HELM, "template", "folio", CHART, "--namespace", "folio",
               "--set", "inferencePool.enabled=true", "-s", "templates/inferencepool.yaml"]
        rendered = yaml.safe_load(subprocess.run(cmd, capture_output=True, text=True,
                                                 check=True).stdout)
        self.assertEqual(doc["spec"], rendered["spec"])
        self.assertEqual(doc["metadata"]["name"], rendered["metadata"]["name"])


class SchemaRejects(unittest.TestCase):
    BAD = [
        ["--set", "tensorParallelSize=0"],
        ["--set", "tensorParallelSize=two"],
        ["--set", "engine.device=tpu"],
        ["--set", "engine.dtype=float16"],  # no worker computes in float16
        ["--set", "engine.device=cuda", "--set", "engine.dtype=float16"],
        ["--set", "engine.quantization=fp8"],
        ["--set", "engine.device=cuda", "--set", "engine.quantization=int8"],  # cpu only
        ["--set", "engine.blockSize=12"],
        ["--set", "engine.kvCacheMb=-2"],
        ["--set", "engine.gpuMemoryUtilization=0"],
        ["--set", "engine.gpuMemoryUtilization=1.5"],
        ["--set", "engine.preemptionMode=sometimes"],
        ["--set", "engine.onWorkerFailure=restart"],
        ["--set", "engine.maxRequeues=-1"],
        ["--set", "engine.drainTimeoutS=-5"],
        ["--set", "model.source=s3"],
        ["--set", "model.source=image"],  # without model.image.repository
        ["--set", "worker.gpu.count=-1"],
        ["--set", "worker.port=70000"],
        ["--set", "scheduler.replicas=2"],
        ["--set", "engine.extraEnv.NOT_FOLIO=1"],
        ["--set", "scheduler.healthPort=0"],
        ["--set", "scheduler.rendezvousPort=70000"],
        ["--set", "secret.tls.enabled=yes"],
        ["--set", "scheduler.httpPort=-1"],
        ["--set", "scheduler.httpPort=65536"],
        ["--set", "scheduler.httpPort=http"],
        ["--set", "inferencePool.apiVersion=inference.networking.k8s.io/v2"],
        ["--set", "inferencePool.endpointPicker.failureMode=Sometimes"],
        ["--set", "inferencePool.endpointPicker.port=0"],
    ]

    def test_bad_values_fail(self):
        for args in self.BAD:
            with self.subTest(args=args):
                proc = helm_template(*args, check=False)
                self.assertNotEqual(proc.returncode, 0, proc.stdout[:200])
                self.assertTrue(re.search(r"schema|values don't meet|must", proc.stderr),
                                proc.stderr)


if __name__ == "__main__":
    unittest.main()
