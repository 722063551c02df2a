"""Shared helpers of the Helm chart tests (tests/helm/chart*_test.py): `helm template`
of helm/folio into objects keyed by (kind, name), look-ups in those objects, NOTES.txt
rendered, and the environment the tests run with.

ctest (tests/helm/CMakeLists.txt) runs every tests/helm/chart*_test.py with FOLIO_HELM
(a Helm 3 binary), FOLIO_CHART (the chart), FOLIO_SOURCE_DIR (the source tree) and,
when built, FOLIO_BIN_DIR (folio-scheduler, folio-worker and folio, whose --help the
rendered flags are checked against).
"""
import os
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

# Where the chart mounts its Secret (the TLS files) in the scheduler and the helm test pod.
TLS_DIR = "/etc/folio/tls"


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


def only_own_tests(module_name):
    """A load_tests (unittest's load_tests protocol) for a module that imports a TestCase
    of another module for its class attributes (Tls.VALUES): without it unittest would run
    the imported class's tests in the importing module too. Keeps the tests of the
    classes defined in module_name, in the loader's order."""
    def load_tests(loader, tests, pattern):
        return unittest.TestSuite(
            suite for suite in tests
            if all(type(test).__module__ == module_name for test in suite))
    return load_tests
