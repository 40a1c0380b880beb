"""`<report>.lock` beside a report: a second run writing the same report at the same time is
refused at once instead of clobbering the first.

The lock is filelock's `FileLock`: a flock on the lock file, which the kernel drops when its run
dies (in whatever container or PID namespace it ran), so a lock file left by a killed run is
simply taken; its run removes it on release. Where the filesystem has no flock (some NFS setups,
FUSE), filelock's soft lock, which names its run (pid, host, PID namespace, start time) and is
taken over once that run is gone.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from filelock import FileLock, Timeout

from ..errors import ScaledmmError


class ReportLocked(ScaledmmError):
    """Another live run holds the report's lock."""


class ReportLock:
    def __init__(self, report_path: Path):
        self.path = Path(f"{report_path}.lock")
        # Never waits: a report being written is refused, not queued for. One hold per process.
        self._lock = FileLock(self.path, blocking=False, thread_local=False)
        self._pid = 0
        self._held_inode: tuple[int, int] | None = None  # the flocked file's, to remove it on release

    @property
    def held(self) -> bool:
        return self._pid == os.getpid() and self._lock.is_locked

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
        """Raises ReportLocked when another live run holds it, or OSError."""
        self._refuse_odd_path()
        try:
            self._lock.acquire()
        except Timeout:
            raise ReportLocked(f"is being written by another run; lock file {self.path}") from None
        self._pid = os.getpid()
        self._held_inode = None if self._soft() else _inode(self.path)

    def _soft(self) -> bool:
        """Whether filelock fell back to its soft lock (a filesystem without flock)."""
        try:
            self._lock.pid  # noqa: B018 (the soft lock's marker: AttributeError for a flock)
        except AttributeError:
            return False
        return True

    def release(self) -> None:
        """Quietly, and only in the process that acquired it (not a forked child): a lock that
        cannot be removed is free once this process ends, and the next run takes it."""
        if not self.held:
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
