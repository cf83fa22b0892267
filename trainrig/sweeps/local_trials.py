"""Trials as processes on this machine, the placement a sweep uses when nothing else is asked; its interface is the
one every placement (trainrig/sweeps/placements/) follows. Plain Python, as the driver imports it without torch."""

import subprocess
from pathlib import Path

from trainrig.sweeps import trials
from trainrig.sweeps.channel import DriverSide

__all__ = ["LocalPlacement"]


class LocalPlacement:
    """Where trials run when nothing else is asked: on this machine, reporting through files in their directory.

    `take` gives a starting trial the launcher arguments that place it (none here), `give_back` returns them when it
    ends; other placements hand out machines or workers this way, with channels of their own. `start` runs a trial
    and returns what the driver polls (`poll()`: None while it runs, then its exit status), `stop` asks it to
    checkpoint and stop; `on_this_machine`: whether rank 0 runs where the driver's process id means something.
    """

    on_this_machine = True

    def __init__(self, extra_arguments: tuple[str, ...] = ()):
        self.extra_arguments = list(extra_arguments)

    def start(self, cli: Path, arguments: list[str], directory: Path, port: int) -> subprocess.Popen:
        trials.wait_for_earlier_process(directory)
        return trials.start(cli, arguments, directory, port)

    def stop(self, process: subprocess.Popen) -> None:
        trials.stop(process)

    def take(self) -> list[str]:
        return list(self.extra_arguments)

    def give_back(self, arguments: list[str]) -> None:
        pass

    def channel(self, name: str, directory: Path) -> DriverSide:
        return DriverSide(directory / "channel")
