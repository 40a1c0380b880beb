"""How every file this package writes for a reader lands on disk: whole or not at all (a
temporary file beside the target, then a rename), with one mode whatever the writer.

Reports, Markdown, HTML and index files are 0644, repro scripts 0755 (they start with a
shebang), both less the umask: readable by the CI user that uploads them, never group- or
world-writable (as `write_text` would leave them under a umask of 002).
"""

from __future__ import annotations

import errno
import os
import stat
import sys
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


def _own_output(st: os.stat_result) -> int | None:
    """The descriptor (1 or 2) of this process's stdout or stderr that `st` is, else None."""
    for fd in (1, 2):
        try:
            own = os.fstat(fd)
        except OSError:
            continue
        if (own.st_dev, own.st_ino) == (st.st_dev, st.st_ino):
            return fd
    return None


def stream_target(path) -> bool:
    """Whether `path` (its links followed) is written in place, never read, replaced or
    truncated: a character device (/dev/null, a terminal) or this process's own output
    (/dev/stdout in a CI step log, whether that is a pipe or a file)."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISCHR(st.st_mode) or _own_output(st) is not None


def not_a_file(path) -> str | None:
    """What `path` is when a page can be neither written to it as a file nor in place (a FIFO, a
    socket, a directory, a block device, a link to nothing), else None."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "a link to nothing" if os.path.lexists(path) else None
    except OSError as exc:
        return f"not to be looked at ({exc.strerror or exc})"
    if stat.S_ISREG(mode) or stream_target(path):
        return None
    for test, kind in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "not a regular file"


def write_problem(path, directory: bool = False) -> str | None:
    """Why a file (with `directory`, a directory to hold files) could not be written at `path`
    later in the run, or None. Nothing is created: the writer makes the missing directories, so
    the nearest one that is there gets a probe file, made and removed."""
    path = Path(path)
    if os.path.lexists(path):
        if directory and not path.is_dir():
            return "it is there and is not a directory"
        if not directory and path.is_dir():
            return "it is a directory"
        if not directory and not path.exists():
            return "it is a link to nothing"
        if not directory and not path.is_file():
            return "it is not a regular file (a pipe or a device would block or refuse the write)"
    there = path if directory else path.parent
    while not os.path.lexists(there) and there != there.parent:
        there = there.parent
    if not there.is_dir():
        return f"{there} is not a directory"
    try:
        fd, probe = tempfile.mkstemp(prefix=".scaledmm-probe.", dir=there)
    except OSError as exc:
        return f"cannot write in {there}: {exc.strerror or exc}"
    os.close(fd)
    os.unlink(probe)
    return None


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]


def write_stream(path, text: str) -> None:
    """Write `text` to a stream_target in place. This process's own output is written through
    its own descriptor, after what was printed before (a file that stdout goes to is written at
    its offset, not over it); a device is opened without waiting. Raises OSError."""
    data = (text if text.endswith("\n") else text + "\n").encode("utf-8", "backslashreplace")  # as files are
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    own = _own_output(os.stat(path))
    if own is not None:
        _write_all(own, data)
        return
    fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISCHR(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "it is no longer a device or this command's output")
        os.set_blocking(fd, True)
        _write_all(fd, data)
    finally:
        os.close(fd)
