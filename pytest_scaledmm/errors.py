"""The base of every error pytest-scaledmm raises for its user to read: a bad matrix file, a
report it cannot read, a gate that cannot judge, a refused output. `except ScaledmmError`
catches them all; the CLI turns one into one line and exit status 2."""

from __future__ import annotations


class ScaledmmError(Exception):
    """An error with a message fit for the user: it names the file and the key at fault."""
