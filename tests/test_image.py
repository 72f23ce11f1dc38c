"""gpuready's container image: built with the one documented command (scripts/build_image.py),
loaded into a real containerd with ``ctr image import`` and run there with ``ctr run``, a node
tree mounted at /host; and deploy/image/Containerfile built by buildah on that build's base.

The builds fetch Debian's packages and PyPI's wheels and take minutes: those tests are marked
slow (run them with --slow). The refusals before a build are quick and run in CI.
"""

from __future__ import annotations

import gzip
import io
import itertools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import pytest
import tomlkit
import yaml

from tests.harness.agent import RunningAgent, feature_labels
from tests.harness.containerd import Containerd, lab_config, short_tempdir
from tests.harness.processes import remove_folder
from tests.harness.restart_channel import RestartChannel
from tests.harness.restartable import RestartableContainerd
from tests.helpers import REPO, require, run_cli
from tests.rules_support import node_sandbox
from tests.userdocs import section, sh_blocks

SCRIPT = REPO / "scripts" / "build_image.py"
CONTAINERFILE = REPO / "deploy" / "image" / "Containerfile"
DAEMONSET = REPO / "deploy" / "kubernetes" / "daemonset.yaml"
NODE_DPKG = "Package: containerd\nStatus: install ok installed\nVersion: 1.6.20~ds1-1+deb12u3\n"
VERSION = re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.M)[1]
IMAGE = f"localhost/gpuready:{VERSION}"
BUILD_TIMEOUT = 1800
# Today the image unpacks to about 147 MiB (Debian 12 minbase with python3: 119 MiB, gpuready's
# venv: 28 MiB). Debian 12's usrmerge package alone (libperl) would add 45 MiB.
MOST_UNPACKED = 180 * 1024 * 1024
RUN_IDS = itertools.count()


def require_tools(*names: str) -> None:
    """Fail under CI=true, skip elsewhere, when a build tool is missing (each is a Debian
    package of its own name)."""
    missing = [name for name in names if shutil.which(name) is None]
    if not missing:
        return
    reason = f"needs {', '.join(missing)} (apt-get install {' '.join(missing)})"
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def image_commands() -> list[list[str]]:
    """The documented container image commands (the first sh block of the "Container image"
    section, docs/install.md): build, import."""
    first = sh_blocks(section("## Container image"))[0]
    return [shlex.split(line) for line in first.strip().splitlines()]


@dataclass
class Built:
    """What the documented build command wrote."""

    out: Path
    output: str

    @property
    def archive(self) -> Path:
        return self.out / "gpuready.oci.tar"

    @property
    def base(self) -> Path:
        return self.out / "base.oci.tar"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The image, built with the documented command (this Python for its `.venv/bin/python`,
    without sudo: the tests run as root), into a temporary folder instead of dist/."""
    require_tools("mmdebstrap", "umoci")
    build, _ = image_commands()
    assert build[:3] == ["sudo", ".venv/bin/python", "scripts/build_image.py"], build
    out = tmp_path_factory.mktemp("image") / "out"
    command = [sys.executable, str(REPO / build[2]), *build[3:], "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO,
                          timeout=BUILD_TIMEOUT, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return Built(out, done.stdout)


def ctr(daemon: Containerd, *args: str) -> subprocess.CompletedProcess:
    """``ctr`` in the k8s.io namespace (the one the kubelet sees) of the test's containerd."""
    return subprocess.run(["ctr", "--address", str(daemon.socket), "-n", "k8s.io", *args],
                          capture_output=True, text=True, timeout=300, check=False)


def run_in(daemon: Containerd, image: str, *argv: str, host: Path | None = None):
    """``ctr run --rm IMAGE ID ARGV...``, HOST mounted read-only at /host.

    ctr's arguments after the ID replace the image's entrypoint and command (unlike Kubernetes'
    args), so the gpuready commands below name ``gpuready`` first.
    """
    mounts = ["--mount", f"type=bind,src={host},dst=/host,options=rbind:ro"] if host else []
    return ctr(daemon, "run", "--rm", *mounts, image, f"gpuready-test-{next(RUN_IDS)}", *argv)


