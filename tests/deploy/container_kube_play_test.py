"""`helm template` output of the chart run by `podman kube play` on the CPU image: the
engine ConfigMap, the scheduler Deployment (its init container copies the demo model
out of the image) and the worker pod, then the chart's `helm test` pod, which POSTs
/v1/completions with curl. Checked from outside: grpc.health.v1 SERVING, `folio
generate` equal to `folio run`, the helm test pod's exit 0, and a pod stop (SIGTERM)
ending both folio containers with exit 0.

What podman 4.3 cannot play, and how the test stands in for it (the manifest tests in
tests/helm cover these objects):
- StatefulSet: kube play refuses the kind. The test plays the pod the StatefulSet
  controller would make for ordinal 0 (name and hostname <statefulset>-0), from the
  StatefulSet's own template.
- Services: there is no cluster DNS or service proxy. Every pod shares the host's
  network on free ports (hostNetwork, the containerPorts left out: podman 4.3 refuses
  to map ports on the host's network), and the names the chart resolves (the workers'
  headless Service addresses, the scheduler's Service) are 127.0.0.1 in a hosts file
  mounted at /etc/hosts (podman ignores hostAliases on the host's network);
  status.podIP, which kube play cannot resolve, is 127.0.0.1 too.
- restartPolicy OnFailure instead of a Deployment's Always: podman 4.3 restarts init
  containers under Always (the model copy would loop).
- ServiceAccount, NetworkPolicy, PodDisruptionBudget: API objects with nothing to run.
- Secret (rendered only under secret.create): podman 4.3 creates it, but a container's
  secretKeyRef resolves to an empty value, so the API-key variant is not played.
The gRPC probes are the kubelet's; podman plays them not, so the test polls the same
health service itself.

Exits 77 (ctest: skipped), saying why, where podman cannot run containers.
"""
import copy
import json
import os
import unittest

import yaml

import container_util as cu

PROMPT = "In the beginning"
PLAYED_KINDS = ("ConfigMap", "Deployment", "Pod")
NOT_PLAYED = ("Service", "ServiceAccount", "NetworkPolicy", "PodDisruptionBudget")


def statefulset_pod(statefulset, ordinal):
    """The Pod the StatefulSet controller makes for `ordinal`."""
    name = f"{statefulset['metadata']['name']}-{ordinal}"
    template = copy.deepcopy(statefulset["spec"]["template"])
    spec = template["spec"]
    spec["hostname"] = name
    spec["subdomain"] = statefulset["spec"]["serviceName"]
    labels = dict(template["metadata"].get("labels", {}))
    labels["statefulset.kubernetes.io/pod-name"] = name
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels,
                         "annotations": template["metadata"].get("annotations", {})},
            "spec": spec}


def labelled(metadata):
    """The test's label on a pod, for remove_leftovers after an interrupted run."""
    key, value = cu.LABEL.split("=")
    metadata.setdefault("labels", {})[key] = value


def on_host_network(pod_spec, hosts_file=None):
    """Cluster networking stand-in: the pod shares the host's network (where every test
    port is free), and a hosts file (hostAliases are ignored on the host's network)
    answers for the cluster's DNS."""
    pod_spec["hostNetwork"] = True
    # podman 4.3 applies the pod's restart policy to its init containers too: under
    # Always (a Deployment's) the model copy restarts as soon as it exits, and kube play
    # then fails removing it ("cannot remove container ... as it is running").
    pod_spec["restartPolicy"] = "OnFailure"
    if hosts_file:
        pod_spec.setdefault("volumes", []).append(
            {"name": "cluster-dns", "hostPath": {"path": hosts_file, "type": "File"}})
    for container in pod_spec["containers"]:
        # On the host's network a containerPort only documents the port; podman 4.3
        # maps each one and refuses the mapping without a bridge.
        container.pop("ports", None)
        # status.podIP, the node's address on its network, podman cannot resolve.
        for var in container.get("env", []):
            if var.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "status.podIP":
                var.pop("valueFrom")
                var["value"] = "127.0.0.1"
        if hosts_file:
            container.setdefault("volumeMounts", []).append(
                {"name": "cluster-dns", "mountPath": "/etc/hosts", "readOnly": True})


