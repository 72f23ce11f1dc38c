"""Every corpus file with nvidia-ctk 1.20's drop-in: every command gives the line's real answer.

``tests/nvidia_ctk.py`` writes another tool's drop-in the way nvidia-ctk 1.20.0 ``runtime
configure --runtime=containerd`` does; it first reproduces the seven recorded cases, table for
table. Then each corpus file (the sources of tests/test_one_node_verdict.py) gets that drop-in,
laid out as a node under a sandbox root, and ``lint`` (the node), ``doctor``, ``check`` and
``audit`` are asked about it on its line. Their answers must be the line's real one on: does the
CRI plugin load, which runtimes it loads, the default runtime, and the GPU runtime's effective
``BinaryName`` and ``SystemdCgroup``.

The real answer: a version 1 or 2 file is judged on containerd 1.6, the one line this machine
runs: ``containerd config dump`` of the node's files (imports moved under the sandbox) says what
it builds, and a daemon started on the files says whether the CRI plugin loads. A version 3 or 4
file is judged on 2.1 or 2.3 by the model, which tests/test_model_lines.py and
tests/test_node_view.py hold to every recording of those lines.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import tomlkit

from gpuready.compat import tomllib
from gpuready.containerd.decoding import LINES_BY_NAME, decoded_value
from gpuready.containerd.lines import from_release_text
from gpuready.containerd.model import load_node
from gpuready.containerd.versions import spec_for
from gpuready.node import Node
from gpuready.textfile import without_bom
from tests.harness.containerd import Containerd, sandboxed, short_tempdir
from tests.helpers import DATA, require, run_cli
from tests.nvidia_ctk import DROP_IN, config_version, drop_in_like_nvidia_ctk

RECORDED = DATA / "observed" / "nvidia-ctk-1.20.0"
CASES = sorted(path.name for path in RECORDED.iterdir() if path.is_dir())
DEBIAN = DATA / "corpus-real" / "debian-12-containerd-package.toml"
SOURCES = (sorted((DATA / "corpus-real").glob("*.toml")) + sorted((DATA / "corpus").glob("*.toml"))
           + sorted((DATA / "containerd").glob("*.toml")))
LINE_OF_VERSION = {1: "1.6", 2: "1.6", 3: "2.1", 4: "2.3"}
MAIN = "/etc/containerd/config.toml"
GPU = "nvidia"


def _original(case: str) -> str:
    """The file nvidia-ctk was run on in a recorded case."""
    if case.startswith("debian-12-containerd-package"):
        return DEBIAN.read_text()
    return (DATA / "containerd" / f"{case}.toml").read_text()


def test_debian_original_is_the_recorded_main_file_without_its_imports() -> None:
    recorded = tomllib.loads(
        (RECORDED / "debian-12-containerd-package" / "config.toml").read_text())
    assert recorded.pop("imports") == ["/etc/containerd/conf.d/*.toml"]
    assert tomllib.loads(DEBIAN.read_text()) == recorded


@pytest.mark.parametrize("case", CASES)
def test_the_helper_writes_what_nvidia_ctk_wrote(case: str) -> None:
    """Both files, parsed, are the recorded ones: the main file with the drop-in folder in
    ``imports``, and the drop-in with the whole CRI table and runtime nvidia."""
    main, drop_in = drop_in_like_nvidia_ctk(_original(case))
    assert tomllib.loads(main) == tomllib.loads((RECORDED / case / "config.toml").read_text())
    assert tomllib.loads(drop_in) == tomllib.loads(
        (RECORDED / case / "conf.d" / "99-nvidia.toml").read_text())


class Answer(NamedTuple):
    """What a line does with a node: whether the CRI plugin loads, the runtimes and default
    runtime of the CRI table it builds, and the GPU runtime's effective options (None when the
    table has no GPU runtime)."""

    cri_loads: bool
    runtimes: tuple[str, ...]
    default: str
    binary_name: Any
    systemd_cgroup: Any


def _id(source: Path) -> str:
    return f"{source.parent.name}-{source.stem}"


def _line(source: Path) -> str:
    data = tomllib.loads(without_bom(source.read_text(encoding="utf-8")))
    return LINE_OF_VERSION.get(config_version(data), "2.3")


# A base OCI spec containerd 1.6 loads: written where a runtime's base_runtime_spec names one
BASE_SPEC = '{"ociVersion": "1.0.2-dev", "process": {"cwd": "/"}, "root": {"path": "rootfs"}}\n'


def base_specs(text: str) -> set[str]:
    """The absolute paths a file's runtimes name as ``base_runtime_spec``."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key == "base_runtime_spec" and isinstance(item, str) and item.startswith("/"):
                    found.add(item)
                walk(item)

    walk(tomllib.loads(without_bom(text)))
    return found


