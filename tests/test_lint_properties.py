"""Properties of ``lint``, ``doctor`` and ``lint --fix`` that hold for any valid TOML.

A config can be valid TOML and still have any shape: ``plugins = 5``, a runtime that is a
string, ``disabled_plugins`` holding tables. containerd refuses or ignores such files; gpuready
must report on them, or stop with a one-line error, and never crash. ``--fix`` must leave a
file that still parses, and reach its fixed point in one run.
"""

from __future__ import annotations

from pathlib import Path

import tomlkit
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from gpuready.compat import tomllib
from gpuready.containerd.files import FileContext, Options
from gpuready.containerd.versions import CRI_IMAGES, CRI_PLUGIN_IDS
from gpuready.errors import GpureadyError
from gpuready.node import Node
from gpuready.paths import CONTAINERD_CONFIG
from gpuready.rules import REGISTRY
from gpuready.rules.engine import doctor, lint_file, lint_paths
from gpuready.rules.fix import fix_text

ALL_RULES = frozenset(REGISTRY)
KEY_NAMES = [
    "plugins",
    *sorted(CRI_PLUGIN_IDS),
    CRI_IMAGES,
    "io",
    "containerd",
    "runtimes",
    "runc",
    "nvidia",
    "options",
    "runtime_type",
    "SystemdCgroup",
    "systemd_cgroup",
    "BinaryName",
    "binary_name",
    "runtime_path",
    "runtime_engine",
    "default_runtime_name",
    "enable_cdi",
    "imports",
    "disabled_plugins",
    "version",
]
KEYS = st.sampled_from(KEY_NAMES)
SCALARS = st.one_of(
    st.booleans(),
    st.integers(-3, 5),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.sampled_from(
        [
            "runc",
            "nvidia",
            "x",
            "true",
            "false",
            "cri",
            "io.containerd.runc.v2",
            "io.containerd.runc.v1",
            "/usr/bin/x",
            "conf.d/*.toml",
        ]
    ),
)
SHAPES = st.recursive(
    SCALARS,
    lambda inner: st.dictionaries(KEYS, inner, max_size=4) | st.lists(inner, max_size=2),
    max_leaves=10,
)
LEAVES = SCALARS | SHAPES
# Where the rules look: every version's runtime, options and CRI tables, and the unquoted
# header a pasted snippet often has. A tree is built from a few of these, cut at a random
# depth, with any shape at the end, so the generated files reach the deep rules.
UNQUOTED = ("plugins", "io", "containerd", "grpc", "v1", "cri")
PREFIXES = [
    *(("plugins", plugin) for plugin in sorted(CRI_PLUGIN_IDS)),
    UNQUOTED,
]
TAILS = [
    ("containerd", "runtimes", runtime, *leaf)
    for runtime in ("runc", "nvidia")
    for leaf in (
        ("options", "SystemdCgroup"),
        ("options", "systemd_cgroup"),
        ("options", "BinaryName"),
        ("runtime_type",),
        ("SystemdCgroup",),
        ("BinaryName",),
        ("runtime_engine",),
    )
] + [("containerd", "default_runtime_name"), ("enable_cdi",), ("systemd_cgroup",)]
PATHS = [(*prefix, *tail) for prefix in PREFIXES for tail in TAILS] + [
    ("imports",),
    ("disabled_plugins",),
]


@st.composite
def trees(draw) -> dict:
    """A nested dict along the paths the rules read, with odd shapes at random depths."""
    tree: dict = draw(st.dictionaries(KEYS, SHAPES, max_size=2))
    for _ in range(draw(st.integers(0, 8))):
        path = draw(st.sampled_from(PATHS))
        path = path[: draw(st.just(len(path)) | st.just(len(path)) | st.integers(1, len(path)))]
        node = tree
        for key in path[:-1]:
            if not isinstance(node.get(key), dict):
                node[key] = {}
            node = node[key]
        node[path[-1]] = draw(LEAVES)
    return tree


# Mostly versions containerd has, so that the files reach the rules behind the version check.
VERSIONS = st.one_of(
    st.integers(1, 4),
    st.integers(2, 3),
    st.none(),
    st.sampled_from(["2", 2.0, True, 0, 9]) | st.lists(SCALARS, max_size=2),
)
RELEASES = st.sampled_from(["1.6.20", "1.7.0", "2.0.0", "2.3.0"])


def document(tree: dict, version: object) -> str:
    """The TOML text of ``tree``, with ``version`` first when given."""
    if version is not None:
        tree = {"version": version, **{k: v for k, v in tree.items() if k != "version"}}
    return tomlkit.dumps(tree)


def assert_one_line(error: GpureadyError) -> None:
    assert "\n" not in error.message()


common = settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
)


@common
@given(tree=trees(), version=VERSIONS, release=RELEASES)
def test_every_rule_survives_any_shape(tree: dict, version: object, release: str) -> None:
    text = document(tree, version)
    file = FileContext(Path("config.toml"), text, options=Options(root=Path("/nonexistent")))
    assert file.syntax_error is None, text
    from gpuready.containerd.semantics import from_flag

    problems = lint_file(file, selected=ALL_RULES, semantics=from_flag(release))
    assert all(problem.rule in REGISTRY for problem in problems)


@common
@given(tree=trees(), version=VERSIONS, drop_in=trees(), drop_in_version=VERSIONS, release=RELEASES)
def test_lint_and_doctor_on_disk_report_or_fail_cleanly(
    tree: dict, version: object, drop_in: dict, drop_in_version: object, release: str,
    tmp_path_factory,
) -> None:
    """A main config and a drop-in (imported when the main file's imports say conf.d/*.toml)."""
    tree.setdefault("imports", ["conf.d/*.toml"])
    root = tmp_path_factory.mktemp("node")
    path = Node(root).path(CONTAINERD_CONFIG)
    (path.parent / "conf.d").mkdir(parents=True)
    path.write_text(document(tree, version))
    (path.parent / "conf.d" / "a.toml").write_text(document(drop_in, drop_in_version))
    options = Options(root=root)
    lint_paths([path], options=options, selected=ALL_RULES)
    try:
        doctor(options=options, selected=ALL_RULES, containerd_version=release)
    except GpureadyError as error:
        assert_one_line(error)


@common
@given(tree=trees(), version=VERSIONS)
def test_fix_keeps_valid_toml_and_reaches_its_fixed_point(tree: dict, version: object) -> None:
    text = document(tree, version)
    options = Options(root=Path("/nonexistent"))
    result = fix_text(text, options=options)
    tomllib.loads(result.text)
    again = fix_text(result.text, options=options)
    assert again.text == result.text
