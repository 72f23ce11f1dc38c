"""The manifests in deploy/kubernetes: valid for every Kubernetes minor kubernetes-validate
bundles from 1.30 on (strict: no field a release does not know), and in agreement with the agent
(the node paths it mounts, the settings it reads, the runtime the RuntimeClass names)."""

from __future__ import annotations

from pathlib import PurePosixPath

import pytest
import yaml

from gpuready.agent.paths import HOST_ROOT, NODE_PATHS, volume_name
from gpuready.agent.reports import labels
from gpuready.agent.settings import settings_from
from tests.helpers import REPO

DEPLOY = REPO / "deploy" / "kubernetes"
MANIFESTS = sorted(DEPLOY.glob("*.yaml"))


def _minors() -> list[str]:
    from kubernetes_validate.utils import all_versions

    found = {tuple(int(part) for part in version.split(".")[:2]) for version in all_versions()}
    return [f"{major}.{minor}.0" for major, minor in sorted(found) if (major, minor) >= (1, 30)]


def _load(name: str) -> dict:
    return yaml.safe_load((DEPLOY / name).read_text())


def test_the_manifests_are_there():
    assert [path.name for path in MANIFESTS] == [
        "configmap.yaml", "daemonset.yaml", "namespace.yaml", "runtimeclass.yaml",
        "undo-job.yaml"]


@pytest.mark.parametrize("version", _minors())
def test_every_manifest_validates_strictly(version):
    from kubernetes_validate.utils import validate

    assert version >= "1.30" and len(_minors()) >= 1
    for path in MANIFESTS:
        for document in yaml.safe_load_all(path.read_text()):
            validate(document, version, strict=True)  # raises ValidationError with the field


def _pod(name: str) -> dict:
    return _load(name)["spec"]["template"]["spec"]


def _host_mounts(pod: dict) -> dict[str, tuple[str, bool]]:
    """node path -> (mountPath, readOnly) of every hostPath volume of the pod's container."""
    volumes = {volume["name"]: volume["hostPath"]["path"] for volume in pod["volumes"]
               if "hostPath" in volume}
    (container,) = pod["containers"]
    return {volumes[mount["name"]]: (mount["mountPath"], mount.get("readOnly", False))
            for mount in container["volumeMounts"] if mount["name"] in volumes}


@pytest.mark.parametrize("name", ["daemonset.yaml", "undo-job.yaml"])
def test_the_pods_mount_exactly_the_agents_node_paths(name):
    """Each path the agent uses at /host/<path>, read-only unless it writes there, and no
    other path of the node."""
    pod = _pod(name)
    expected = {mount.path: (f"{HOST_ROOT}{mount.path}", not mount.writable)
                for mount in NODE_PATHS}
    assert _host_mounts(pod) == expected
    assert len({volume["name"] for volume in pod["volumes"]}) == len(pod["volumes"])
    assert all(volume_name(mount.path) in {v["name"] for v in pod["volumes"]}
               for mount in NODE_PATHS)
    assert pod["automountServiceAccountToken"] is False  # no Kubernetes API credentials


def test_the_configmap_is_settings_the_agent_accepts_and_names_the_runtimeclass_handler():
    data = _load("configmap.yaml")["data"]
    settings = settings_from(yaml.safe_load(data["settings.yaml"]), "configmap.yaml")
    runtimeclass = _load("runtimeclass.yaml")
    assert runtimeclass["handler"] == settings.runtime_name
    # the RuntimeClass schedules onto the nodes whose label the agent writes "ready"
    from gpuready.agent.core import READY, Verdict

    ready = labels(Verdict(READY, "", "containerd", "1.6", "fresh", {}),
                   runtime_name=settings.runtime_name)
    selector = runtimeclass["scheduling"]["nodeSelector"]
    assert selector.items() <= ready.items()


def test_the_daemonset_runs_the_agent_on_the_mounted_settings():
    pod = _pod("daemonset.yaml")
    (container,) = pod["containers"]
    args = container["args"]
    assert container["command"] == ["gpuready"] and args[0] == "agent"
    assert args[args.index("--root") + 1] == HOST_ROOT
    settings = PurePosixPath(args[args.index("--settings") + 1])
    mount = next(m for m in container["volumeMounts"] if m["name"] == "settings")
    configmap = next(v for v in pod["volumes"] if v["name"] == "settings")["configMap"]["name"]
    assert str(settings.parent) == mount["mountPath"]
    assert configmap == _load("configmap.yaml")["metadata"]["name"]
    assert settings.name in _load("configmap.yaml")["data"]
    port = int(args[args.index("--listen") + 1].rpartition(":")[2])
    assert container["ports"][0]["containerPort"] == port
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert {"key": "nvidia.com/gpu", "operator": "Exists"} in pod["tolerations"]
    assert pod["nodeSelector"]


def test_the_undo_job_runs_unconfigure_on_the_mounted_node():
    (container,) = _pod("undo-job.yaml")["containers"]
    assert container["command"] == ["gpuready"]
    assert container["args"][:3] == ["unconfigure", "--root", HOST_ROOT]
