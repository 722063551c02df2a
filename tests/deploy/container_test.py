"""The CPU image (deploy/docker/Dockerfile.cpu) built for real with podman and run as
the Helm chart runs it: a worker container and a scheduler container with the
chart's commands, arguments and environment, the demo model copied out of the image
by the chart's init container, the scheduler finding the worker by the address the
chart gives it. Checked from outside the containers: grpc.health.v1 SERVING, `folio
generate` streaming the greedy text `folio run` writes, the metrics endpoints, a
non-root user, and SIGTERM stopping both with exit 0 (the scheduler's exit status is
non-zero when a KV block leaked).

The image packages the binaries of this build tree (a build context in place of the
binaries stage; the same runtime stage as `make image`). Exits 77 (ctest: skipped), saying why, where
podman cannot run containers.

Run: /usr/bin/python3 tests/deploy/container_test.py  (FOLIO_BUILD_DIR, FOLIO_HELM)
"""
import unittest

import container_util as cu
from chart_pods import pod_of

PROMPT = "In the beginning"


class ImageTest(unittest.TestCase):
    def test_image_builds_small_and_runs_as_non_root(self):
        built = cu.build_image()
        packages = built["runtime_packages"]
        print(f"\nimage {cu.IMAGE}: built in {built['build_seconds']:.0f} s, "
              f"{built['size_bytes'] / 1e6:.0f} MB; runtime packages ({len(packages)}): "
              f"{' '.join(packages)}", flush=True)
        config = cu.podman("image", "inspect", "--format",
                           "{{.Config.User}} {{json .Config.Entrypoint}}", cu.IMAGE).stdout
        self.assertIn("folio", config.split()[0])
        self.assertIn("/opt/folio/bin/entrypoint.sh", config)
        # Every package the list names is installed, and the binaries find every library.
        script = ("dpkg-query -W -f='${Package} ${Installed-Size}\\n' " + " ".join(packages) +
                  " && for b in folio-scheduler folio-worker folio; do"
                  " ldd /opt/folio/bin/$b | grep 'not found' && exit 1; done; id -u")
        ran = cu.podman("run", "--rm", "--network", "host",
                        "--entrypoint", "sh", cu.IMAGE, "-c", script, check=False)
        self.assertEqual(ran.returncode, 0, f"missing packages or libraries:\n{ran.stdout}{ran.stderr}")
        self.assertNotEqual(ran.stdout.split()[-1], "0", "the image runs as root")
        # Against the base image: what the runtime stage added, largest first.
        base = cu.podman("run", "--rm", "docker.io/library/debian:bookworm-slim",
                         "dpkg-query", "-W", "-f=${Package}\\n").stdout.split()
        added = cu.podman("run", "--rm", "--entrypoint", "dpkg-query", cu.IMAGE,
                          "-W", "-f=${Installed-Size} ${Package}\\n").stdout.split("\n")
        added = sorted((line.split() for line in added if line and line.split()[1] not in base),
                       key=lambda p: -int(p[0]))
        print(f"added to the base image: {len(added)} packages, "
              f"{sum(int(kb) for kb, _ in added) / 1024:.0f} MiB; largest: " +
              ", ".join(f"{name} {int(kb) / 1024:.1f}" for kb, name in added[:12]), flush=True)
        self.assertTrue(added)


    def test_entrypoint_runs_the_model_of_the_image(self):
        """The image as `docker run IMAGE folio run ...` uses it: the entrypoint picks the
        binary, the model is the image's own."""
        cu.build_image()
        options = ["--temperature", "0", "--max-tokens", "12", "--ignore-eos"]
        inside = cu.podman("run", "--rm", "--network", "host", cu.IMAGE, "folio", "run",
                           "--model", "/opt/folio/models/folio-demo", "--prompt", PROMPT, *options)
        outside = cu.folio("run", "--model", cu.DEMO, "--prompt", PROMPT, *options)
        self.assertEqual(outside.returncode, 0, outside.stderr)
        self.assertEqual(inside.stdout.strip(), outside.stdout.strip())
        usage = cu.podman("run", "--rm", cu.IMAGE, "", check=False)
        self.assertEqual(usage.returncode, 2, usage.stderr)
        self.assertIn("usage", usage.stderr)


