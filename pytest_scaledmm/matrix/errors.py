"""The one error of the matrix layer: a matrix, included or corpus file that cannot be used."""

from __future__ import annotations

from pathlib import Path

from ..errors import ScaledmmError


class MatrixError(ScaledmmError):
    """A matrix file that cannot be used; the message names the file and the key."""

    def __init__(self, path: Path | str, key: str, message: str):
        self.path, self.key, self.message = str(path), key, message
        where = f"{self.path}: key '{key}'" if key else self.path
        super().__init__(f"{where}: {message}")
