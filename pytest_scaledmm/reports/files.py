"""How every file this package writes for a reader lands on disk: whole or not at all (a
temporary file beside the target, then a rename), with one mode whatever the writer.

Reports, Markdown, HTML and index files are 0644, repro scripts 0755 (they start with a
shebang), both less the umask: readable by the CI user that uploads them, never group- or
world-writable (as `write_text` would leave them under a umask of 002).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

DATA_MODE = 0o644
SCRIPT_MODE = 0o755


def current_umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def set_mode(name, mode: int = DATA_MODE) -> None:
    """`mode` less the umask (mkstemp creates 0600, open() 0666 less the umask)."""
    os.chmod(name, mode & ~current_umask())


def write_text_atomic(path, text: str, mode: int = DATA_MODE) -> Path:
    """Write `text` to `path` through a temporary file beside it and a rename; the parent
    directory is created. Raises OSError."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # A lone surrogate (a file name that is not UTF-8, a \udcff escape in a report) is written
        # escaped, as the console script prints it: never an error halfway through a page.
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        set_mode(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path
