"""Shared helpers of the container tests (tests/deploy/container*_test.py): podman
(through deploy/docker/podman.sh, with the settings this kind of machine needs), the
CPU image built once per run from the binaries `make build` made
(deploy/docker/Dockerfile.cpu with --build-context binaries=build/image-stage), and the Helm chart rendered
for that image. Containers use the host's network (no CNI bridge is needed), each test
on free ports.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import yaml

SOURCE_DIR = os.path.abspath(os.environ.get(
    "FOLIO_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")))
BUILD_DIR = os.path.abspath(os.environ.get("FOLIO_BUILD_DIR", os.path.join(SOURCE_DIR, "build")))
BIN_DIR = os.path.join(BUILD_DIR, "bin")
# free_port and wait_until of the integration tests' harness.
sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "integration"))
from local_cluster import free_port, wait_until  # noqa: E402,F401
HELM = os.environ.get("FOLIO_HELM", os.path.join(BUILD_DIR, "helm", "bin", "helm"))
CHART = os.path.join(SOURCE_DIR, "helm", "folio")
DOCKER_DIR = os.path.join(SOURCE_DIR, "deploy", "docker")
DEMO = os.path.join(SOURCE_DIR, "models", "folio-demo")

IMAGE_REPO = "localhost/folio"
IMAGE_TAG = "container-test"
IMAGE = f"{IMAGE_REPO}:{IMAGE_TAG}"
PODMAN = os.path.join(DOCKER_DIR, "podman.sh")
# Every container and pod the tests make carries this label, so a run cleans up what
# an earlier, interrupted run left behind.
LABEL = "folio-container-test=1"


def podman(*args, check=True, timeout=900, input=None):
    proc = subprocess.run([PODMAN, *args], capture_output=True, text=True, timeout=timeout,
                          input=input)
    if check and proc.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} failed ({proc.returncode}):\n"
                             f"{proc.stderr[-4000:]}")
    return proc


def folio(*args):
    """The host's `folio` (the tree's build) with args, output captured."""
    return subprocess.run([os.path.join(BIN_DIR, "folio"), *args], capture_output=True,
                          text=True, timeout=300)


def why_containers_cannot_run():
    """None when podman can run a container here, else the reason (the tests skip)."""
    if shutil.which("podman") is None:
        return "podman is not installed (deploy/install-deps.sh installs it)"
    made = subprocess.run(["bash", os.path.join(DOCKER_DIR, "make-base-images.sh")],
                          capture_output=True, text=True, timeout=900)
    if made.returncode != 0:
        return "cannot make the Debian base image: " + made.stderr.strip()[-1500:]
    print(made.stdout.strip(), flush=True)
    ran = podman("run", "--rm", "--network", "host", "docker.io/library/debian:bookworm-slim",
                 "true", check=False, timeout=300)
    if ran.returncode != 0:
        return "podman cannot run a container on this machine: " + ran.stderr.strip()[-1500:]
    return None


def remove_leftovers():
    """Pods and containers an interrupted earlier run left."""
    for kind in ("pod", "container"):
        listed = podman(kind, "ps", "-a", "-q", "--filter", f"label={LABEL}", check=False)
        ids = listed.stdout.split()
        if ids:
            podman(kind, "rm", "-f", *ids, check=False)


_built = {}


def build_image():
    """Builds IMAGE from the binaries in BUILD_DIR (once per process); returns a dict of
    what the tests print: build seconds, image bytes, runtime packages."""
    if _built:
        return _built
    staged = subprocess.run(["bash", os.path.join(DOCKER_DIR, "stage-prebuilt.sh"), BUILD_DIR],
                            capture_output=True, text=True, timeout=300)
    if staged.returncode != 0:
        raise AssertionError("stage-prebuilt.sh failed:\n" + staged.stderr)
    start = time.monotonic()
    podman("build", "--pull=never", "--network=host",
           "-f", os.path.join(DOCKER_DIR, "Dockerfile.cpu"),
           "--ignorefile", os.path.join(DOCKER_DIR, "Dockerfile.cpu.dockerignore"),
           "--build-context", "binaries=" + os.path.join(SOURCE_DIR, "build", "image-stage"),
           "--label", LABEL,
           "-t", IMAGE, SOURCE_DIR, timeout=1800)
    _built["build_seconds"] = time.monotonic() - start
    # The versions this tag named before (dangling now).
    podman("image", "prune", "-f", "--filter", f"label={LABEL}", check=False)
    _built["size_bytes"] = int(podman("image", "inspect", "--format", "{{.Size}}", IMAGE).stdout)
    packages = os.path.join(BUILD_DIR, "image-stage", "opt", "folio", "runtime-packages.txt")
    with open(packages) as f:
        _built["runtime_packages"] = f.read().split()
    return _built


def render_chart(values):
    """helm template of the chart with `values` (a dict): the objects, by (kind, name)."""
    with open(os.path.join(BUILD_DIR, "container-test-values.yaml"), "w") as f:
        yaml.safe_dump(values, f)
        path = f.name
    proc = subprocess.run([HELM, "template", "folio", CHART, "--namespace", "default",
                           "-f", path], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise AssertionError("helm template failed:\n" + proc.stderr)
    return {(d["kind"], d["metadata"]["name"]): d
            for d in yaml.safe_load_all(proc.stdout) if d}


def chart_values(ports, **extra):
    """Values that run the chart on this image, the demo model copied out of the image
    by the chart's init container (model.source=image), on the given free ports."""
    values = {
        "image": {"repository": IMAGE_REPO, "tag": IMAGE_TAG, "pullPolicy": "Never"},
        "model": {"source": "image", "name": "folio-demo",
                  "image": {"repository": IMAGE_REPO, "tag": IMAGE_TAG, "pullPolicy": "Never",
                            "sourcePath": "/opt/folio/models/folio-demo"}},
        "scheduler": {"port": ports["grpc"], "httpPort": ports["http"],
                      "metricsPort": ports["metrics"]},
        "worker": {"port": ports["worker"], "metricsPort": ports["worker_metrics"],
                   # Two cores shared with the rest of the tests.
                   "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
        # Quick to stop: nothing runs when the tests send SIGTERM.
        "engine": {"drainTimeoutS": 5, "kvCacheMb": 64},
    }
    values.update(extra)
    return values


class ChartTestCase(unittest.TestCase):
    """A test of the chart on the image: the image built, a work directory, the chart
    rendered on free ports (self.ports, self.objects)."""

    def setUp(self):
        build_image()
        self.work_dir = tempfile.mkdtemp(prefix="folio-container-test-")
        self.addCleanup(shutil.rmtree, self.work_dir, True)
        self.ports = {k: free_port() for k in ("grpc", "http", "metrics", "worker", "worker_metrics")}
        self.objects = render_chart(chart_values(self.ports))


def of_kind(objects, kind):
    return [o for (k, _), o in objects.items() if k == kind]


def grpc_health(address, service=""):
    """grpc.health.v1.Health/Check's status (1 = SERVING, 2 = NOT_SERVING), None when
    nothing answers. The request and answer are tiny protobufs, written by hand."""
    import grpc  # python3-grpcio
    request = b"" if not service else b"\x0a" + bytes([len(service)]) + service.encode()
    with grpc.insecure_channel(address) as channel:
        check = channel.unary_unary("/grpc.health.v1.Health/Check")
        try:
            answer = check(request, timeout=5)
        except grpc.RpcError:
            return None
    return answer[1] if len(answer) >= 2 and answer[0] == 0x08 else 0


def http_get(url, timeout=5):
    import urllib.request
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode()


def run_tests_or_skip(module_main):
    """The tests' main: exit 77 (ctest's skip) with the reason when containers cannot
    run here, else unittest's own exit status."""
    reason = why_containers_cannot_run()
    if reason:
        print("SKIPPED:", reason, flush=True)
        raise SystemExit(77)
    remove_leftovers()
    module_main()

