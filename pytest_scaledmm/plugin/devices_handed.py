"""The run's GPUs, asked of torch once by the controller and handed to each xdist worker in its
workerinput: a worker then never initialises CUDA (about a third of a second and a context's
memory each, fourteen times over on one GPU host); only the isolated children that run the cases
do. Without xdist the one process asks torch itself, as before."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from xdist.workermanage import WorkerController

WORKERINPUT_KEY = "scaledmm_devices"


class DevicesHandOver:
    """Registered on the xdist controller: puts the described devices in each worker's input."""

    def __init__(self, described: dict | None):
        self.described = described

    def pytest_configure_node(self, node: WorkerController) -> None:
        node.workerinput[WORKERINPUT_KEY] = self.described


def hand_devices_to_workers(config: pytest.Config, requested_device: str) -> None:
    """On the controller of an xdist run: describe the devices now and hand them to each worker."""
    # xdist's hooks are known only where xdist is loaded; without a --dist mode no worker starts.
    if not config.pluginmanager.hasplugin("xdist") or getattr(config.option, "dist", "no") == "no":
        return
    from ..execution.device import described_devices  # noqa: PLC0415  lazy: imports torch

    config.pluginmanager.register(DevicesHandOver(described_devices(requested_device)), "scaledmm-devices")


def take_devices_from_controller(config: pytest.Config) -> None:
    """On a worker: answer device questions from what the controller handed over, if it did."""
    from ..execution.device import take_described_devices  # noqa: PLC0415  lazy: imports torch

    take_described_devices(getattr(config, "workerinput", {}).get(WORKERINPUT_KEY))