def import_image(daemon: Containerd, archive: Path, name: str) -> None:
    """Import ARCHIVE with ``ctr image import`` and check it lists the image as NAME."""
    imported = ctr(daemon, "image", "import", str(archive))
    assert imported.returncode == 0, imported.stderr
    listed = ctr(daemon, "image", "ls", "-q")
    assert name in listed.stdout.split(), listed.stdout


def assert_runs_gpuready(daemon: Containerd, image: str, tmp_path: Path) -> None:
    """In IMAGE: gpuready's version, and doctor on a node tree at /host saying what doctor says
    on the same tree here, its paths under /host."""
    version = run_in(daemon, image, "gpuready", "--version")
    assert (version.returncode, version.stdout.strip()) == (0, f"gpuready {VERSION}"), version

    tree = node_sandbox(tmp_path)
    args = ("doctor", "--containerd-version", "1.7")
    inside = run_in(daemon, image, "gpuready", *args, "--root", "/host", host=tree)
    here = run_cli(*args, "--root", str(tree))
    assert (inside.returncode, here.code) == (0, 0), inside.stderr + here.err
    assert "/host/etc/containerd/config.toml:13:3: warning cdi-not-read" in inside.stdout
    assert inside.stdout == here.out.replace(str(tree), "/host")


def archive_image(archive: Path) -> tuple[dict, dict, list[bytes]]:
    """The index, the image config and the layers (gzip'd tars) of an OCI archive."""
    with tarfile.open(archive) as tar:
        def blob(digest: str) -> bytes:
            return tar.extractfile("blobs/sha256/" + digest.split(":", 1)[1]).read()

        index = json.loads(tar.extractfile("index.json").read())
        (entry,) = index["manifests"]
        manifest = json.loads(blob(entry["digest"]))
        config = json.loads(blob(manifest["config"]["digest"]))
        layers = [blob(layer["digest"]) for layer in manifest["layers"]]
    return index, config, layers


@pytest.mark.slow
def test_the_image_runs_gpuready_under_containerd(built, start_containerd, tmp_path) -> None:
    """ctr image import names it localhost/gpuready:VERSION; its entrypoint is gpuready; it
    reports on a node tree mounted at /host as gpuready does here."""
    daemon = start_containerd()
    import_image(daemon, built.archive, IMAGE)
    assert f"ctr -n k8s.io image import {built.archive}" in built.output  # as docs/install.md says

    bare = run_in(daemon, IMAGE)  # no arguments: the entrypoint alone
    assert bare.returncode == 2 and bare.stdout.startswith("usage: gpuready "), bare
    assert_runs_gpuready(daemon, IMAGE, tmp_path)


@pytest.mark.slow
def test_the_image_holds_no_compiler_no_pip_and_no_cache(built) -> None:
    """Two layers (the Debian base, then /opt/gpuready), no installer or compiler, no pip
    cache, no manuals, and small."""
    index, config, layers = archive_image(built.archive)
    assert index["manifests"][0]["annotations"]["io.containerd.image.name"] == IMAGE
    assert config["config"]["Entrypoint"] == ["/opt/gpuready/bin/gpuready"]
    assert config["config"]["Labels"]["org.opencontainers.image.version"] == VERSION
    assert len(layers) == 2
    names, unpacked = [], 0
    for layer in layers:
        with tarfile.open(fileobj=io.BytesIO(gzip.decompress(layer))) as tar:
            for member in tar.getmembers():
                names.append(member.name.removeprefix("./"))
                unpacked += member.size
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(layers[1]))) as tar:
        assert {name.split("/")[0] for name in tar.getnames()} == {"opt"}
    assert "opt/gpuready/bin/gpuready" in names
    assert any(re.search(r"site-packages/grpc/_cython/cygrpc\..*\.so$", name) for name in names)
    unwanted = re.compile(
        r"(^usr/bin/(gcc|cc|c\+\+|g\+\+|cpp|ld)(-\d+)?$|^usr/bin/\w+-linux-gnu-gcc"
        r"|site-packages/(pip|setuptools)/|^opt/gpuready/bin/pip|^root/\.cache/"
        r"|^usr/share/man/.|/libperl\.so|^tmp/gpuready-bundle)"
    )
    assert [name for name in names if unwanted.search(name)] == []
    assert unpacked < MOST_UNPACKED, f"{unpacked / 2**20:.0f} MiB unpacked"


