"""Property: every spec the generator builds is accepted by the validator, without warnings."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuready.cdi.document import parse_json, parse_yaml
from gpuready.cdi.generate import STRATEGIES, GenerateOptions, build_spec, render
from gpuready.cdi.inventory import Driver, Gpu, MigDevice, NodeInventory
from gpuready.cdi.validate import validate_document
from gpuready.cdi.versions import minimum_version

LIBDIR = "/usr/lib/x86_64-linux-gnu"


@st.composite
def inventories(draw):
    """Any number of GPUs with or without UUIDs and MIG devices, and any driver version."""
    count = draw(st.integers(min_value=1, max_value=12))
    uuids = draw(st.lists(st.uuids(), min_size=count * 8, max_size=count * 8, unique=True))
    gpus = []
    for index in range(count):
        known = draw(st.booleans())
        mig_count = draw(st.integers(min_value=0, max_value=3))
        migs = tuple(
            MigDevice(slot, f"MIG-{uuids[index * 8 + 1 + slot]}" if known else None,
                      (f"/dev/nvidia{index}", f"/dev/nvidia-caps/nvidia-cap{index * 10 + slot}"))
            for slot in range(mig_count))
        gpus.append(Gpu(index, index, f"GPU-{uuids[index * 8]}" if known else None,
                        (f"/dev/nvidia{index}",), migs))
    version = draw(st.one_of(st.none(), st.from_regex(r"[1-9][0-9]{2}\.[0-9]{1,3}(\.[0-9]{2})?",
                                                      fullmatch=True)))
    libraries = () if version is None else (f"{LIBDIR}/libcuda.so.{version}",
                                            f"{LIBDIR}/libnvidia-ml.so.{version}")
    return NodeInventory(tuple(gpus), Driver(version, libraries), ("/dev/nvidiactl",), "test")


@settings(max_examples=150, deadline=None)
@given(inventory=inventories(),
       strategies=st.lists(st.sampled_from(STRATEGIES), min_size=1, max_size=3, unique=True),
       hooks=st.booleans(), fmt=st.sampled_from(["yaml", "json"]),
       driver_root=st.sampled_from(["/", "/run/nvidia/driver"]))
def test_every_generated_spec_validates_clean(inventory, strategies, hooks, fmt, driver_root):
    """Rendered as YAML or JSON and read back, the spec has no error and no warning."""
    options = GenerateOptions(strategies=tuple(strategies), hooks=hooks, driver_root=driver_root)
    spec = build_spec(inventory, options)
    text = render(spec, fmt)
    document = (parse_json if fmt == "json" else parse_yaml)(text, f"nvidia.{fmt}")
    assert validate_document(document) == []
    assert spec["cdiVersion"] == minimum_version(spec)
    assert fmt == "json" or text.startswith("---\n")