def lay_out(source: Path, root: Path, *, with_base_specs: bool = True) -> Path:
    """``source`` and nvidia-ctk's drop-in for it, at the paths nvidia-ctk writes them under
    ``root``; with the base OCI specs the runtimes name, as the node that ships the file has
    them (containerd 1.6's CRI plugin does not load without them: "failed to load base OCI
    spec from file", seen on kubespray's and kind's files)."""
    main, drop_in = drop_in_like_nvidia_ctk(source.read_text(encoding="utf-8"))
    (root / DROP_IN.lstrip("/")).parent.mkdir(parents=True)
    (root / MAIN.lstrip("/")).write_text(main, encoding="utf-8")
    (root / DROP_IN.lstrip("/")).write_text(drop_in, encoding="utf-8")
    for spec in (base_specs(main) | base_specs(drop_in)) if with_base_specs else ():
        (root / spec.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (root / spec.lstrip("/")).write_text(BASE_SPEC)
    return root


def _moved_imports(text: str, root: Path) -> str:
    """The main file with each absolute import moved under ``root`` (relative ones stay relative
    to the file, which is in the same place under ``root``)."""
    document = tomlkit.parse(without_bom(text))
    if "imports" in document:
        document["imports"] = [str(root / path.lstrip("/")) if path.startswith("/") else path
                               for path in document["imports"]]
    return tomlkit.dumps(document)


def _options(entry: dict | None, line: str) -> tuple[Any, Any]:
    if entry is None:
        return None, None
    options = entry.get("options") or {}
    decoding = LINES_BY_NAME["1.6" if line.startswith("1.") else line]
    binary, _ = decoded_value(options, "BinaryName", decoding)
    systemd, _ = decoded_value(options, "SystemdCgroup", decoding)
    return binary, bool(systemd)


def dump_answer(root: Path) -> tuple[Answer | None, str]:
    """containerd 1.6's ``config dump`` of the node's files: its answer with the CRI plugin
    taken to load when not disabled and the default is in ``runtimes`` (the daemon settles it),
    or None and the reason when containerd refuses the files."""
    main = root / MAIN.lstrip("/")
    staged = main.with_name("dump-config.toml")
    staged.write_text(_moved_imports(main.read_text(encoding="utf-8"), root), encoding="utf-8")
    done = subprocess.run(["containerd", "--config", str(staged), "config", "dump"],
                          capture_output=True, text=True, timeout=60)
    staged.unlink()
    if done.returncode != 0:
        return None, done.stderr
    dumped = tomllib.loads(done.stdout)
    cri = dumped.get("plugins", {}).get("io.containerd.grpc.v1.cri", {})
    runtimes = cri.get("containerd", {}).get("runtimes", {})
    default = cri.get("containerd", {}).get("default_runtime_name") or "runc"
    disabled = set(dumped.get("disabled_plugins", [])) & {"cri", "io.containerd.grpc.v1.cri"}
    binary, systemd = _options(runtimes.get(GPU), "1.6")
    return Answer(not disabled and default in runtimes, tuple(sorted(runtimes)), default,
                  binary, systemd), ""


def model_answer(root: Path, line: str) -> Answer:
    """The model's answer for the node on ``line``."""
    node = Node(root)
    loaded = load_node(node.path(MAIN), node=node,
                       line=from_release_text(line, source="--containerd-version"))
    binary, systemd = _options(loaded.runtimes.get(GPU), line)
    return Answer(loaded.cri_loaded, tuple(sorted(loaded.runtimes)), loaded.default_runtime,
                  binary, systemd)


@contextlib.contextmanager
def daemon_on(root: Path) -> Iterator[Containerd]:
    """The real containerd 1.6 started on the node's files, laid out again in a short folder
    (the socket's path is limited): the main file sandboxed, its imports moved into the folder,
    nvidia-ctk's drop-in where the moved imports find it. Not yet started; removed after."""
    folder = short_tempdir()
    main_text = without_bom((root / MAIN.lstrip("/")).read_text(encoding="utf-8"))
    original = tomlkit.parse(main_text)
    cri = spec_for(original.get("version", 1)).cri_plugin
    # sandboxed sets restrict_oom_score_adj in the main file's CRI table: an empty one where
    # there is none (its struct fields merge; the drop-in's table replaces it on 1.x anyway)
    original.setdefault("plugins", tomlkit.table()).setdefault(cri, tomlkit.table())
    document = tomlkit.parse(sandboxed(tomlkit.dumps(original), folder))
    imports = original.get("imports")
    if imports is not None:  # sandboxed drops them: the node's own, moved under the folder
        document["imports"] = [str(folder / path.lstrip("/")) if path.startswith("/") else path
                               for path in imports]
    drop_in = folder / DROP_IN.lstrip("/")
    drop_in.parent.mkdir(parents=True)
    drop_in_text = (root / DROP_IN.lstrip("/")).read_text(encoding="utf-8")
    config_text = tomlkit.dumps(document)
    # the base specs the node holds, moved into the folder as the imports are
    for spec in base_specs(main_text) | base_specs(drop_in_text):
        if (root / spec.lstrip("/")).is_file():
            moved = folder / spec.lstrip("/")
            moved.parent.mkdir(parents=True, exist_ok=True)
            moved.write_text((root / spec.lstrip("/")).read_text())
            config_text = config_text.replace(f'"{spec}"', f'"{moved}"')
            drop_in_text = drop_in_text.replace(f'"{spec}"', f'"{moved}"')
    drop_in.write_text(drop_in_text)
    daemon = Containerd(config_text, folder)
    try:
        yield daemon
    finally:
        daemon.remove()


def daemon_loads_cri(root: Path) -> tuple[bool, str]:
    """Whether the real containerd 1.6, started on the node's files, loads its CRI plugin
    (False when it does not start at all), and what it said."""
    with daemon_on(root) as daemon:
        try:
            daemon.start()
        except RuntimeError as error:
            return False, str(error)
        rows = subprocess.run(["ctr", "--address", str(daemon.socket), "plugins", "ls"],
                              capture_output=True, text=True, timeout=30).stdout
        cri = [row.split() for row in rows.splitlines()
               if row.split()[:2] == ["io.containerd.grpc.v1", "cri"]]
        return bool(cri) and cri[0][-1] == "ok", rows + daemon.log_text()


# error findings that mean the CRI plugin does not load (or containerd does not start)
CRI_BROKEN = {"default-runtime-missing", "cri-disabled", "import-overrides-cri", "import-missing",
              "version-unsupported"}


class Said(NamedTuple):
    """What a command's findings say about the node: the CRI plugin loads, the GPU runtime is
    among the runtimes it loads, and the paths the findings give the GPU runtime's binary."""

    cri_loads: bool
    gpu_loaded: bool
    binaries: frozenset[str]


def said_by_rules(problems: list[dict]) -> Said:
    errors = {p["rule"] for p in problems if p["severity"] == "error"}
    loads = not errors & CRI_BROKEN
    binaries = frozenset(p["message"].split(" ")[3] for p in problems
                         if p["rule"] == "binary-missing"
                         and p["message"].startswith(f"runtime {GPU!r}: ")
                         and p["message"].split(" ")[2].lower() == "options.binaryname")
    return Said(loads, loads and "runtime-not-registered" not in errors, binaries)


def said_by_check(checks: dict[str, dict]) -> dict[str, Any]:
    """check's own verdicts: runc and nvidia registered, the runtimes it says are loaded, the
    default, and nvidia's SystemdCgroup."""
    gpu = checks[f"runtime {GPU} registered"]
    loads = " loads runtimes "
    runtimes = (tuple(sorted(gpu["detail"].split(loads, 1)[1].split(", ")))
                if gpu["ok"] and loads in gpu["detail"] else None)
    detail = checks.get("SystemdCgroup is the boolean true", {}).get("detail", "")
    systemd = detail.split(" = ", 1)[1].split(" (")[0] if " = " in detail else None
    # unset (None) is runc's default, false
    default = checks["default_runtime_name is runc"]["detail"]
    return {"runc": checks["runc registered"]["ok"], "gpu": gpu["ok"], "runtimes": runtimes,
            "systemd": "False" if systemd == "None" else systemd,
            "default": default.split(" = ", 1)[1] if " = " in default else None}


def _with_daemon(dumped: Answer | None, started: bool) -> Answer:
    """The dump's answer, the daemon's word on whether the CRI plugin loads."""
    if dumped is None:  # containerd refuses the files: nothing loads
        return Answer(False, (), "runc", None, None)
    return dumped._replace(cri_loads=started)


@pytest.fixture(scope="module")
def nodes(tmp_path_factory) -> dict[str, dict]:
    """Every source with nvidia-ctk's drop-in as a node under base/LINE/; the line's answer;
    lint, doctor and check on each; audit once per line."""
    require(binaries=("containerd", "ctr"))
    base = tmp_path_factory.mktemp("ctk-nodes")
    found: dict[str, dict] = {}
    for source in SOURCES:
        line = _line(source)
        root = lay_out(source, base / line / _id(source))
        entry = {"root": root, "line": line, "why": ""}
        if line == "1.6":
            entry["dumped"], entry["why"] = dump_answer(root)
            entry["started"], said = daemon_loads_cri(root)
            entry["why"] += said
            entry["expected"] = _with_daemon(entry["dumped"], entry["started"])
        else:
            entry["expected"] = model_answer(root, line)
        found[_id(source)] = entry

    def ask(entry: dict) -> None:
        common = ("--root", str(entry["root"]), "--containerd-version", entry["line"],
                  "--format", "json")
        for command in ("lint", "doctor", "check"):
            result = run_cli(command, *common)
            entry[command] = json.loads(result.out)

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(ask, found.values()))
    for line in {entry["line"] for entry in found.values()}:
        audit = run_cli("audit", str(base / line), "--containerd-version", line,
                        "--format", "json", "--jobs", "2")
        by_node = {Path(n["node"]).name: n for n in json.loads(audit.out)["nodes"]}
        for entry in found.values():
            if entry["line"] == line:
                entry["audit"] = by_node[entry["root"].name]
    return found


