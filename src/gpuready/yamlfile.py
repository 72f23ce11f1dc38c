"""Reading YAML safely (``safe_load`` only), with errors that name file, line and column."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuready.errors import InputError


def yaml_error(error: Exception, path: Path | str) -> InputError:
    """A PyYAML error as a one-line :class:`InputError` at the problem's line and column."""
    mark = getattr(error, "problem_mark", None)
    reason = getattr(error, "problem", None) or str(error).splitlines()[0]
    if mark is None:
        return InputError(path, f"invalid YAML: {reason}")
    return InputError(path, f"invalid YAML: {reason}", line=mark.line + 1, column=mark.column + 1)


def load_mapping(text: str, path: Path | str) -> dict[str, Any]:
    """A YAML document that must be a mapping at the top level."""
    import yaml  # lazy: the command line starts without it

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise yaml_error(error, path) from None
    if not isinstance(data, dict):
        raise InputError(path, "expected a YAML mapping at the top level")
    return data
