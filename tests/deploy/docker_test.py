"""Static checks of deploy/docker/Dockerfile.* (no Docker engine here to build them):
every COPY source exists in the repository, the build stage installs with
deploy/install-deps.sh, the binaries built and copied are the ones the project
defines, and the entrypoint script knows the commands the Dockerfiles use.

Run: /usr/bin/python3 tests/deploy/docker_test.py [REPO_ROOT]
"""
import glob
import os
import re
import shlex
import subprocess
import sys
import unittest

ROOT = os.path.abspath(sys.argv.pop(1) if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), "..", ".."))
DOCKER = os.path.join(ROOT, "deploy", "docker")
DOCKERFILES = ["Dockerfile.cpu", "Dockerfile.cuda"]


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def instructions(path):
    """(INSTRUCTION, args) with continuation lines joined and comments dropped."""
    out, cur = [], ""
    with open(path, encoding="utf-8") as f:
        for line in f:
            s = line.rstrip("\n")
            if not cur and (not s.strip() or s.lstrip().startswith("#")):
                continue
            if s.endswith("\\"):
                cur += s[:-1] + " "
                continue
            cur += s
            word, _, rest = cur.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
            cur = ""
    return out


class DockerfileTest(unittest.TestCase):
    def test_files_exist(self):
        for name in DOCKERFILES + ["entrypoint.sh", "runtime-packages.sh"]:
            self.assertTrue(os.path.isfile(os.path.join(DOCKER, name)), name)
        for name in ("entrypoint.sh", "runtime-packages.sh", "make-base-images.sh",
                     "stage-prebuilt.sh", "podman.sh"):
            self.assertTrue(os.access(os.path.join(DOCKER, name), os.X_OK), name + " not executable")

    def test_dockerfiles(self):
        cmake = read(os.path.join(ROOT, "CMakeLists.txt"))
        for name in DOCKERFILES:
            with self.subTest(dockerfile=name):
                ins = instructions(os.path.join(DOCKER, name))
                froms = [a for i, a in ins if i == "FROM"]
                self.assertGreaterEqual(len(froms), 2, "a build and a runtime stage")
                stages = {f.split()[-1] for f in froms if " AS " in f.upper()}
                bases = [f for f in froms if f.split()[0] not in stages]
                if name.endswith(".cpu"):
                    self.assertTrue(all("bookworm" in f for f in bases), bases)
                    # stage-prebuilt.sh's build context replaces the stage by this name.
                    self.assertIn("binaries", stages)
                    self.assertIn("build/image-stage", read(os.path.join(DOCKER, "stage-prebuilt.sh")))
                else:
                    self.assertTrue(all(f.startswith("nvidia/cuda:") for f in bases), bases)
                for i, args in ins:
                    if i not in ("COPY", "ADD"):
                        continue
                    words = shlex.split(args)
                    opts = [w for w in words if w.startswith("--")]
                    paths = [w for w in words if not w.startswith("--")]
                    frm = [o.split("=", 1)[1] for o in opts if o.startswith("--from=")]
                    if frm:
                        self.assertIn(frm[0], stages, "COPY --from an unknown stage")
                        continue
                    for src in paths[:-1]:
                        hits = glob.glob(os.path.join(ROOT, src))
                        self.assertTrue(hits, "%s: COPY source %s does not exist" % (name, src))
                runs = " ".join(a for i, a in ins if i == "RUN")
                self.assertIn("bash deploy/install-deps.sh build", runs)
                self.assertIn("deploy/docker/runtime-packages.sh", runs)
                self.assertIn("FOLIO_ENABLE_CUDA=" + ("OFF" if name.endswith(".cpu") else "ON"), runs)
                self.assertIn("FOLIO_ENABLE_CUDA", cmake)
                for binary in ("folio-scheduler", "folio-worker", "folio"):
                    self.assertIn("/tmp/build/bin/%s " % binary, runs + " ")
                    self.assertRegex(self._cmake_targets(), r"\b%s\b" % re.escape(binary))
                # paths the build uses from the source tree
                for rel in ("models", "deploy/docker/entrypoint.sh", "deploy/install-deps.sh"):
                    self.assertTrue(os.path.exists(os.path.join(ROOT, rel)), rel)
                entry = [a for i, a in ins if i == "ENTRYPOINT"]
                self.assertEqual(entry, ['["/opt/folio/bin/entrypoint.sh"]'])
                self.assertTrue(os.path.isfile(os.path.join(DOCKER, name + ".dockerignore")))

    def _cmake_targets(self):
        text = ""
        for d in ("client", "scheduler/server", "worker"):
            text += read(os.path.join(ROOT, d, "CMakeLists.txt"))
        return " ".join(re.findall(r"add_executable\(\s*([\w.-]+)", text))

    def test_entrypoint_dispatch(self):
        entry = os.path.join(DOCKER, "entrypoint.sh")
        r = subprocess.run(["bash", "-n", entry], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = subprocess.run(["bash", entry], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("usage", r.stderr)
        r = subprocess.run(["bash", entry, "echo", "hello"], capture_output=True, text=True)
        self.assertEqual(r.stdout, "hello\n")
        text = read(entry)
        for binary in ("folio-scheduler", "folio-worker", "folio "):
            self.assertIn("/opt/folio/bin/" + binary, text)

    def test_runtime_packages_script(self):
        # On a built tree it must name the runtime libraries of install-deps.sh's -dev packages.
        binary = os.path.join(ROOT, "build", "bin", "folio-scheduler")
        if not os.path.isfile(binary):
            self.skipTest("no build/bin/folio-scheduler to inspect")
        r = subprocess.run([os.path.join(DOCKER, "runtime-packages.sh"), binary],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        pkgs = r.stdout.split()
        self.assertTrue(any(p.startswith("libgrpc++") for p in pkgs), pkgs)
        self.assertTrue(any(p.startswith("libprometheus-cpp-pull") for p in pkgs), pkgs)


if __name__ == "__main__":
    unittest.main()
