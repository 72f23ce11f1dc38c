"""What gpuready needs from the standard library on every Python it runs on (3.9 to 3.13).

Nodes run the Python their operating system ships: 3.9 on Amazon Linux 2023 and RHEL 9, 3.10 on
Ubuntu 22.04. Two things gpuready uses arrived later:

- ``tomllib`` (3.11). Before it, ``tomli`` is the same parser, published on its own; both return
  the same values and raise ``TOMLDecodeError`` with the same message.
- ``enum.StrEnum`` (3.11). Before it, a ``str`` mixed into an ``Enum`` compares and hashes as its
  value; ``__str__`` is set here so that ``str(member)`` and f-strings give the value, as 3.11's
  ``StrEnum`` does.
"""

from __future__ import annotations

import sys
from enum import Enum

if sys.version_info >= (3, 11):
    from enum import StrEnum

    import tomllib
else:  # pragma: no cover - exercised by the suite's Python 3.9 run
    import tomli as tomllib

    class StrEnum(str, Enum):
        """An enum whose members are strings and print as their value (``enum.StrEnum``)."""

        __str__ = str.__str__
        __format__ = str.__format__


__all__ = ["StrEnum", "tomllib"]
