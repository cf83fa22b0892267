"""Hostile files for the trust-boundary tests: real files with one value more, whose unpickling runs code.

The code only appends a line to a marker file, so a test proves that nothing ran by the marker's absence. It calls
`builtins.exec`, which every process can import (a loader that resolves it runs the payload wherever it reads the file,
a launcher's worker or a trial included), and which no safe loader allows.
"""

import copy
import os
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import torch

from tests.helpers import ROOT
from tests.helpers.runs import LAUNCHER_VARIABLES

__all__ = [
    "PAYLOAD_KEY",
    "Payload",
    "assert_refused",
    "hostile_checkpoint",
    "hostile_pickle",
    "hostile_shards",
    "snapshot",
]

PAYLOAD_KEY = "_hostile_payload"


class Payload:
    """Unpickled, appends a line to `marker`."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return exec, (f"open({self.marker!r}, 'a').write('payload ran\\n')",)


def hostile_checkpoint(path: Path, marker: Path) -> Path:
    """Rewrite the real checkpoint file at `path` (a `.ckpt`, a sharded checkpoint's `meta.pt`) with the payload as
    one more key: the file still holds everything a loader wants of it. Returns `path`."""
    checkpoint = torch.load(path, map_location="cpu", weights_only=False)  # the test's own, trusted file
    torch.save({**checkpoint, PAYLOAD_KEY: Payload(marker)}, path)
    return path


def hostile_pickle(path: Path, marker: Path) -> Path:
    """Rewrite the plain pickle at `path` with the payload added (a dict gains a key, another object an attribute),
    so that it still holds what its reader wants; a `path` that does not exist becomes a pickle of the payload alone.
    Returns `path`."""
    path = Path(path)
    if path.exists():
        value = pickle.loads(path.read_bytes())  # the test's own, trusted file
        if isinstance(value, dict):
            value = {**value, PAYLOAD_KEY: Payload(marker)}
        else:
            value = copy.copy(value)
            vars(value)[PAYLOAD_KEY] = Payload(marker)
    else:
        value = Payload(marker)
    path.write_bytes(pickle.dumps(value))
    return path


def snapshot(*roots: Path) -> dict[str, tuple[int, int] | None]:
    """Every file under `roots` with its size and modification time, and every folder: equal snapshots mean nothing
    was written, not even an empty run folder."""
    return {
        str(path): (path.stat().st_size, path.stat().st_mtime_ns) if path.is_file() else None
        for root in roots
        if Path(root).exists()
        for path in [Path(root), *sorted(Path(root).rglob("*"))]
    }


def assert_refused(
    command: list[str],
    marker: Path,
    watched: list[Path],
    mentions: str,
    timeout: float = 300,
    environment: dict[str, str] | None = None,
) -> str:
    """`python COMMAND...` (run from the checkout, as a user starts it, with `environment` added) refuses a hostile
    file: exit 2 with one line on stderr that mentions `mentions`, the payload never ran (`marker` is absent), and no
    file under `watched` was added, changed or removed. Returns the line."""
    before = snapshot(*watched)
    inherited = {name: value for name, value in os.environ.items() if not LAUNCHER_VARIABLES.fullmatch(name)}
    result = subprocess.run(
        [sys.executable, *command],
        cwd=ROOT,
        env={**inherited, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore", **(environment or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert not Path(marker).exists(), f"the payload ran: {result.stderr[-2000:]}"
    assert result.returncode == 2, f"exit {result.returncode}: {result.stderr[-2000:]}"
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: "), result.stderr[-2000:]
    assert mentions in result.stderr, result.stderr
    assert snapshot(*watched) == before, "files were written"
    return result.stderr.strip()


def hostile_shards(path: Path, marker: Path) -> Path:
    """Rewrite the sharded checkpoint directory at `path` with its first optimizer's learning rate replaced by the
    payload: torch.distributed.checkpoint keeps such a value pickled in a shard file (`.distcp`), where its own load
    unpickles it in full. The index and `meta.pt` stay plain data. Returns `path`."""
    from torch.distributed.checkpoint import save
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    whole = path.with_name(f"{path.name}.whole.pt")
    dcp_to_torch_save(path, whole)  # the test's own, trusted directory
    state = torch.load(whole, weights_only=False)
    whole.unlink()
    state["optimizer_0"]["param_groups"][0]["lr"] = Payload(marker)
    for shard in path.glob("*.distcp"):
        shard.unlink()
    with warnings.catch_warnings():  # that it saves in one process, over a checkpoint: as meant
        warnings.simplefilter("ignore", UserWarning)
        save(state, checkpoint_id=path, no_dist=True)
    return path
