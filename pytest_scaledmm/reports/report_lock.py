"""`<report>.lock` beside a report: a second run writing the same report at the same time is
refused at once instead of clobbering the first.

The lock is filelock's: where the report's filesystem has flock, a `FileLock` whose flock the
kernel drops when its run dies (in whatever container or PID namespace it ran), so a lock file
left by a killed run is simply taken, and its run removes it on release. Where it has none (NFS
without a lock daemon, some FUSE mounts), a `SoftFileLock`, which names its run (pid, host, PID
namespace, start time) and is taken over once that run is gone on this host; one it cannot judge
(another host's, an empty one) is refused with what it names.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import tempfile
import warnings
from pathlib import Path

from filelock import BaseFileLock, FileLock, SoftFileLock, Timeout

from ..errors import ScaledmmError

# What flock(2) raises where the filesystem has no locks.
_NO_FLOCK = frozenset({errno.ENOSYS, errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL})
# A contender that opened the lock file just before its holder removed it loses that race once.
_ATTEMPTS = 3


class ReportLocked(ScaledmmError):
    """Another live run holds the report's lock."""


def flock_works(directory: Path) -> bool:
    """Whether files in `directory` take a flock (probed on a temporary file there)."""
    fd, probe = tempfile.mkstemp(prefix=".scaledmm-flock-probe-", dir=directory)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in _NO_FLOCK:
            return False
        raise
    finally:
        os.close(fd)
        os.unlink(probe)
    return True


class ReportLock:
    def __init__(self, report_path: Path):
        self.path = Path(f"{report_path}.lock")
        self._lock: BaseFileLock | None = None
        self._pid = 0
        self._held_inode: tuple[int, int] | None = None  # the flocked file's, to remove it on release

    @property
    def held(self) -> bool:
        return self._lock is not None and self._pid == os.getpid() and self._lock.is_locked

    def _refuse_odd_path(self) -> None:
        """A lock path that is not a regular file (a directory, a link) is never replaced."""
        try:
            mode = os.lstat(self.path).st_mode
        except FileNotFoundError:
            return
        if stat.S_ISREG(mode):
            return
        kind = "a directory" if stat.S_ISDIR(mode) else "a link" if stat.S_ISLNK(mode) else "not a regular file"
        raise OSError(errno.EEXIST, f"its lock path {self.path} is {kind}: remove it")

    def acquire(self) -> None:
        """Raises ReportLocked when another run holds it (or may), or OSError."""
        self._refuse_odd_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        soft = not flock_works(self.path.parent)
        # Never waits: a report being written is refused, not queued for. One hold per process.
        lock = (SoftFileLock if soft else FileLock)(self.path, blocking=False, thread_local=False)
        for attempt in range(_ATTEMPTS):
            before = _inode(self.path)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)  # filelock's notes, not the user's
                    lock.acquire()
            except Timeout as exc:
                if attempt + 1 < _ATTEMPTS and before is not None and _inode(self.path) != before:
                    continue  # its holder released it meanwhile
                raise ReportLocked(self._refusal(exc, soft)) from None
            except PermissionError as exc:
                raise OSError(
                    exc.errno,
                    f"cannot open its lock file {self.path} ({exc.strerror}): another user's run holds"
                    " it or left it; remove it if no run is writing the report",
                ) from None
            break
        self._lock, self._pid = lock, os.getpid()
        self._held_inode = None if soft else _inode(self.path)

    def _refusal(self, exc: Timeout, soft: bool) -> str:
        text = f"is being written by another run; lock file {self.path}"
        if not soft:
            return text  # a held flock: its run is alive
        # A soft lock this host cannot judge (another host's, an empty one): say what it names.
        held_by = str(exc).partition(" could not be acquired. ")[2].rstrip(".")
        return f"{text} ({held_by + ': ' if held_by else ''}remove it if no run is writing the report)"

    def release(self) -> None:
        """Quietly, and only in the process that acquired it (not a forked child): a lock that
        cannot be removed is free once this process ends, and the next run takes it."""
        if self._lock is None or not self.held:
            return
        self._pid = 0
        try:
            # filelock leaves a flocked file in place; removed while still held, as its peers
            # expect (one that opened it before flocks an unlinked file and tries again).
            if self._held_inode is not None and _inode(self.path) == self._held_inode:
                self.path.unlink()
        except OSError:
            pass
        try:
            self._lock.release()
        except OSError:
            pass


def _inode(path: Path) -> tuple[int, int] | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino
