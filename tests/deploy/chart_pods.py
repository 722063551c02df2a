"""Runs the pods the Helm chart renders as podman containers, as a kubelet would run
them: the init containers first, then the main container with the pod's command,
args, environment (ConfigMap envFrom, fieldRef status.podIP, $(VAR) expansion),
volumes (emptyDir as a shared directory, a memory emptyDir at /dev/shm as --shm-size)
and hostname (a StatefulSet's pod is <name>-<ordinal>). Cluster DNS is replaced by
host entries: every name the test resolves points at 127.0.0.1, where all pods share
the host's network on free ports.

Only what the chart's default values render is translated; anything else (a Secret
volume, a required Secret key in the environment) raises, so a chart change that needs
more shows up here rather than being silently dropped.
"""
import os
import re
import tempfile

from container_util import LABEL, podman

POD_IP = "127.0.0.1"


def expand(text, env):
    """Kubernetes' $(VAR) expansion: defined names are replaced, others kept."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)), text)


def container_env(container, config_maps):
    env = {}
    for source in container.get("envFrom", []):
        env.update(config_maps[source["configMapRef"]["name"]]["data"])
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = expand(str(var["value"]), env)
        elif var.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "status.podIP":
            env[var["name"]] = POD_IP
        elif var.get("valueFrom", {}).get("secretKeyRef", {}).get("optional"):
            continue  # the default values make no Secret
        else:
            raise AssertionError(f"environment entry not translated: {var}")
    return env


def is_memory(volume):
    """A memory-backed emptyDir (medium: Memory)."""
    return (volume.get("emptyDir") or {}).get("medium") == "Memory"


def memory_size(limit):
    """A Kubernetes quantity (1Gi, 512Mi) as podman's --shm-size (1g, 512m)."""
    number, unit = re.fullmatch(r"(\d+)(Gi|Mi|Ki)?", str(limit)).groups()
    return number + {"Gi": "g", "Mi": "m", "Ki": "k", None: "b"}[unit]


class ChartPod:
    """One pod of a rendered workload (a Deployment's or a StatefulSet's template)."""

    def __init__(self, name, pod_spec, config_maps, work_dir):
        self.name = name
        self.spec = pod_spec
        self.config_maps = config_maps
        # emptyDir volumes: a directory every container of the pod mounts (0777, as
        # the kubelet makes them, so the image's non-root user may write).
        self.dirs = {}
        for volume in pod_spec.get("volumes", []):
            if "emptyDir" in volume and not is_memory(volume):
                path = tempfile.mkdtemp(prefix=f"{name}-{volume['name']}-", dir=work_dir)
                os.chmod(path, 0o777)
                self.dirs[volume["name"]] = path

    def _volume_flags(self, container):
        flags = []
        volumes = {v["name"]: v for v in self.spec.get("volumes", [])}
        for mount in container.get("volumeMounts", []):
            volume = volumes[mount["name"]]
            if mount["name"] in self.dirs:
                read_only = ":ro" if mount.get("readOnly") else ""
                flags += ["-v", f"{self.dirs[mount['name']]}:{mount['mountPath']}{read_only}"]
            elif is_memory(volume) and mount["mountPath"] == "/dev/shm":
                size = volume["emptyDir"].get("sizeLimit")
                flags += ["--shm-size", memory_size(size)] if size else []
            else:
                raise AssertionError(f"volume not translated: {volume}")
        return flags

    def _run_flags(self, container, hosts):
        env = container_env(container, self.config_maps)
        command = [expand(c, env) for c in container.get("command", [])]
        args = [expand(a, env) for a in container.get("args", [])]
        flags = ["--network", "host", "--hostname", self.name, "--label", LABEL,
                 *self._volume_flags(container)]
        for host in hosts:
            flags += ["--add-host", f"{host}:{POD_IP}"]
        for key, value in env.items():
            flags += ["-e", f"{key}={value}"]
        if command:
            flags += ["--entrypoint", command[0]]
        return flags, [*command[1:], *args]

    def run_init_containers(self, hosts=()):
        for init in self.spec.get("initContainers", []):
            flags, argv = self._run_flags(init, hosts)
            podman("run", "--rm", *flags, init["image"], *argv, timeout=300)

    def start(self, container_name, hosts=()):
        """Starts the named main container detached; its podman name."""
        container = next(c for c in self.spec["containers"] if c["name"] == container_name)
        flags, argv = self._run_flags(container, hosts)
        name = f"{self.name}-{container_name}"
        podman("run", "-d", "--name", name, *flags, container["image"], *argv, timeout=300)
        return name


def pod_of(workload, config_maps, work_dir, ordinal=None):
    """The pod a Deployment (ordinal None) or a StatefulSet (its ordinal) starts."""
    name = workload["metadata"]["name"]
    name = f"{name}-{ordinal}" if ordinal is not None else f"{name}-0123456789-abcde"
    return ChartPod(name, workload["spec"]["template"]["spec"], config_maps, work_dir)
