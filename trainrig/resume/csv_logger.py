"""A CSVLogger that continues the metrics.csv of a resumed run instead of deleting it."""

import csv
from pathlib import Path

from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter
from lightning.pytorch.loggers.logger import rank_zero_experiment
from lightning.pytorch.utilities import rank_zero_only
from typing_extensions import override


class _ContinuingWriter(ExperimentWriter):
    @override
    def _check_log_dir_exists(self) -> None:
        """Lightning's writer deletes an existing metrics.csv here; this one keeps it and appends under its header.

        A private hook of lightning 2.6's writer: the tests in tests/resume/ check that a resumed run's metrics.csv
        equals an uninterrupted run's.
        """
        path = Path(self.metrics_file_path)
        if path.is_file():
            with path.open(newline="") as handle:
                self.metrics_keys = list(csv.DictReader(handle).fieldnames or [])


class ContinuingCSVLogger(CSVLogger):
    """Lightning's CSVLogger, except that a run resumed into its old version directory appends to its metrics, that
    metrics are flushed with every checkpoint, so the file reaches the step a resume continues from, and that its
    `flush_logs_every_n_steps` holds.

    Lightning's logger connector calls `save()` after every row it logs, which leaves CSVLogger's
    `flush_logs_every_n_steps` (default 100) without effect (pytorch-lightning#4664) and costs an open, a write and a
    close of the file at every log step, some 200 us on a CPU (`benchmarks/host_time.py`), time a GPU may wait for.
    Here `save()` writes the rows once that many steps have passed since the last write; `flush()` writes them now,
    as every checkpoint and the run's end (also a failed one) do. A process killed outright loses the rows since the
    last write, which a run resumed from its last checkpoint logs again.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._flush_next_log = False

    @override
    def after_save_checkpoint(self, checkpoint_callback) -> None:
        """A checkpoint is saved before Lightning logs its step's metrics: flush now, and again once they arrive."""
        self.flush()
        self._flush_next_log = True

    @override
    def log_metrics(self, metrics: dict, step: int | None = None) -> None:
        super().log_metrics(metrics, step)
        if self._flush_next_log:
            self._flush_next_log = False
            self.flush()

    @override
    @rank_zero_only
    def save(self) -> None:
        """Writes the rows logged so far (the writer's, each with its step) once they span `flush_logs_every_n_steps`
        steps."""
        unwritten = self._experiment.metrics if self._experiment is not None else []
        if unwritten and unwritten[-1]["step"] - unwritten[0]["step"] + 1 >= self._flush_logs_every_n_steps:
            self.flush()

    def flush(self) -> None:
        """Writes the rows logged so far."""
        super().save()

    @override
    @rank_zero_only
    def finalize(self, status: str) -> None:
        if self._experiment is not None:  # none in a process that logged nothing
            self.flush()

    @property
    @rank_zero_experiment
    @override
    def experiment(self) -> ExperimentWriter:
        if self._experiment is None:
            self._fs.makedirs(self.root_dir, exist_ok=True)
            self._experiment = _ContinuingWriter(log_dir=self.log_dir)
        return self._experiment


def metrics_rows(metrics_file: Path) -> int:
    """How many rows `metrics_file` holds below its header."""
    if not metrics_file.is_file():
        return 0
    with metrics_file.open(newline="") as handle:
        return sum(1 for _ in csv.DictReader(handle))


def drop_rows_from_step(metrics_file: Path, step: int, rows_kept: int | None = None) -> int:
    """Remove rows logged at `step` or later, which a run resumed from that step logs again, and every row after the
    first `rows_kept` (when given). Returns how many."""
    if not metrics_file.is_file():
        return 0
    with metrics_file.open(newline="") as handle:
        reader = csv.DictReader(handle)
        fieldnames, rows = reader.fieldnames or [], list(reader)
    kept = [row for row in rows[:rows_kept] if not row.get("step") or int(row["step"]) < step]
    if len(kept) < len(rows):
        staging = metrics_file.with_name(f".{metrics_file.name}.partial")
        with staging.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=fieldnames)
            writer.writeheader()
            writer.writerows(kept)
        staging.replace(metrics_file)
    return len(rows) - len(kept)