@pytest.mark.slow
def test_the_containerfile_builds_on_the_base_and_runs(built, start_containerd, tmp_path) -> None:
    """buildah builds deploy/image/Containerfile with its FROM (debian:12-slim, which cannot be
    pulled here) replaced by the build's base.oci.tar; the result runs gpuready as the image
    does. Its apt-get and pip reach Debian's mirror and PyPI; the host's PIP_INDEX_URL and
    PIP_CERT (a TLS proxy's CA, mounted) go to the build as the Containerfile's build args."""
    require_tools("buildah")
    assert "FROM docker.io/library/debian:12-slim" in CONTAINERFILE.read_text()
    storage = short_tempdir()
    buildah = ["buildah", "--root", str(storage / "root"), "--runroot", str(storage / "run"),
               "--storage-driver", "vfs"]
    extra = []
    if os.environ.get("PIP_CERT"):
        extra += ["-v", f"{os.environ['PIP_CERT']}:/etc/proxy-ca.crt:ro",
                  "--build-arg", "PIP_CERT=/etc/proxy-ca.crt"]
    if os.environ.get("PIP_INDEX_URL"):
        extra += ["--build-arg", f"PIP_INDEX_URL={os.environ['PIP_INDEX_URL']}"]
    name = "localhost/gpuready:containerfile"
    archive = tmp_path / "containerfile.oci.tar"
    try:
        for step in (
            ["build", "--isolation", "chroot", "--from", f"oci-archive:{built.base}", *extra,
             "-f", str(CONTAINERFILE), "-t", name, str(REPO)],
            ["push", name, f"oci-archive:{archive}:{name}"],
        ):
            done = subprocess.run([*buildah, *step], capture_output=True, text=True,
                                  timeout=BUILD_TIMEOUT, check=False)
            assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    finally:
        subprocess.run([*buildah, "rm", "--all"], capture_output=True, check=False)
        remove_folder(storage)
    _, config, _ = archive_image(archive)
    assert config["config"]["Entrypoint"] == ["/opt/gpuready/bin/gpuready"]
    assert not any("PIP_" in variable for variable in config["config"]["Env"])

    daemon = start_containerd()
    import_image(daemon, archive, name)
    assert_runs_gpuready(daemon, name, tmp_path)


# -- gpuready agent in the image, as the DaemonSet runs it ----------------------------------------


@dataclass
class ImageNode:
    """A node tree whose own containerd (a second real one) reads the tree's config and serves
    at the tree's /run/containerd/containerd.sock; the folders the DaemonSet mounts exist in it
    (its hostPath volumes are DirectoryOrCreate). ``work`` holds the settings folder (the
    ConfigMap's mount) and the restart channel's folder."""

    root: Path
    work: Path
    daemon: RestartableContainerd

    @property
    def config(self) -> Path:
        return self.root / "etc/containerd/config.toml"

    @property
    def settings(self) -> Path:
        return self.work / "settings" / "settings.yaml"

    @property
    def channel(self) -> Path:
        return self.work / "restart"


@pytest.fixture
def image_node(containerd_build) -> ImageNode:
    """The node of the agent-in-the-image test: containerd 1.6 (its package database says) on
    the tree's config, its socket under the tree, stopped and removed afterwards."""
    require(binaries=("containerd", "runc"))
    root, folder, work = short_tempdir(), short_tempdir(), short_tempdir()
    for mount in daemonset_host_mounts():  # as the kubelet makes a DirectoryOrCreate
        if mount.kind == "DirectoryOrCreate":
            (root / mount.path.lstrip("/")).mkdir(parents=True, exist_ok=True)
    (root / "etc/machine-id").write_text("0123456789abcdef0123456789abcdef\n")  # type: File
    (root / "var/lib/dpkg/status").write_text(NODE_DPKG)
    document = tomlkit.parse(lab_config(folder))
    socket = root / "run/containerd/containerd.sock"
    document["grpc"]["address"] = str(socket)  # the node's socket, a file of the tree
    daemon = RestartableContainerd(tomlkit.dumps(document), folder,
                                   binary=containerd_build.binary("containerd") or "containerd")
    daemon.socket = socket
    config = root / "etc/containerd/config.toml"
    config.write_text(daemon.config_path.read_text())
    daemon.config_path.unlink()
    daemon.config_path.symlink_to(config)  # the daemon reads the tree's file, as on the node
    (work / "settings").mkdir()
    (work / "restart").mkdir()
    daemon.start()
    try:
        yield ImageNode(root, work, daemon)
    finally:
        daemon.remove()
        remove_folder(root)
        remove_folder(work)


