"""The CI step summary: when `$GITHUB_STEP_SUMMARY` names a file, Markdown is appended to it
(never truncated: earlier steps' summaries stay). A file that cannot be written costs one
warning line and nothing else: the run's or the gate's verdict stands as it is."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from .report_path import is_report_file

ENV = "GITHUB_STEP_SUMMARY"


def step_summary_path(environ: Mapping[str, str] = os.environ) -> Path | None:
    value = environ.get(ENV, "").strip()
    return Path(value) if value else None


def same_file(a, b) -> bool:
    """Whether two paths name one file (an existing one compared by inode, else by path)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def _not_appendable(mode: int) -> str | None:
    # A FIFO would block the run until a reader comes (or forever); a regular file or a
    # character device (/dev/null, a terminal) takes the text at once.
    if stat.S_ISREG(mode) or stat.S_ISCHR(mode):
        return None
    kind = (
        "a directory"
        if stat.S_ISDIR(mode)
        else "a FIFO"
        if stat.S_ISFIFO(mode)
        else "a socket"
        if stat.S_ISSOCK(mode)
        else "not a regular file"
    )
    return f"it is {kind}, not a file to append to"


def append_markdown(path, markdown: str) -> None:
    """Append `markdown` (ending in a line break, after a blank line) to `path`, created 0644
    less the umask when it is not there. Never waits on a FIFO. Raises OSError."""
    try:
        problem = _not_appendable(os.stat(path).st_mode)
    except FileNotFoundError:
        problem = None
    if problem:
        raise OSError(problem)

    if is_report_file(Path(path)):  # Markdown appended to a report would make it unreadable
        raise OSError("it is a pytest-scaledmm report, never appended to")
    # Non-blocking open: a FIFO put there since the check fails at once instead of hanging.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o644)
    try:
        problem = _not_appendable(os.fstat(fd).st_mode)
        if problem:
            raise OSError(problem)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "a", encoding="utf-8", errors="backslashreplace") as handle:  # as files.py writes
        handle.write("\n" + markdown.rstrip("\n") + "\n")


def append_step_summary(markdown: str, environ: Mapping[str, str] = os.environ) -> str | None:
    """Append to the step summary when there is one. Returns a one-line warning when it could
    not be written, else None."""
    path = step_summary_path(environ)
    if path is None:
        return None
    try:
        append_markdown(path, markdown)
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return f"warning: ${ENV}: cannot append to {path}: {reason}"
    return None
