"""The light locator finds the line and column of tables and keys as TOML reads them."""

from __future__ import annotations

from gpuready.rules.locate import Locator, split_key_path

TEXT = '''version = 2
  # [not.a.header]
[plugins]
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    description = """
    fake = "inside a multi-line string"
    """
    "quoted.key" = 1
  [plugins.'io.containerd.cri.v1.runtime' . containerd.runtimes.nvidia]
    options.SystemdCgroup = true
'''


def test_headers_and_keys_map_to_their_positions():
    locator = Locator(TEXT)
    cri = ("plugins", "io.containerd.grpc.v1.cri", "containerd")
    assert locator.exact(cri) == (4, 3)
    assert locator.exact((*cri, "default_runtime_name")) == (5, 5)
    assert locator.exact((*cri, "quoted.key")) == (9, 5)
    assert locator.exact((*cri, "fake")) is None
    nvidia = ("plugins", "io.containerd.cri.v1.runtime", "containerd", "runtimes", "nvidia")
    assert locator.exact((*nvidia, "options", "SystemdCgroup")) == (11, 5)
    assert locator.exact(("not", "a", "header")) is None


def test_missing_paths_fall_back_to_where_they_belong():
    locator = Locator(TEXT)
    cri = ("plugins", "io.containerd.grpc.v1.cri")
    assert locator.locate(cri) == (4, 3)  # implicit table: its first header
    assert locator.locate((*cri, "containerd", "runtimes", "nvidia")) == (4, 3)
    assert Locator("").locate(("plugins",)) is None


def test_split_key_path_tells_bare_from_quoted():
    assert split_key_path('plugins."io.containerd.grpc.v1.cri".x') == (
        ("plugins", "io.containerd.grpc.v1.cri", "x"),
        (True, False, True),
    )
    assert split_key_path(r'"a\u0062c"') == (("abc",), (False,))
