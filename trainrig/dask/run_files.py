"""The run directory on the client's machine: the checkpoint the run starts from, the checkpoints rank 0 sends while
it trains, and the files rank 0 returns at the end."""

import csv
import io
import logging
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from distributed import Client, Event, Queue

from trainrig.dask.cluster import CLUSTER_TIMEOUT_S, POLL_S, scheduler_workers
from trainrig.dask.description import RunDescription
from trainrig.dask.results_to_client import PIECE_BYTES, SentFile, close_transfer, read_piece
from trainrig.resume.atomic_io import _replaced_atomically, write_atomically
from trainrig.resume.checkpoint import keep_as_previous
from trainrig.resume.csv_logger import drop_rows_from_step
from trainrig.resume.latest import checkpoint_candidates, first_usable, names_a_file
from trainrig.resume.run_directory import CONFIG_FILE, METRICS_FILE, SAVED_CONFIG, config_file_to_write

log = logging.getLogger("trainrig.dask")


def starting_checkpoint(description: RunDescription) -> bytes | str | None:
    """Where the first attempt resumes from: the --ckpt_path itself where the ranks read the shared checkpoint
    directory, else its bytes when it is a file on this machine, which the workers may not see; None leaves the path
    to them."""
    ckpt_path = description.ckpt_path
    if description.shared_dir is not None:
        return ckpt_path
    if not names_a_file(ckpt_path) or not Path(ckpt_path).is_file():
        return None
    return Path(ckpt_path).read_bytes()


class CheckpointReceiver:
    """Stores what rank 0 sends while it trains, under the client's output root as rank 0 has it: each checkpoint as
    it is written, and with it the attempt's metrics so far, added to the rows the run had before the attempt."""

    def __init__(self, client: Client, output_root: Path, shared_dir: Path | None = None):
        """
        Args:
            shared_dir: the `--dask.checkpoint_dir` the ranks write their checkpoints to; then only metrics are sent.
        """
        self.queue_name, self.output_root = f"lightning-dask-files-{uuid.uuid4().hex}", output_root
        self.shared_dir = shared_dir
        self._client, self._queue = client, Queue(self.queue_name, client=client)
        self.checkpoints: list[Path] = []
        self.metrics_bases: dict[Path, str | None] = {}  # metrics file -> its text before this attempt

    def receive(self) -> None:
        while self._queue.qsize():
            # An item is there (qsize): the get is one answer of the scheduler's, which the timeout bounds.
            sent = self._queue.get(timeout=CLUSTER_TIMEOUT_S)
            path = self.output_root / sent.path
            if sent.removed:
                path.unlink(missing_ok=True)
                self.checkpoints = [kept for kept in self.checkpoints if kept != path]
            elif sent.holder is not None:  # a checkpoint, which rank 0's worker holds for this client to read
                if not store_checkpoint(path, pieces(self._client, sent)):
                    continue  # lost with that worker
                self.checkpoints.append(path)
                Event(sent.stored_event, client=self._client).set()
            else:
                if path not in self.metrics_bases:
                    self.metrics_bases[path] = path.read_text() if path.is_file() else None
                write_atomically(path, combined_metrics(self.metrics_bases[path], sent.data).encode())

    def resume_point(self, fallback: bytes | str | None) -> tuple[bytes | str | None, int | None]:
        """The newest usable checkpoint (its bytes, or its path in the shared directory, and its step), after dropping
        the metrics rows logged from its step on, which the restart logs again; else `fallback`, the checkpoint the
        attempt started from."""
        self.receive()
        directory = self.shared_dir or (self.checkpoints[-1].parent if self.checkpoints else None)
        checkpoint, progress = newest_checkpoint(directory)
        if checkpoint is None:
            return fallback, None
        for metrics in self.metrics_bases:
            drop_rows_from_step(metrics, progress["first_logged_step"])
        return (checkpoint if self.shared_dir else Path(checkpoint).read_bytes()), progress["global_step"]


class LostWithItsWorker(Exception):
    """The worker that held a checkpoint is gone before the client had all of it."""