@pytest.mark.containerd
@pytest.mark.parametrize("source", SOURCES, ids=_id)
def test_every_command_gives_the_lines_answer(source: Path, nodes) -> None:
    """lint, doctor and audit: the CRI plugin loads and loads nvidia exactly when the line
    does, and name nvidia's effective BinaryName; check: runc and nvidia registered, the
    runtimes loaded and nvidia's SystemdCgroup as the line has them."""
    entry = nodes[_id(source)]
    expected: Answer = entry["expected"]
    gpu_loaded = expected.cri_loads and GPU in expected.runtimes
    for command in ("lint", "doctor", "audit"):
        said = said_by_rules(entry[command]["problems"])
        assert (said.cri_loads, said.gpu_loaded) == (expected.cri_loads, gpu_loaded), \
            (command, expected, entry["why"], entry[command]["problems"])
        if GPU in expected.runtimes and isinstance(expected.binary_name, str):
            assert expected.binary_name in said.binaries, (command, expected, said)
    check = said_by_check({c["name"]: c for c in entry["check"]["checks"]})
    assert check["gpu"] == gpu_loaded, (expected, entry["check"])
    assert check["runc"] == (expected.cri_loads and "runc" in expected.runtimes), \
        (expected, entry["check"])
    if expected.cri_loads:
        assert check["default"] == repr(expected.default), (expected, check)
    if gpu_loaded:
        assert check["runtimes"] == expected.runtimes, (expected, check)
        assert check["systemd"] == str(expected.systemd_cgroup), (expected, check)


