"""Kernel packs: real libraries' entry points as named kernels a matrix lists in one word.

Each pack maps names to declarations (as a matrix's `kernels:` entry: `impl`, `prepare` or
`module` references into the pack's module, and what the library documents it supports). A pack
never imports its library when the matrix is read; a case of a kernel whose library is missing
or too old is skipped with the install command (pack_unavailable).
"""

from __future__ import annotations

from . import torchao

PACK_KERNELS: dict[str, dict] = {**torchao.KERNELS}
_PACKS = {name: torchao for name in torchao.KERNELS}
# Each pack's library (its top-level module) -> the pytest-scaledmm extra that installs it, and
# the requirement the pack checks for (where the package's metadata is not there to read).
PACK_EXTRAS: dict[str, tuple[str, str]] = {
    torchao.LIBRARY: (torchao.EXTRA, f"{torchao.LIBRARY}>={torchao.MIN_VERSION}"),
}


def pack_library(name: str) -> str | None:
    """The library (top-level module) a packed kernel runs, or None for any other name."""
    pack = _PACKS.get(name)
    return pack.LIBRARY if pack is not None else None


def pack_unavailable(name: str) -> str | None:
    """Why a packed kernel cannot run here (its library missing or too old), or None."""
    pack = _PACKS.get(name)
    return pack.unavailable() if pack is not None else None


def pack_notes(names) -> list[str]:
    """One line per pack of these kernels whose library imports here with something to say
    (torchao: its C extensions that did not load); the library is imported to know."""
    packs = dict.fromkeys(_PACKS[name] for name in names if name in _PACKS)
    return [note for pack in packs if pack.unavailable() is None for note in [pack.load_note()] if note]
