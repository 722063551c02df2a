"""inferencePool.*: the Gateway API Inference Extension InferencePool of the scheduler
pod at the http port (off by default; v1 and v1alpha2; needs the HTTP API), and the
chart README's endpoint picker metric flags and pool, checked against the gauges folio
registers and the pool the chart renders.
"""
import os
import re
import subprocess
import unittest

import yaml

from chart_util import (CHART, HELM, RELEASE, SOURCE_DIR, container, flag_value,
                        helm_template, matches, one, render)

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


if __name__ == "__main__":
    unittest.main()