@pytest.mark.containerd
@pytest.mark.parametrize("source", [s for s in SOURCES if _line(s) == "1.6"], ids=_id)
def test_the_dump_and_the_started_daemon_agree(source: Path, nodes) -> None:
    """On 1.6 the CRI plugin loads exactly when the dump is not refused, lists the default
    runtime and does not disable the plugin: the rule every command's verdict rests on."""
    entry = nodes[_id(source)]
    dumped = entry["dumped"]
    assert (dumped is not None and dumped.cri_loads) == entry["started"], (dumped, entry["why"])


KUBESPRAY = DATA / "corpus" / "kubespray.toml"


@pytest.mark.containerd
def test_without_its_base_spec_the_real_cri_plugin_does_not_load(tmp_path: Path) -> None:
    """The node of kubespray's file, nvidia-ctk's drop-in, and no /etc/containerd/cri-base.json:
    the real 1.6 serves no CRI (the corpus test above lays the base spec out)."""
    require(binaries=("containerd", "ctr"))
    root = lay_out(KUBESPRAY, tmp_path / "node", with_base_specs=False)
    loads, said = daemon_loads_cri(root)
    assert not loads and "failed to load base OCI spec from file" in said, said


def test_without_its_base_spec_doctor_says_the_cri_plugin_does_not_load(tmp_path: Path) -> None:
    root = lay_out(KUBESPRAY, tmp_path / "node", with_base_specs=False)
    """base-runtime-spec-missing: doctor, lint (the node) and check say what the daemon does."""
    for command in ("doctor", "lint", "check"):
        result = run_cli(command, "--root", str(root), "--containerd-version", "1.6")
        assert result.code == 1 and "cri-base.json" in result.out, (command, result.out)
        assert "base-runtime-spec-missing" in result.out, (command, result.out)


