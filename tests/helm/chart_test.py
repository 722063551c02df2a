"""Renders helm/folio with `helm template` and checks the objects it makes for the
default values (DefaultValues), ci/gpu-tp4-values.yaml (GpuTp4) and other value sets
(Variants), and that the values schema rejects bad values (SchemaRejects).

The other tests/helm/chart*_test.py modules test TLS, NOTES.txt, the HTTP API, the
InferencePool and the helm test pod; chart_util.py holds the helpers they share and
says how ctest runs them.
"""
import json
import os
import re
import subprocess
import unittest

import yaml

from chart_util import (BIN_DIR, CHART, NAMESPACE, RELEASE, SOURCE_DIR, container,
                        flag_value, helm_template, matches, of_kind, one, render,
                        scheduler_probe)

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

    def test_host_prefix_cache(self):
        # No swap space: nothing said, so folio-scheduler's default (on where it can be) holds.
        self.assertNotIn("FOLIO_HOST_PREFIX_CACHE", self.cm["data"])
        self.assertEqual(self.cm["data"]["FOLIO_HOST_PREFIX_CACHE_STEP_MB"], "-1")
        cm = f"{RELEASE}-folio-engine"
        d = render("--set", "engine.swapSpaceMb=4096")[("ConfigMap", cm)]["data"]
        self.assertEqual(d["FOLIO_HOST_PREFIX_CACHE"], "true")
        d = render("--set", "engine.swapSpaceMb=4096", "--set",
                   "engine.hostPrefixCache=false")[("ConfigMap", cm)]["data"]
        self.assertEqual(d["FOLIO_HOST_PREFIX_CACHE"], "false")
        d = render("--set", "engine.swapSpaceMb=4096", "--set", "engine.enablePrefixCaching=false",
                   "--set", "engine.hostPrefixCacheStepMb=64")[("ConfigMap", cm)]["data"]
        self.assertNotIn("FOLIO_HOST_PREFIX_CACHE", d)
        self.assertEqual(d["FOLIO_HOST_PREFIX_CACHE_STEP_MB"], "64")

    def test_weight_storage_flags(self):
        self.assertNotIn("FOLIO_DTYPE", self.cm["data"])
        self.assertNotIn("FOLIO_QUANTIZATION", self.cm["data"])
        objs = render("--set", "engine.dtype=bfloat16", "--set", "engine.quantization=int8")
        d = objs[("ConfigMap", f"{RELEASE}-folio-engine")]["data"]
        self.assertEqual(d["FOLIO_DTYPE"], "bfloat16")
        self.assertEqual(d["FOLIO_QUANTIZATION"], "int8")

    def test_kv_cache_dtype(self):
        self.assertEqual(self.cm["data"]["FOLIO_KV_CACHE_DTYPE"], "auto")
        objs = render("--set", "engine.kvCacheDtype=int8")
        d = objs[("ConfigMap", f"{RELEASE}-folio-engine")]["data"]
        self.assertEqual(d["FOLIO_KV_CACHE_DTYPE"], "int8")

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
            # A mapping: a null emptyDir is a volume of no type, refused by the API server.
            self.assertEqual(vol["emptyDir"], {})
        objs = render("--set", "model.source=image", "--set", "model.image.sizeLimit=2Gi",
                      "--set", "model.image.repository=registry.example/models/tiny")
        for obj in (one(objs, "StatefulSet", "worker"), one(objs, "Deployment", "scheduler")):
            vol = next(v for v in obj["spec"]["template"]["spec"]["volumes"] if v["name"] == "model")
            self.assertEqual(vol["emptyDir"], {"sizeLimit": "2Gi"})

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


class SchemaRejects(unittest.TestCase):
    BAD = [
        ["--set", "tensorParallelSize=0"],
        ["--set", "tensorParallelSize=two"],
        ["--set", "engine.device=tpu"],
        ["--set", "engine.dtype=float16"],  # no worker computes in float16
        ["--set", "engine.device=cuda", "--set", "engine.dtype=float16"],
        ["--set", "engine.quantization=fp8"],
        ["--set", "engine.device=cuda", "--set", "engine.quantization=int8"],  # cpu only
        ["--set", "engine.kvCacheDtype=fp8_e5m2"],
        ["--set", "engine.device=cuda", "--set", "engine.kvCacheDtype=int8"],  # cpu only
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
