"""What a run leaves in its run directory, in a form two runs can be compared by: a stopped and resumed run must
leave what the uninterrupted one does.

Compared: the files (names relative to the run directory), every metrics row with every column (the measured timings
by presence), and the final `last.ckpt` (a sharded one as one file): weights, optimizer and scheduler states, loop
progress, and each callback's state with paths made relative to the run directory (the best checkpoint's name and
score, the kept top-k, the last path).
"""

import csv
import math
from pathlib import Path

import torch

from trainrig.resume.sharded import consolidated, is_sharded_checkpoint

__all__ = ["RunDirectory", "assert_same_run_directory", "assert_same_weights", "final_weights"]

# Written beside the checkpoints of a run only while it runs (files, or a sharded checkpoint's directories); they
# never stay.
TRANSIENT_SUFFIXES = (".partial", ".old")
# The columns of measured timings, compared by presence only.
TIMING_PREFIX = "throughput/"
# ModelCheckpoint's score of its latest save in this process: Lightning does not restore it, and no file shows it.
PROCESS_LOCAL_CALLBACK_STATE = ("current_score",)


class RunDirectory:
    def __init__(self, path: Path):
        self.path = Path(path)

    @classmethod
    def only_one_under(cls, root: Path) -> "RunDirectory":
        """The single run directory below `root` (the folder holding metrics.csv, or the checkpoints' parent)."""
        runs = {path.parent for path in Path(root).rglob("metrics.csv")} or {
            path.parent.parent for path in Path(root).rglob("last.ckpt")
        }
        assert len(runs) == 1, f"expected one run directory under {root}, found {sorted(map(str, runs))}"
        return cls(runs.pop())

    def files(self) -> list[str]:
        return sorted(
            path.relative_to(self.path).as_posix()
            for path in self.path.rglob("*")
            if path.is_file() and not any(part.endswith(TRANSIENT_SUFFIXES) for part in path.parts)
        )

    def metrics_rows(self) -> list[dict[str, str]]:
        """The rows, each timing a run measures (`throughput/...`, trainrig/monitoring/throughput.py) as whether the
        row has it: its value differs from run to run by nature."""
        with (self.path / "metrics.csv").open(newline="") as handle:
            return [
                {
                    name: ("(measured)" if value and name.startswith(TIMING_PREFIX) else value)
                    for name, value in row.items()
                }
                for row in csv.DictReader(handle)
            ]

    def checkpoint(self, name: str = "last.ckpt") -> dict:
        """A sharded checkpoint (a directory) as the single file it consolidates into."""
        (path,) = self.path.rglob(name)
        if is_sharded_checkpoint(path):
            return consolidated(path)
        return torch.load(path, map_location="cpu", weights_only=False)

    def callback_states(self, checkpoint: dict) -> dict:
        """Callback states with absolute paths replaced by paths relative to this run directory."""
        return {
            key: {
                name: self._relative(value) for name, value in state.items() if name not in PROCESS_LOCAL_CALLBACK_STATE
            }
            for key, state in checkpoint.get("callbacks", {}).items()
        }

    def _relative(self, value):
        if isinstance(value, dict):
            return {self._relative(key): self._relative(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self._relative(item) for item in value)
        if isinstance(value, str) and f"/{self.path.name}/" in value:
            # Relative to the run folder, wherever the process that wrote it ran (a launcher's worker, say).
            return value.split(f"/{self.path.name}/", 1)[1]
        if torch.is_tensor(value):
            return value.tolist()
        return value


def assert_same_run_directory(
    resumed: RunDirectory, uninterrupted: RunDirectory, context: str = "", extra_files: tuple[str, ...] = ()
) -> None:
    """Every difference a user could see, named; weights bit for bit.

    `extra_files`: what the resumed run may hold besides, for a run that had finished before it was extended (the
    files its end wrote, and the config of the command that extended it).
    """
    prefix = f"{context}: " if context else ""
    files = [name for name in resumed.files() if name not in extra_files]
    assert files == uninterrupted.files(), f"{prefix}files differ: {sorted(set(files) ^ set(uninterrupted.files()))}"
    resumed_rows, uninterrupted_rows = resumed.metrics_rows(), uninterrupted.metrics_rows()
    assert [row.get("step") for row in resumed_rows] == [row.get("step") for row in uninterrupted_rows], (
        f"{prefix}metrics.csv rows are not the same steps"
    )
    for index, (mine, theirs) in enumerate(zip(resumed_rows, uninterrupted_rows)):
        assert mine == theirs, f"{prefix}metrics.csv row {index} differs: {_difference(mine, theirs)}"

    mine, theirs = resumed.checkpoint(), uninterrupted.checkpoint()
    for key in ("epoch", "global_step"):
        assert mine[key] == theirs[key], f"{prefix}{key} {mine[key]} != {theirs[key]}"
    assert_same_weights(mine["state_dict"], theirs["state_dict"], context)
    assert _plain(mine["optimizer_states"]) == _plain(theirs["optimizer_states"]), f"{prefix}optimizer states differ"
    assert _plain(mine["lr_schedulers"]) == _plain(theirs["lr_schedulers"]), f"{prefix}scheduler states differ"
    assert mine["loops"] == theirs["loops"] or _plain(mine["loops"]) == _plain(theirs["loops"]), f"{prefix}loops differ"
    resumed_callbacks, uninterrupted_callbacks = resumed.callback_states(mine), uninterrupted.callback_states(theirs)
    assert resumed_callbacks.keys() == uninterrupted_callbacks.keys(), f"{prefix}callbacks differ"
    for key in uninterrupted_callbacks:
        assert _plain(resumed_callbacks[key]) == _plain(uninterrupted_callbacks[key]), (
            f"{prefix}state of {key} differs: {resumed_callbacks[key]} != {uninterrupted_callbacks[key]}"
        )


def final_weights(log_dir: Path) -> dict[str, torch.Tensor]:
    """The weights of the one `last.ckpt` under `log_dir`."""
    (checkpoint,) = Path(log_dir).rglob("last.ckpt")
    return torch.load(checkpoint, map_location="cpu", weights_only=False)["state_dict"]


def assert_same_weights(mine: dict[str, torch.Tensor], theirs: dict[str, torch.Tensor], context: str = "") -> None:
    """The same parameter names, and every tensor bit for bit; the ones that differ named."""
    prefix = f"{context}: " if context else ""
    assert mine.keys() == theirs.keys(), f"{prefix}parameter names differ: {sorted(mine.keys() ^ theirs.keys())}"
    different = [name for name in theirs if not torch.equal(mine[name], theirs[name])]
    assert not different, f"{prefix}weights differ: {different}"


def _plain(value):
    """Nested values with tensors as lists, so that == compares them exactly (NaN equal to NaN)."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if torch.is_tensor(value):
        return _plain(value.tolist()) if value.dim() else _plain(value.item())
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return value


def _difference(mine: dict, theirs: dict) -> dict:
    return {
        key: (mine.get(key), theirs.get(key))
        for key in sorted(mine.keys() | theirs.keys())
        if mine.get(key) != theirs.get(key)
    }
