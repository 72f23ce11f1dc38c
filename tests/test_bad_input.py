"""The bad-input catalogue: hostile and broken inputs, each refused clearly, cheaply, harmlessly.

Every case runs the real command line as a child under a 1 GiB address-space limit and checks:
the exit code and the one line that explains it, no "internal error" or traceback, not a byte
changed and nothing created below the test's folder, less than 5 s of wall time and less than
256 MB of peak RSS (the child's own ``ru_maxrss``). Each case was a failure of an earlier
gpuready: memory growing until the machine ran out, a hang on a FIFO while holding the lock,
a RecursionError, a file written outside the node or before an exit 2.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import LAB_BASE, run_cli, stage_fixture
from tests.measure import MAX_RSS_MB, MAX_SECONDS, run_measured, tree_snapshot

BILLION_LAUGHS = "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9 if prev else ['lol'] * 9)}]\n"
    for prev, name in zip([None, *"abcdefgh"], "abcdefghi")
)
DEEP_YAML = "devices: " + "[" * 5000 + "]" * 5000 + "\n"
DEEP_TOML_ARRAY = "version = 2\nx = " + "[" * 5000 + "]" * 5000 + "\n"
DEEP_TOML_TABLE = "version = 2\nx = " + "{a = " * 5000 + "1" + "}" * 5000 + "\n"
CONFIG = "etc/containerd/config.toml"


@dataclass(frozen=True)
class Case:
    """A command, the exit code it must give and a phrase its message must hold."""

    args: tuple[str, ...]
    code: int
    says: str


def _node(tmp: Path) -> Path:
    """A node with a valid containerd config and the air-gap base."""
    root = tmp / "node"
    (root / CONFIG).parent.mkdir(parents=True)
    shutil.copyfile(LAB_BASE, root / CONFIG)
    stage_fixture(root)
    return root


def _write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def _empty_node(tmp: Path) -> Path:
    """A node root with nothing on it but an ``etc/``, as ``--root`` requires."""
    (tmp / "empty" / "etc").mkdir(parents=True, exist_ok=True)
    return tmp / "empty"


def _bomb_in_cdi(tmp: Path) -> Path:
    root = _node(tmp)
    _write(root / "etc/cdi/nvidia.yaml", BILLION_LAUGHS)
    return root


def _fifo(tmp: Path, name: str = "config.toml") -> Path:
    path = tmp / name
    os.mkfifo(path)
    return path


def cases() -> dict[str, Callable[[Path], Case]]:
    """Every case by id; each builds its input under ``tmp`` and says what must happen."""
    return {
        # 3. unbounded inputs
        "cdi-validate-alias-bomb": lambda t: Case(
            ("cdi", "validate", "--root", str(_bomb_in_cdi(t))), 1, "alias bomb"),
        "cdi-list-alias-bomb": lambda t: Case(
            ("cdi", "list", "--root", str(_bomb_in_cdi(t))), 1, "refused"),
        "cdi-list-named-alias-bomb": lambda t: Case(
            ("cdi", "list", "--root", str(_bomb_in_cdi(t)), "/etc/cdi/nvidia.yaml"), 1,
            "refused"),
        "doctor-alias-bomb": lambda t: Case(
            ("doctor", "--root", str(_bomb_in_cdi(t))), 1, "alias bomb"),
        "setup-alias-bomb": lambda t: Case(
            ("setup", "--root", str(_bomb_in_cdi(t))), 2, "alias bomb"),
        "check-alias-bomb": lambda t: Case(
            ("check", "--root", str(_bomb_in_cdi(t))), 1, "alias bomb"),
        "kubelet-alias-bomb": lambda t: Case(
            ("doctor", "--root", str(_with(_node(t), "var/lib/kubelet/config.yaml",
                                             BILLION_LAUGHS))), 2, "alias bomb"),
        "runtimeclass-alias-bomb": lambda t: Case(
            ("doctor", "--root", str(_node(t)), "--runtimeclass",  # a file of the node
             str(_write(t / "node" / "rc.yaml", BILLION_LAUGHS))), 2, "alias bomb"),
        "inventory-alias-bomb": lambda t: Case(
            ("cdi", "generate", "--root", str(_empty_node(t)), "--inventory",
             str(_write(t / "inv.yaml", BILLION_LAUGHS)), "-o", "-"), 2, "alias bomb"),
        "lint-dev-zero": lambda t: Case(("lint", "/dev/zero"), 2, "is a character device"),
        "configure-dev-urandom": lambda t: Case(
            ("configure", "--config", "/dev/urandom"), 2, "is a character device"),
        "lint-fifo": lambda t: Case(("lint", str(_fifo(t))), 2, "is a FIFO"),
        "configure-fifo": lambda t: Case(
            ("configure", "--config", str(_fifo(t))), 2, "is a FIFO"),
        "setup-base-fifo": lambda t: Case(
            ("setup", "--root", str(t / "node"), "--base",
             str(_fifo(_write(t / "node" / "etc" / ".keep", "").parent, "base.toml"))), 2,
            "is a FIFO"),
        "config-linked-to-dev-zero": lambda t: Case(
            ("doctor", "--root", str(_linked(_node(t), CONFIG, "/dev/zero"))), 2, LINKED_DEVICE),
        "cdi-gpus-huge": lambda t: Case(
            ("cdi", "generate", "--gpus", "99999999999999999999", "-o", "-"), 2, "give 1 to 255"),
        "setup-gpus-100000": lambda t: Case(
            ("setup", "--root", str(t / "node"), "--gpus", "100000"), 2, "give 1 to 255"),
        "inventory-too-many-gpus": lambda t: Case(
            ("cdi", "generate", "--root", str(_empty_node(t)), "-o", "-", "--inventory",
             str(_write(t / "inv.yaml", "gpus:\n" + "".join(
                 f"  - {{index: {i}}}\n" for i in range(300))))), 2, "at most 255"),
        "cdi-spec-50mb": lambda t: Case(
            ("cdi", "validate", str(_write(t / "big.yaml", b"# padding\n" * 5_000_000))), 2,
            "larger than the 512 KiB gpuready reads for a CDI spec"),
        "config-50mb": lambda t: Case(
            ("lint", str(_write(t / "config.toml", b"# padding\n" * 5_000_000))), 2,
            "larger than the 1024 KiB gpuready reads for a containerd config"),
        # 4. "internal error"
        "lint-deep-toml-array": lambda t: Case(
            ("lint", str(_write(t / "config.toml", DEEP_TOML_ARRAY))), 1,
            "toml-syntax: not valid TOML: arrays and inline tables nested deeper than 64"),
        "lint-deep-toml-table": lambda t: Case(
            ("lint", str(_write(t / "config.toml", DEEP_TOML_TABLE))), 1,
            "nested deeper than 64 levels"),
        "configure-deep-toml": lambda t: Case(
            ("configure", "--config", str(_write(t / "config.toml", DEEP_TOML_ARRAY))), 2,
            "config.toml:2:69: invalid TOML: arrays and inline tables nested deeper"),
        "setup-base-deep-toml": lambda t: Case(
            ("setup", "--root", str(t / "node"), "--base",  # under --root, a file of the node
             str(_write(t / "node" / "base.toml", DEEP_TOML_TABLE))), 2,
            "nested deeper than 64"),
        "cdi-validate-deep-yaml": lambda t: Case(
            ("cdi", "validate", str(_write(t / "deep.yaml", DEEP_YAML))), 1,
            "YAML nested deeper than 100 levels"),
        "cdi-validate-deep-json": lambda t: Case(
            ("cdi", "validate", str(_write(t / "deep.json", "[" * 5000 + "]" * 5000))), 1,
            "nested deeper than 100 levels"),
        "setup-root-is-a-file": lambda t: Case(
            ("setup", "--root", str(_write(t / "file", "x"))), 2, "--root is not a folder"),
        # 5. all-or-nothing
        "configure-missing-file": lambda t: Case(
            ("configure", "--root", str(_empty_node(t))), 2, "no such file: without it containerd "
            "runs its built-in defaults"),
        "configure-missing-file-dry-run": lambda t: Case(
            ("configure", "--root", str(_empty_node(t)), "--dry-run"), 2, "no such file"),
        # 6. invalid names
        **{f"runtime-name-{name}": _bad_name(value) for name, value in (
            ("empty", ""), ("space", "nv idia"), ("upper", "NVIDIA"), ("64", "a" * 64))},
        **{f"binary-{name}": _bad_binary(value, says) for name, value, says in (
            ("empty", "", "is empty"), ("relative", "bin/nvidia", "not an absolute path"),
            ("newline", "/usr/bin/nvidia\n-container-runtime", "control character"))},
        # 8. smaller failures
        "doctor-runtimeclass-without-one": lambda t: Case(
            ("doctor", "--root", str(_node(t)), "--runtimeclass",
             str(_write(t / "node" / "rc.yaml", "kind: ConfigMap\n"))), 2, "no RuntimeClass"),
        **{f"lint-{name}": _wrong_shape(text) for name, text in (
            ("plugins-5", "plugins = 5"), ("imports-5", "imports = 5"),
            ("disabled-plugins-string", 'disabled_plugins = "cri"'),
            ("runtimes-string", '[plugins."io.containerd.grpc.v1.cri".containerd]\n'
                                'runtimes = "x"'))},
        "cdi-list-refused-named-spec": lambda t: Case(
            ("cdi", "list", str(_write(t / "spec.yaml", "cdiVersion: 0.6.0\nkind: x\n"))), 1,
            "refused"),
        "cdi-validate-utf16": lambda t: Case(
            ("cdi", "validate", str(_write(t / "spec.yaml", "kind: x\n".encode("utf-16")))), 2,
            "UTF-16LE text, not UTF-8"),
    }


def _with(root: Path, relative: str, text: str) -> Path:
    _write(root / relative, text)
    return root


def _linked(root: Path, relative: str, target: str) -> Path:
    """``relative`` made a link to ``target``; re-rooted, that is <root>/dev/zero, a character
    device made here (as root; otherwise the link dangles inside the root)."""
    link = root / relative
    link.unlink()
    (root / "dev").mkdir(exist_ok=True)
    if os.geteuid() == 0:
        os.mknod(root / "dev/zero", 0o666 | stat.S_IFCHR, os.makedev(1, 5))
    link.symlink_to(target)
    return root


LINKED_DEVICE = "is a character device" if os.geteuid() == 0 else "no such file"


def _bad_name(value: str) -> Callable[[Path], Case]:
    return lambda t: Case(("setup", "--root", str(t / "node"), "--runtime-name", value), 2,
                          "is not a lowercase DNS label")


def _bad_binary(value: str, says: str) -> Callable[[Path], Case]:
    return lambda t: Case(("configure", "--config", str(_write(t / "config.toml", "")),
                           "--binary", value), 2, says)


def _wrong_shape(text: str) -> Callable[[Path], Case]:
    return lambda t: Case(("lint", str(_write(t / "config.toml", f"version = 2\n{text}\n"))), 1,
                          "wrong-shape")


CASES = cases()


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_bad_input_is_refused_clearly_cheaply_and_changes_nothing(tmp_path, case_id):
    case = CASES[case_id](tmp_path)
    before = tree_snapshot(tmp_path)
    result = run_measured(*case.args)
    shown = f"exit {result.code}\nstdout: {result.out[-2000:]}\nstderr: {result.err[-2000:]}"
    assert result.code == case.code, shown
    assert case.says in result.out + result.err, shown
    assert "internal error" not in result.err and "Traceback" not in result.err, shown
    if case.code == 2:
        assert len(result.err.strip().splitlines()) <= 1 or "usage:" in result.err, shown
    assert tree_snapshot(tmp_path) == before, "bytes changed or files created"
    assert result.seconds < MAX_SECONDS, f"{result.seconds:.1f} s"
    assert result.peak_rss_mb < MAX_RSS_MB, f"{result.peak_rss_mb:.0f} MB"


def test_setup_on_a_full_disk_restores_what_it_wrote(tmp_path):
    """A write that fails half way (here: a file size limit, as a full disk would) leaves the
    node as it was: exit 2, the files already written restored, no folder left behind."""
    root = _node(tmp_path)
    (root / "etc/cdi").mkdir(parents=True)
    before = tree_snapshot(root)
    limit = (root / CONFIG).stat().st_size + 4096  # the config fits, the CDI spec does not
    result = run_cli_with_file_size_limit(root, limit)
    assert result.code == 2, result.out + result.err
    assert "File too large" in result.err
    assert tree_snapshot(root) == before


def run_cli_with_file_size_limit(root: Path, limit: int):
    import resource
    import signal
    import subprocess
    import sys

    from tests.helpers import REPO, Completed

    def preexec() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    # no byte code written under the limit: CPython's .pyc writer takes a short write as done
    # and renames a truncated file into place ("marshal data too short" for every later run)
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), PYTHONDONTWRITEBYTECODE="1")
    done = subprocess.run([sys.executable, "-m", "gpuready", "setup", "--root", str(root),
                           "--gpus", "64"], capture_output=True, text=True, env=env,
                          preexec_fn=preexec, timeout=120)
    return Completed(done.returncode, done.stdout, done.stderr)


def test_a_killed_runs_temporary_files_are_removed_by_the_next_run(tmp_path):
    root = _node(tmp_path)
    stale = [root / "etc/containerd/.config.toml.k1ll3d_x.tmp",
             root / "etc/containerd/.config.toml.gpuready.bak.abcdefgh.tmp",
             root / "etc/containerd/.config.toml.gpuready.json.r3c0rd_x.tmp"]  # the record's
    for path in stale:
        path.write_text("half a file")
    foreign = root / "etc/containerd/.config.toml.notours.tmp"
    foreign.write_text("someone else's")
    assert run_cli("configure", "--root", str(root)).code == 0
    assert not any(path.exists() for path in stale)
    assert foreign.read_text() == "someone else's"


def test_configure_does_not_copy_values_of_the_wrong_type(tmp_path):
    config = _write(tmp_path / "config.toml", (
        'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n'
        '  runtime_type = 5\n'))
    result = run_cli("configure", "--config", str(config))
    assert result.code == 0, result.err
    assert "runc's runtime_type = 5 has the wrong type for containerd; not copied" in result.out
    from gpuready.compat import tomllib

    runtimes = tomllib.loads(config.read_text())["plugins"]["io.containerd.grpc.v1.cri"][
        "containerd"]["runtimes"]
    assert runtimes["nvidia"]["runtime_type"] == "io.containerd.runc.v2"


def test_a_spec_just_under_the_size_limit_is_checked_within_the_bounds(tmp_path):
    """The size limit is set so that the largest spec allowed costs little: about 5000 devices,
    checked in well under 5 s of CPU (CPU time, as other work may share this machine)."""
    import yaml

    from gpuready.node import FileKind

    generated = run_measured("cdi", "generate", "--gpus", "255", "--no-hooks", "-o", "-")
    spec = yaml.safe_load(generated.out)
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    devices = spec["devices"]

    def with_copies(copies: int) -> str:
        named = [dict(device, name=f"{device['name']}-{copy}")
                 for copy in range(copies) for device in devices]
        return yaml.dump({**spec, "devices": named}, Dumper=dumper, sort_keys=False)

    one, two = len(with_copies(1).encode()), len(with_copies(2).encode())
    copies = (int(FileKind.CDI_SPEC.limit * 0.95) - (2 * one - two)) // (two - one)
    path = _write(tmp_path / "nvidia.yaml", with_copies(copies))
    assert path.stat().st_size > FileKind.CDI_SPEC.limit * 0.8
    result = run_measured("cdi", "validate", str(path))
    assert result.code == 0, result.out + result.err
    assert result.cpu_seconds < MAX_SECONDS, f"{result.cpu_seconds:.1f} s of CPU"
    assert result.peak_rss_mb < MAX_RSS_MB, f"{result.peak_rss_mb:.0f} MB"
