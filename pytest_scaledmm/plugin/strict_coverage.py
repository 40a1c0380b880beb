"""What a limit the matrix sets keeps from a checked case (generation's `not_proven`), as summary
lines; --scaledmm-strict-coverage turns it into a failed run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def not_proven_lines(generation: Mapping[str, Any]) -> list[str]:
    """One line per kernel whose space a limit cut."""
    return [
        f"not proven: kernel {kernel}: {'; '.join(items)}"
        for kernel, items in (generation.get("not_proven") or {}).items()
        if items
    ]


def strict_coverage_failure(generation: Mapping[str, Any]) -> str | None:
    """The line a strict-coverage run fails with, or None when nothing is unproven."""
    count = sum(len(items) for items in (generation.get("not_proven") or {}).values())
    if not count:
        return None
    return (
        f"--scaledmm-strict-coverage: {count} shape class(es) not proven (the 'not proven' lines):"
        " raise the matrix's `limits:` or run without the option"
    )
