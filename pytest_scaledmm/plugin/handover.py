"""What the controller of an xdist run hands each worker in its workerinput, so that the work is
done once per run, not once per worker:
- the GPUs, asked of torch once: a worker then never initialises CUDA (about a third of a second
  and a context's memory each, fourteen times over on one GPU host); only the isolated children
  that run the cases do;
- the directory its generated cases are left in (generated_cases.py): the controller generates
  them while the workers boot, and a worker reads them instead of generating them again.
Without xdist the one process does both itself, as before."""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from xdist.workermanage import WorkerController

    from .session import MatrixSession

DEVICES_KEY = "scaledmm_devices"
CASES_DIR_KEY = "scaledmm_cases_dir"


class WorkerHandOver:
    """Registered on the xdist controller of a matrix run."""

    def __init__(self, state: MatrixSession, described: dict | None):
        self.state = state
        self.described = described

    def pytest_configure_node(self, node: WorkerController) -> None:
        node.workerinput[DEVICES_KEY] = self.described
        node.workerinput[CASES_DIR_KEY] = self.state.cases_dir

    @pytest.hookimpl(wrapper=True)
    def pytest_sessionstart(self, session: pytest.Session) -> Generator[None, object, object]:
        result = yield  # xdist has started the workers: generate while they boot
        self.state.pregenerate()
        return result


def hand_over_to_workers(config: pytest.Config, state: MatrixSession) -> WorkerHandOver | None:
    """On the controller of an xdist run: describe the devices now and make the directory for
    the cases; the plugin that hands both to each worker (None without xdist workers)."""
    # xdist's hooks are known only where xdist is loaded; without a --dist mode no worker starts.
    if not config.pluginmanager.hasplugin("xdist") or getattr(config.option, "dist", "no") == "no":
        return None
    from ..execution.device import described_devices  # noqa: PLC0415  lazy: imports torch

    state.share_generated_cases()
    return WorkerHandOver(state, described_devices(state.settings.device))


def take_hand_over(config: pytest.Config, state: MatrixSession | None = None) -> None:
    """On a worker: answer device questions from what the controller handed over, and read the
    cases where it leaves them, if it did."""
    from ..execution.device import take_described_devices  # noqa: PLC0415  lazy: imports torch

    given = getattr(config, "workerinput", {})
    take_described_devices(given.get(DEVICES_KEY))
    if state is not None:
        state.cases_dir = given.get(CASES_DIR_KEY)
