"""The one rule for a RuntimeClass name or handler: a lowercase RFC 1123 DNS label.

Its own small module, since every ``--runtime-name`` is checked by it while the command line is
parsed (argparse checks the default too), before anything else is imported.
"""

from __future__ import annotations

import re

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_LABEL_MAX = 63


def is_dns_label(value: object) -> bool:
    """True for a lowercase RFC 1123 label of at most 63 characters."""
    return isinstance(value, str) and len(value) <= DNS_LABEL_MAX and bool(DNS_LABEL.match(value))


def label_problem(value: object) -> str | None:
    """Why ``value`` cannot be a RuntimeClass name or handler, or None when it can.

    The one rule for runtime names: ``setup`` and ``configure`` refuse a ``--runtime-name`` by
    it (the name becomes the handler) and ``doctor`` reports a RuntimeClass by it.
    """
    if is_dns_label(value):
        return None
    return (f"{value!r} is not a lowercase DNS label (a-z, 0-9, '-', at most {DNS_LABEL_MAX} "
            "characters)")
