"""Every rule has a case that triggers exactly it, and a near-identical case that is clean."""

from __future__ import annotations

import re

import pytest

from gpuready.rules import REGISTRY, SECTIONS
from gpuready.rules.base import Scope
from tests.rules_support import (
    CASES,
    crio_case,
    crio_marked,
    docker_case,
    doctor_case,
    is_docker_case,
    is_lint_case,
    lint_case,
    marked_lines,
)

REQUIRED_NAMES = {
    "toml-syntax",
    "version-missing",
    "version-unsupported",
    "unquoted-plugin-key",
    "wrong-version-path",
    "runtime-not-registered",
    "runtime-type-missing",
    "runtime-type-deprecated",
    "bool-as-string",
    "option-outside-options",
    "unknown-option",
    "deprecated-systemd-cgroup",
    "binary-path-relative",
    "binary-missing",
    "default-runtime-changed",
    "cgroup-driver-mismatch",
    "cri-disabled",
    "import-overrides-cri",
    "handler-mismatch",
    "handler-invalid",
    "cdi-spec-missing",
    "cdi-spec-invalid",
    "config-regenerated",
    "owner-template-stale",
    "socket-mismatch",
    "multiple-containerd",
}
RULE_NAMES = sorted(REGISTRY)


def run_case(name: str, which: str, tmp_path):
    if REGISTRY[name].scope is Scope.DOCKER:
        return docker_case(name, which, tmp_path)
    if REGISTRY[name].scope is Scope.CRIO:
        return crio_case(name, which, tmp_path)
    if is_lint_case(name):
        return lint_case(name, which, tmp_path)
    return doctor_case(name, which, tmp_path)


def test_the_documented_rule_names_are_all_there():
    assert set(REGISTRY) >= REQUIRED_NAMES


@pytest.mark.parametrize("name", RULE_NAMES)
def test_rule_is_a_documented_unit(name):
    rule = REGISTRY[name]
    assert re.fullmatch(r"[a-z]+(-[a-z0-9]+)+", name)
    assert rule.name == name
    assert rule.summary()
    assert rule.missing_sections() == [], f"{name} lacks {rule.missing_sections()}"
    assert list(rule.sections()) == list(SECTIONS)


@pytest.mark.parametrize("name", RULE_NAMES)
def test_rule_has_cases(name):
    case = CASES / name
    if REGISTRY[name].scope is Scope.DOCKER:
        assert is_docker_case(name) and (case / "good.json").is_file()
        assert (case / "bad.lines").is_file()
    elif is_lint_case(name):
        assert (case / "good.toml").is_file()
        assert REGISTRY[name].scope is not Scope.NODE, "a node rule needs a doctor case"
    else:
        assert (case / "bad").is_dir() and (case / "good").is_dir(), f"no cases for {name}"


@pytest.mark.parametrize("name", RULE_NAMES)
def test_bad_case_triggers_exactly_this_rule(name, tmp_path):
    problems = run_case(name, "bad", tmp_path)
    assert {p.rule for p in problems} == {name}, [f"{p.rule}: {p.message}" for p in problems]
    if REGISTRY[name].scope is Scope.DOCKER:
        expected = {int(n) for n in (CASES / name / "bad.lines").read_text().split()}
        assert {p.line for p in problems} == expected
        assert all(p.column for p in problems)
    elif REGISTRY[name].scope is Scope.CRIO:
        if crio_marked(name):
            assert {(p.file.rsplit("/", 1)[-1], p.line) for p in problems} == crio_marked(name)
    elif is_lint_case(name):
        expected = marked_lines(CASES / name / "bad.toml")
        assert {p.line for p in problems} == expected
        assert all(p.column for p in problems)
    assert all(p.fix for p in problems)


@pytest.mark.parametrize("name", RULE_NAMES)
def test_good_case_is_clean(name, tmp_path):
    problems = run_case(name, "good", tmp_path)
    assert problems == [], [f"{p.rule}: {p.message}" for p in problems]