class ChartContainersTest(cu.ChartTestCase):
    """The chart's worker StatefulSet pod (rank 0) and scheduler Deployment pod."""

    def setUp(self):
        super().setUp()
        self.config_maps = {o["metadata"]["name"]: o for o in cu.of_kind(self.objects, "ConfigMap")}
        self.started = []
        self.addCleanup(self._remove_containers)

    def _remove_containers(self):
        for name in self.started:
            cu.podman("rm", "-f", "-t", "0", name, check=False)

    def _logs(self):
        return "\n".join(f"--- {n}:\n" + cu.podman("logs", n, check=False).stderr[-3000:]
                         for n in self.started)

    def _start(self, pod, container, hosts=()):
        pod.run_init_containers()
        self.started.append(pod.start(container, hosts))
        return self.started[-1]

    def test_chart_pods_serve_the_demo_model_and_stop_cleanly(self):
        (statefulset,) = cu.of_kind(self.objects, "StatefulSet")
        (deployment,) = cu.of_kind(self.objects, "Deployment")
        worker_pod = pod_of(statefulset, self.config_maps, self.work_dir, ordinal=0)
        scheduler_pod = pod_of(deployment, self.config_maps, self.work_dir)
        worker = self._start(worker_pod, "worker")
        # The scheduler dials the chart's worker addresses (<pod>.<headless service>...).
        (workers,) = [c["data"]["FOLIO_WORKERS"] for c in self.config_maps.values()
                      if "FOLIO_WORKERS" in c["data"]]
        worker_hosts = [a.rsplit(":", 1)[0] for a in workers.split(",")]
        self.assertTrue(worker_hosts[0].startswith(worker_pod.name + "."), worker_hosts)
        scheduler = self._start(scheduler_pod, "scheduler", hosts=worker_hosts)

        address = f"127.0.0.1:{self.ports['grpc']}"
        try:
            cu.wait_until(lambda: cu.grpc_health(address) == 1, 180, "scheduler SERVING",
                          interval=0.2)
        except AssertionError:
            raise AssertionError("scheduler never SERVING:\n" + self._logs())
        self.assertEqual(cu.grpc_health(f"127.0.0.1:{self.ports['worker']}"), 1)
        self.assertEqual(cu.grpc_health(address, "liveness"), 1)

        options = ["--temperature", "0", "--max-tokens", "24", "--ignore-eos"]
        served = cu.folio("generate", "--address", address, "--wait-s", "60", *options, PROMPT)
        self.assertEqual(served.returncode, 0, served.stderr + self._logs())
        self.assertIn("finish: length", served.stderr)
        offline = cu.folio("run", "--model", cu.DEMO, "--prompt", PROMPT, *options)
        self.assertEqual(offline.returncode, 0, offline.stderr)
        self.assertEqual(served.stdout.strip(), offline.stdout.strip())
        self.assertGreater(len(served.stdout.split()), 5)

        status, body = cu.http_get(f"http://127.0.0.1:{self.ports['http']}/health")
        self.assertEqual(status, 200)
        status, body = cu.http_get(f"http://127.0.0.1:{self.ports['metrics']}/metrics")
        self.assertIn('folio_kv_cache_blocks_total{model="folio-demo",pool="device"}', body)
        self.assertIn("folio_generation_tokens_total", body)
        status, body = cu.http_get(f"http://127.0.0.1:{self.ports['worker_metrics']}/metrics")
        self.assertIn("folio_worker_step_seconds", body)
        for name in (scheduler, worker):
            uid = cu.podman("exec", name, "id", "-u").stdout.strip()
            self.assertNotEqual(uid, "0", f"{name} runs as root")

        # SIGTERM, as the kubelet stops a pod: the scheduler drains (nothing runs) and
        # exits 0 only with every KV block back; then the worker.
        for name, workload in ((scheduler, deployment), (worker, statefulset)):
            grace = workload["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30)
            cu.podman("stop", "-t", str(grace), name, timeout=grace + 60)
            code = cu.podman("inspect", "--format", "{{.State.ExitCode}}", name).stdout.strip()
            self.assertEqual(code, "0", f"{name} exit status {code}:\n{self._logs()}")
        self.assertNotIn("leaked", self._logs())


if __name__ == "__main__":
    cu.run_tests_or_skip(lambda: unittest.main(verbosity=2))