def daemonset_container() -> tuple[dict, list[dict]]:
    """The DaemonSet's one container and its pod's volumes."""
    pod = yaml.safe_load(DAEMONSET.read_text())["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return container, pod["volumes"]


class HostMount(NamedTuple):
    """One hostPath volume of the DaemonSet: the node path, where the container sees it, whether
    read-only, and its hostPath type."""

    path: str
    target: str
    read_only: bool
    kind: str


def daemonset_host_mounts() -> list[HostMount]:
    """Each hostPath volume the DaemonSet's container mounts."""
    container, volumes = daemonset_container()
    host = {volume["name"]: volume["hostPath"] for volume in volumes if "hostPath" in volume}
    return [HostMount(host[mount["name"]]["path"], mount["mountPath"],
                      mount.get("readOnly", False), host[mount["name"]]["type"])
            for mount in container["volumeMounts"] if mount["name"] in host]


def ctr_mount(source: Path | str, target: str, *, read_only: bool) -> list[str]:
    """``ctr run``'s --mount for a bind mount of ``source`` at ``target``."""
    options = "rbind:ro" if read_only else "rbind:rw"
    return ["--mount", f"type=bind,src={source},dst={target},options={options}"]


def agent_in_the_image(daemon: Containerd, node: ImageNode) -> RunningAgent:
    """``ctr run`` of the image with the DaemonSet's command, arguments and mounts: each node
    path from the tree at its /host/<path> (shallowest first, as the kubelet orders them), the
    settings folder at the ConfigMap's mountPath; plus what the DaemonSet lacks: the host's
    network (the test reaches the agent's listener at 127.0.0.1) and the restart channel's
    folder. --listen is 127.0.0.1:0 (the DaemonSet's 0.0.0.0:9402 is a port of the host here);
    the agent's first line names the port."""
    container, _ = daemonset_container()
    args = list(container["args"])
    args[args.index("--listen") + 1] = "127.0.0.1:0"
    settings_at = next(mount["mountPath"] for mount in container["volumeMounts"]
                       if mount["name"] == "settings")
    assert args[args.index("--settings") + 1] == f"{settings_at}/{node.settings.name}"
    mounts = ctr_mount(node.settings.parent, settings_at, read_only=True)
    for mount in sorted(daemonset_host_mounts(), key=lambda m: m.target.count("/")):
        mounts += ctr_mount(node.root / mount.path.lstrip("/"), mount.target,
                            read_only=mount.read_only)
    mounts += ctr_mount(node.channel, RestartChannel.MOUNTED_AT, read_only=False)
    name = f"gpuready-agent-{next(RUN_IDS)}"
    base = ["ctr", "--address", str(daemon.socket), "-n", "k8s.io"]
    return RunningAgent(
        [*base, "run", "--rm", "--net-host", *mounts, IMAGE, name, *container["command"], *args],
        stop=lambda: ctr(daemon, "task", "kill", name))  # SIGTERM, as the kubelet stops a pod


def kill_tasks(daemon: Containerd) -> None:
    """SIGKILL every task still running on ``daemon`` (a failed test's agent): a task outlives
    its shim, which the daemon's fixture stops by pid."""
    for task in ctr(daemon, "task", "ls", "-q").stdout.split():
        ctr(daemon, "task", "kill", "-s", "SIGKILL", task)
        ctr(daemon, "task", "delete", "-f", task)


@pytest.mark.slow
def test_the_agent_in_the_image_restarts_the_nodes_containerd_only_when_its_config_changes(
        built, start_containerd, image_node) -> None:
    """The image under a real containerd (``ctr run``), as the DaemonSet runs it, the node tree
    mounted at /host path by path as the DaemonSet mounts the host; the node's containerd is a
    second real one (Debian's 1.6) on the tree's config and socket. The settings' restart is
    ``method: command``: a shell script in the container asks through a folder the test mounts
    (RestartChannel), and the test restarts the node's daemon, standing in for nsenter into
    PID 1 or systemd. As tests/test_agent.py finds for the agent run here: a configuring start
    restarts once (one pid change) and is ready over the CRI; SIGTERM (``ctr task kill``)
    restarts nothing; an unchanged start restarts nothing."""
    daemon = start_containerd()
    import_image(daemon, built.archive, IMAGE)
    image_node.settings.write_text(yaml.safe_dump({
        "runtime_name": "nvidia", "drop_in": False, "enable_cdi": False,
        "systemd_cgroup": "false", "interval_seconds": 30, "force": False,
        "restart": {"method": "command", "command": list(RestartChannel.COMMAND)}}))
    with RestartChannel(image_node.channel, image_node.daemon) as channel:
        try:
            check_the_agent_in_the_image(daemon, image_node, channel)
        finally:
            kill_tasks(daemon)


def check_the_agent_in_the_image(daemon: Containerd, node: ImageNode,
                                 channel: RestartChannel) -> None:
    """The checks of the test above: a configuring start, SIGTERM, an unchanged start."""
    original, first_pid = node.config.read_text(), node.daemon.pid
    agent = agent_in_the_image(daemon, node)
    assert agent.wait_for("pass:").startswith("pass: ready"), "\n".join(agent.lines)
    assert channel.restarts == 1 and channel.pids[0][0] == first_pid
    assert node.daemon.pid not in (None, first_pid)  # the node's daemon was restarted
    assert node.config.read_text() != original
    assert '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]' in \
        node.config.read_text()
    assert agent.get("/healthz")[0] == 200
    assert agent.get("/readyz")[0] == 200
    assert agent.restarts_metric() == 1.0
    labels = feature_labels(node.root)
    assert labels["gpuready.io/runtime.nvidia"] == "ready"
    assert labels["gpuready.io/containerd"] == "1.6"
    assert labels["gpuready.io/owner"] == "containerd"
    code, said = agent.terminate()
    assert code == 0 and "stopped (SIGTERM): nothing changed" in said, said
    assert channel.restarts == 1

    configured, running = node.config.read_text(), node.daemon.pid
    again = agent_in_the_image(daemon, node)  # unchanged: nothing to write or restart
    assert again.wait_for("pass:").startswith("pass: ready"), "\n".join(again.lines)
    assert again.get("/readyz")[0] == 200 and again.restarts_metric() == 0.0
    code, said = again.terminate()
    assert code == 0 and "stopped (SIGTERM): nothing changed" in said, said
    assert channel.restarts == 1 and node.daemon.pid == running
    assert node.config.read_text() == configured


def test_a_bundle_without_debian_12s_wheels_is_refused_in_one_line(tmp_path) -> None:
    """--bundle holding wheels for another Python: one line naming the bundle to build, exit
    status 2, before anything is built."""
    if not shutil.which("dpkg"):
        pytest.skip("the image is built on Debian or Ubuntu (dpkg)")
    bundle = tmp_path / "bundle"
    (bundle / "wheels").mkdir(parents=True)
    (bundle / "install.sh").write_text("exit 1\n")
    for wheel in ("gpuready-0.1.0-py3-none-any.whl",
                  "grpcio-1.80.0-cp39-cp39-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
                  "grpcio-1.80.0-cp39-cp39-manylinux_2_17_aarch64.whl"):
        (bundle / "wheels" / wheel).write_bytes(b"")
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, str(SCRIPT), "--bundle", str(bundle), "--out", str(out)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"build_image.py: error: --bundle {bundle} holds no wheels for "
                                  "CPython 3.11 on ")
    assert "scripts/build_bundle.py --python 3.11 --platform " in done.stderr
    assert not out.exists()


def test_the_documented_import_loads_what_the_build_writes() -> None:
    """The documented import command names the archive the build command writes by default."""
    build, load = image_commands()
    assert load == ["sudo", "ctr", "-n", "k8s.io", "image", "import",
                    f"dist/image-{VERSION}/gpuready.oci.tar"]
    shown = subprocess.run([sys.executable, str(REPO / build[2]), "--help"],
                           capture_output=True, text=True, timeout=60, check=True)
    assert f"(default: dist/image-{VERSION})" in " ".join(shown.stdout.split())