class KubePlayTest(cu.ChartTestCase):
    def setUp(self):
        super().setUp()
        self.played = []
        self.addCleanup(self._down)

    def _down(self):
        for path in reversed(self.played):
            cu.podman("kube", "down", path, check=False, timeout=120)

    def _play(self, name, documents):
        path = os.path.join(self.work_dir, name + ".yaml")
        with open(path, "w") as f:
            yaml.safe_dump_all(documents, f)
        self.played.append(path)
        played = cu.podman("kube", "play", "--replace", path, check=False, timeout=600)
        self.assertEqual(played.returncode, 0, f"kube play {name}:\n{played.stdout}{played.stderr}")
        return path

    def _hosts_file(self, pod, names):
        path = os.path.join(self.work_dir, f"{pod}.hosts")
        with open(path, "w") as f:
            f.write("127.0.0.1 localhost " + " ".join(sorted(names)) + "\n")
        return path

    def _logs(self):
        listed = cu.podman("ps", "-a", "--format", "{{.Names}}", check=False).stdout.split()
        return "\n".join(f"--- {n}:\n" + cu.podman("logs", n, check=False).stderr[-2000:]
                         for n in listed if not n.endswith("-infra"))

    def _exit_codes(self, pod_name):
        """{container: (state, exit code)} of a pod's containers, its infra one left out."""
        listed = json.loads(cu.podman("ps", "-a", "--filter", f"pod={pod_name}",
                                      "--format", "json").stdout or "[]")
        return {c["Names"][0]: (c["State"], c["ExitCode"]) for c in listed if not c["IsInfra"]}

    def _finished(self, pod_name):
        """The pod's exit codes once every container of it has exited, else None."""
        codes = self._exit_codes(pod_name)
        return codes if codes and all(state == "exited" for state, _ in codes.values()) else None

    def test_rendered_chart_plays_and_serves(self):
        kinds = {kind for kind, _ in self.objects}
        unknown = kinds - set(PLAYED_KINDS) - set(NOT_PLAYED) - {"StatefulSet"}
        self.assertFalse(unknown, f"kinds the test does not know how to play: {unknown}")

        (statefulset,) = cu.of_kind(self.objects, "StatefulSet")
        # Said in the log: a podman that plays StatefulSets makes this stand-in unneeded.
        refused = cu.podman("kube", "play", "--start=false", "/dev/stdin", check=False,
                            input=yaml.safe_dump(statefulset))
        print(f"\nkube play of the StatefulSet: exit {refused.returncode}: "
              f"{(refused.stderr or refused.stdout).strip()[:300]}", flush=True)
        if refused.returncode == 0:
            cu.podman("kube", "down", "/dev/stdin", check=False, input=yaml.safe_dump(statefulset))

        config_maps = cu.of_kind(self.objects, "ConfigMap")
        (engine,) = [c for c in config_maps if "FOLIO_WORKERS" in c["data"]]
        worker_hosts = {a.rsplit(":", 1)[0] for a in engine["data"]["FOLIO_WORKERS"].split(",")}
        (deployment,) = cu.of_kind(self.objects, "Deployment")
        deployment = copy.deepcopy(deployment)
        on_host_network(deployment["spec"]["template"]["spec"], self._hosts_file("scheduler", worker_hosts))
        labelled(deployment["spec"]["template"]["metadata"])
        worker = statefulset_pod(statefulset, 0)
        on_host_network(worker["spec"])
        labelled(worker["metadata"])
        self.assertIn(worker["metadata"]["name"] + ".", " ".join(worker_hosts))

        self._play("cluster", [*config_maps, worker, deployment])
        address = f"127.0.0.1:{self.ports['grpc']}"
        try:
            cu.wait_until(lambda: cu.grpc_health(address) == 1, 240, "scheduler SERVING",
                          interval=0.2)
        except AssertionError:
            raise AssertionError("scheduler never SERVING:\n" + self._logs())

        options = ["--temperature", "0", "--max-tokens", "16", "--ignore-eos"]
        served = cu.folio("generate", "--address", address, "--wait-s", "60", *options, PROMPT)
        self.assertEqual(served.returncode, 0, served.stderr + self._logs())
        offline = cu.folio("run", "--model", cu.DEMO, "--prompt", PROMPT, *options)
        self.assertEqual(served.stdout.strip(), offline.stdout.strip())

        # The chart's `helm test` pod, against the scheduler Service's name.
        (test_pod,) = [p for p in cu.of_kind(self.objects, "Pod")
                       if "helm.sh/hook" in p["metadata"].get("annotations", {})]
        test_pod = copy.deepcopy(test_pod)
        labelled(test_pod["metadata"])
        services = {s["metadata"]["name"] for s in cu.of_kind(self.objects, "Service")}
        on_host_network(test_pod["spec"], self._hosts_file(
            "helm-test", services | {f"{s}.default.svc" for s in services}
            | {f"{s}.default.svc.cluster.local" for s in services}))
        self._play("helm-test", [test_pod])
        pod_name = test_pod["metadata"]["name"]
        codes = cu.wait_until(lambda: self._finished(pod_name), 120, "the helm test pod to finish",
                               interval=0.2)
        self.assertTrue(all(code == 0 for _, code in codes.values()),
                        f"helm test pod: {codes}\n{self._logs()}")

        # SIGTERM to every container of the cluster's pods, as a pod deletion does.
        for pod in (deployment_pod_name(deployment), worker["metadata"]["name"]):
            cu.podman("pod", "stop", "-t", "30", pod, timeout=120)
            codes = self._exit_codes(pod)
            self.assertTrue(codes, f"no containers in pod {pod}")
            self.assertTrue(all(state == "exited" and code == 0 for state, code in codes.values()),
                            f"pod {pod}: {codes}\n{self._logs()}")


def deployment_pod_name(deployment):
    """The pod name `podman kube play` gives a Deployment's first replica."""
    return f"{deployment['metadata']['name']}-pod-0"


if __name__ == "__main__":
    cu.run_tests_or_skip(lambda: unittest.main(verbosity=2))
