"""Renders helm/folio with `helm template` and checks the objects it makes.

Run by ctest (tests/helm/CMakeLists.txt) with FOLIO_HELM (a Helm 3 binary),
FOLIO_CHART (the chart) and, when built, FOLIO_BIN_DIR (folio-scheduler and
folio-worker, whose --help the rendered flags are checked against).
"""
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import yaml

HELM = os.environ.get("FOLIO_HELM", "helm")
CHART = os.environ.get(
    "FOLIO_CHART", os.path.join(os.path.dirname(__file__), "..", "..", "helm", "folio"))
BIN_DIR = os.environ.get("FOLIO_BIN_DIR", "")
SOURCE_DIR = os.environ.get(
    "FOLIO_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
RELEASE = "rel"
NAMESPACE = "serving"


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
        self.assertEqual(ports, {"grpc": 50051, "metrics": 9400})
        # Plaintext: the probes call the client port (health needs no API key).
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            self.assertEqual(c[probe]["grpc"], {"port": int(flag_value(c["args"], "--port"))},
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
                         {"grpc": 50051, "metrics": 9400})

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

    def test_network_policy_selects_workers(self):
        np = one(self.objs, "NetworkPolicy")
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
            self.assertEqual(c[probe]["grpc"], {"port": 50051}, probe)
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
        rules = one(objs, "NetworkPolicy")["spec"]["ingress"]
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
            self.assertEqual(self.c[probe]["grpc"], {"port": health}, probe)
        ports = {p["name"]: p["containerPort"] for p in self.c["ports"]}
        self.assertEqual(ports, {"grpc": 50051, "metrics": 9400, "health": 50052,
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
            self.assertEqual(c[probe]["grpc"], {"port": 8081}, probe)
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


class SchemaRejects(unittest.TestCase):
    BAD = [
        ["--set", "tensorParallelSize=0"],
        ["--set", "tensorParallelSize=two"],
        ["--set", "engine.device=tpu"],
        ["--set", "engine.dtype=float16"],  # no worker computes in float16
        ["--set", "engine.device=cuda", "--set", "engine.dtype=float16"],
        ["--set", "engine.dtype=bfloat16"],  # the CPU workers compute in float32
        ["--set", "engine.blockSize=12"],
        ["--set", "engine.kvCacheMb=-2"],
        ["--set", "engine.gpuMemoryUtilization=0"],
        ["--set", "engine.gpuMemoryUtilization=1.5"],
        ["--set", "engine.preemptionMode=sometimes"],
        ["--set", "model.source=s3"],
        ["--set", "model.source=image"],  # without model.image.repository
        ["--set", "worker.gpu.count=-1"],
        ["--set", "worker.port=70000"],
        ["--set", "scheduler.replicas=2"],
        ["--set", "engine.extraEnv.NOT_FOLIO=1"],
        ["--set", "scheduler.healthPort=0"],
        ["--set", "scheduler.rendezvousPort=70000"],
        ["--set", "secret.tls.enabled=yes"],
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