def pieces(client: Client, sent: SentFile) -> Iterator[bytes]:
    """The checkpoint `sent` names, read from the worker that holds it in pieces of `PIECE_BYTES` (see
    `results_to_client.CheckpointsToClient`), then let go of there; LostWithItsWorker once that worker is gone.

    Each piece is one request, answered within the time the worker takes to read and send a few megabytes: no clock
    bounds the whole file, which a loaded machine may take minutes to send. (Dask's `Future.result(timeout=...)`
    cancels the fetch in flight when it times out: polled so, a file that takes longer than the poll to send was
    fetched again and again, never whole.)"""
    for offset in range(0, sent.size, PIECE_BYTES):
        yield piece(client, sent, offset)
    try:
        client.run(close_transfer, sent.transfer, workers=[sent.holder])
    except OSError:
        pass  # the worker is gone, and the file with it


def piece(client: Client, sent: SentFile, offset: int) -> bytes:
    """One piece of `sent` at `offset`, asked for again while its worker is still there to answer."""
    while True:
        if sent.holder not in scheduler_workers(client):
            raise LostWithItsWorker(sent.path)
        try:
            data = client.run(read_piece, sent.transfer, offset, PIECE_BYTES, workers=[sent.holder])[sent.holder]
        except OSError:  # the connection to the worker broke: it died, or the network hiccupped
            time.sleep(POLL_S)
            continue
        if data is None:  # a replacement worker under the same address: the one that held the file is gone
            raise LostWithItsWorker(sent.path)
        return data


def newest_checkpoint(directory: Path | None) -> tuple[str | None, dict]:
    """The newest usable checkpoint in `directory` and its progress counters, or None."""
    found = first_usable(checkpoint_candidates(directory)) if directory is not None and directory.is_dir() else None
    return (str(found[0]), found[1]) if found is not None else (None, {})


def store_checkpoint(path: Path, data: Iterator[bytes]) -> bool:
    """Write atomically, piece by piece as they come; a new last.ckpt keeps the one it replaces as previous.ckpt, as
    on the rank, once it has all arrived. False, with nothing written or renamed, when the checkpoint was lost on its
    way: last.ckpt and previous.ckpt stay the two newest complete checkpoints."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with _replaced_atomically(path) as handle:
            for piece_data in data:
                handle.write(piece_data)
            keep_as_previous(path)  # the new file is whole; it takes last.ckpt's name as this block ends
    except LostWithItsWorker:
        return False
    return True


def write_run_dir(
    result: dict, output_root: Path, config_yaml: str, metrics_bases: dict[Path, str | None] | None = None
) -> Path:
    """Write what rank 0 wrote under `output_root`; a resumed run's metrics.csv continues the one there.

    `metrics_bases`: the metrics files' text before this attempt, where the attempt already sent rows.
    """
    destination = output_root / result["run_dir"]
    for relative_path, data in result["files"].items():
        path = output_root / relative_path
        in_run = path.relative_to(destination).as_posix() if path.is_relative_to(destination) else None
        path.parent.mkdir(parents=True, exist_ok=True)
        if in_run == METRICS_FILE:
            base = (metrics_bases or {}).get(path, path.read_text() if path.is_file() else None)
            write_atomically(path, combined_metrics(base, data).encode())
        elif in_run is None or not SAVED_CONFIG.fullmatch(in_run):
            path.write_bytes(data)
    # The config that reproduces this run is the client's, with its dask section, not the one each rank ran.
    if (name := config_file_to_write(destination, config_yaml, CONFIG_FILE)) is not None:
        (destination / name).write_text(config_yaml)
    return destination


def combined_metrics(base: str | None, new_rows_csv: bytes) -> str:
    """A run's earlier metrics rows followed by an attempt's, under the union of both headers."""
    old = csv.DictReader(io.StringIO(base or ""))
    rows = list(old)
    fieldnames = list(old.fieldnames or [])
    new = csv.DictReader(io.StringIO(new_rows_csv.decode()))
    new_rows = list(new)
    fieldnames += [name for name in new.fieldnames or [] if name not in fieldnames]
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=sorted(fieldnames))
    writer.writeheader()
    writer.writerows(rows + new_rows)
    return text.getvalue()
