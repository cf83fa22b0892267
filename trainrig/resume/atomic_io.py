"""Checkpoint files that are complete or absent, whatever kills the process during the write; sharded checkpoint
directories read as files."""

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from lightning.fabric.utilities.cloud_io import get_filesystem
from lightning.pytorch.plugins.io import TorchCheckpointIO
from typing_extensions import override

from trainrig.resume.sharded import PARTIAL_SUFFIX, consolidated, hidden_sibling, is_sharded_checkpoint


def is_local(path) -> bool:
    """Whether `path` is on this machine's filesystem, not an object store's (s3://, gs://)."""
    protocol = get_filesystem(str(path)).protocol
    return "file" in ((protocol,) if isinstance(protocol, str) else protocol)


def _fsync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


@contextmanager
def _replaced_atomically(target: Path) -> Iterator:
    """A handle for the target's new content: on exit it is flushed to disk, then renamed into place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = hidden_sibling(target, PARTIAL_SUFFIX)
    try:
        with open(partial, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    _fsync_directory(target.parent)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace a local file's content so that a reader sees the old file or the new one, whatever kills the writer."""
    with _replaced_atomically(Path(path)) as handle:
        handle.write(data)


def write_checkpoint_atomically(path: Path, checkpoint: dict[str, Any]) -> None:
    """`torch.save` a checkpoint so that a reader sees the old file or the new one."""
    with _replaced_atomically(Path(path)) as handle:
        torch.save(checkpoint, handle)


class AtomicCheckpointIO(TorchCheckpointIO):
    """Writes next to the target, flushes to disk, then renames: a reader sees the old file or the new one.

    Lightning's own save goes through an fsspec transaction, which for a local path writes into the system's
    temporary directory and then moves the file: a copy, not a rename, when that directory is on another
    filesystem (a pod's /tmp and its mounted claim), so a kill during the copy leaves a truncated file. Remote
    paths (s3://, gs://) keep Lightning's behaviour: object stores replace whole objects anyway.
    """

    @override
    def save_checkpoint(self, checkpoint: dict[str, Any], path, storage_options: Any | None = None) -> None:
        if not is_local(path):
            super().save_checkpoint(checkpoint, path, storage_options)
            return
        write_checkpoint_atomically(Path(path), checkpoint)

    @override
    def load_checkpoint(
        self, path, map_location: Any | None = None, weights_only: bool | None = None
    ) -> dict[str, Any]:
        """A sharded checkpoint directory (the fsdp2 strategy's) loads whole, into any strategy or none; with
        `weights_only=None` (a Trainer not built by cli.py) as torch's default, True."""
        if is_sharded_checkpoint(path):
            return consolidated(path, weights_only is not False)
        return super().load_checkpoint(path, map_location, weights_only)