LIVE = [DEBIAN, DATA / "containerd" / "lab-base.toml",
        DATA / "containerd" / "containerd-1.6.20-default.toml",
        DATA / "corpus-real" / "kubespray-containerd-v2.toml"]


@pytest.mark.containerd
@pytest.mark.parametrize("source", LIVE, ids=_id)
def test_verify_live_gives_the_running_daemons_answer(source: Path, tmp_path: Path) -> None:
    """verify --live against the real 1.6 started on the node: where the CRI plugin does not
    load (Debian's file), exit 1 naming nvidia-ctk's drop-in and the cause; where it loads, the
    runtimes, the default and nvidia's decoded BinaryName and SystemdCgroup of config dump (on
    kubespray's file nvidia-ctk's copy spells binaryName twice and systemdCgroup in camelCase:
    1.6 takes the exact BinaryName)."""
    require(binaries=("containerd", "ctr"))
    root = lay_out(source, tmp_path / "node")
    expected, why = dump_answer(root)
    assert expected is not None, why
    with daemon_on(root) as daemon:
        daemon.start()
        result = run_cli("verify", "--live", "--address", daemon.address, "--config",
                         str(daemon.config_path), "--containerd-version", "1.6",
                         "--format", "json")
    if source == DEBIAN:
        assert result.code == 1, result
        assert "CRI plugin did not load" in result.err and "99-nvidia.toml" in result.err
        assert "built-in one, so runc is gone" in result.err, result.err
        return
    assert expected.cri_loads and result.code == 0, (expected, result)
    report = json.loads(result.out)
    assert tuple(sorted(report["runtimes"])) == expected.runtimes
    assert report["default_runtime_name"] == expected.default
    decoded = report["runtimes"][GPU]["decoded"]
    assert decoded["BinaryName"]["value"] == expected.binary_name
    assert decoded["SystemdCgroup"]["value"] == expected.systemd_cgroup
