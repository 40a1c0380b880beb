"""The signal guard of a matrix run: SIGINT and SIGTERM from its start to its end.

The first signal ends the session as Ctrl-C does (SIGTERM as Terminated); later ones are noted,
never raised into the ending session, so that the run ends with exit 2 and a report that says it
was interrupted. Light on purpose: entry.py imports it in every pytest session.
"""

from __future__ import annotations

import atexit
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from types import FrameType

    from .session import MatrixSession

    PythonHandler = Callable[[int, FrameType | None], object]
    # What signal.signal returns: a Python handler, SIG_DFL or SIG_IGN, or None (set outside Python).
    Handler = PythonHandler | int | signal.Handlers | None

TERMINATED = "terminated (SIGTERM)"


class Terminated(KeyboardInterrupt):
    """SIGTERM during a matrix run: it ends the session as Ctrl-C does, so that the report is
    written and says why it is incomplete."""


ENDING_GRACE_S = 5.0  # how long after a session a signal ended a further SIGINT is ignored
SIGNALS_KEY = pytest.StashKey["SignalGuard"]()


class SignalGuard:
    """SIGINT and SIGTERM from the start of a matrix run to its end. The first ends the session
    as Ctrl-C does (SIGTERM as Terminated); any later one, whatever the moment (a CI cancel or
    `timeout -s INT` sends one to pytest, then one to its process group), is noted and never
    raised into the ending session, so that the run ends with exit 2, its report incomplete and
    "interrupted", not with a traceback per signal. Both are noted so that a kernel swallowing
    the exception cannot hide them."""

    def __init__(self, deferred: bool = False) -> None:
        self.old: dict[int, Handler] = {}
        self.seen: str | None = None  # the signal that ends the session; SIGTERM wins
        self.state: MatrixSession | None = None
        self.deferred = deferred  # before pytest's session: noted only, raised by `arm`

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for name in ("SIGTERM", "SIGINT"):
            number = getattr(signal, name, None)
            if number is not None:
                self.old[number] = signal.signal(number, self.handle)

    @staticmethod
    def reason(name: str) -> str:
        return TERMINATED if name == "SIGTERM" else "interrupted (SIGINT)"

    def handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        old = self.old.get(signum)
        if name == "SIGINT" and old == signal.SIG_IGN:
            return None
        first = self.seen is None
        if name == "SIGTERM" or first:
            self.seen = name
        if self.state is not None:
            self.state.note_signal(name)
            self.state.interrupted(self.reason(name))
        if not first or self.deferred:
            return None
        if name == "SIGTERM":
            raise Terminated()
        if callable(old) and old is not signal.default_int_handler:
            old(signum, frame)
            return None
        raise KeyboardInterrupt()

    def arm(self, deferred: bool | None = None) -> None:
        """At a safe point of pytest's session (a hook of this plugin, not inside torch's
        import or the generation's drawing, where pytest cannot show the traceback): a signal
        noted before ends the run now. `deferred` False: later ones are raised where they land."""
        if deferred is not None:
            self.deferred = deferred
        if self.seen == "SIGTERM":
            raise Terminated()
        if self.seen is not None:
            raise KeyboardInterrupt()

    def attach(self, state: MatrixSession) -> None:
        """From here on signals are noted in `state`, one that came before too."""
        self.state = state
        if self.seen is not None:
            state.note_signal(self.seen)
            state.interrupted(self.reason(self.seen))

    def restore(self) -> None:
        ending = self.seen is not None and self.old
        for number, old in self.old.items():
            old = old if old is not None else signal.SIG_DFL
            if ending and (old is signal.SIG_DFL or old is signal.default_int_handler):
                # The session ended on a signal: one more in the last moments of the process
                # would be a traceback or a kill after the report; it has nothing left to stop.
                then = None if old is signal.SIG_DFL else signal.default_int_handler
                old = _ending_handler(then, time.monotonic() + ENDING_GRACE_S)
            signal.signal(number, old)
        self.old = {}
        if ending:
            atexit.register(_ignore_signals_at_exit)


def _ending_handler(then: PythonHandler | None, deadline: float) -> PythonHandler:
    """A signal just after a session that a signal ended: the process is exiting, nothing is
    left to interrupt. After the grace (in-process, as under pytester) it acts as `then` (None:
    the default action, SIG_DFL)."""

    def handler(signum: int, frame: FrameType | None) -> None:
        if time.monotonic() < deadline:
            return
        if then is None:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
        else:
            then(signum, frame)

    return handler


def _ignore_signals_at_exit() -> None:
    # The interpreter drops Python handlers as it finalises: a signal then would kill it.
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, signal.SIG_IGN)
