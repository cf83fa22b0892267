"""A pipeline setup that cannot work, refused in one line before any process starts.

The pipeline strategy (pipeline.py) checks the model, the data and its options with `check_pipeline_setup`;
`CheckFirstLauncher` runs that check before Lightning's launcher starts the other processes, so a bad setup fails
once, not once per process after the rendezvous.
"""

import itertools
from collections.abc import Callable

from lightning.pytorch import LightningDataModule, LightningModule
from lightning.pytorch.strategies.launchers import _SubprocessScriptLauncher
from typing_extensions import override

from trainrig.errors import UserInputError
from trainrig.strategies.pipeline_schedules import (
    MICROBATCH_RULES,
    accepts_microbatches,
    stage_count_problem,
    torch_version_problem,
)
from trainrig.strategies.stages import model_stages


def check_pipeline_setup(
    model: LightningModule,
    datamodule: LightningDataModule | None,
    *,
    schedule: type,
    schedule_name: str,
    microbatches: int,
    data_parallel: int,
    world_size: int,
    scales_gradients: bool,
    backend: str,
) -> None:
    """Raise a UserInputError for a setup that cannot work: `data_parallel` pipelines over `world_size` processes
    meeting on `backend`, each batch split into `microbatches` for `schedule` (named `schedule_name` in the
    options)."""
    if microbatches < 1:
        raise UserInputError(f"pipeline microbatches must be at least 1, got {microbatches}")
    if data_parallel < 1 or world_size % data_parallel:
        raise UserInputError(
            f"pipeline data_parallel {data_parallel} does not divide the trainer's {world_size} "
            "process(es) into equal pipelines; set --trainer.devices to data_parallel x processes per pipeline"
        )
    processes = world_size // data_parallel
    if not accepts_microbatches(schedule, microbatches, processes):
        valid = next(
            count for count in itertools.count(microbatches) if accepts_microbatches(schedule, count, processes)
        )
        raise UserInputError(
            f"pipeline schedule {schedule_name} cannot split a batch into {microbatches} micro-batches on "
            f"{processes} processes ({MICROBATCH_RULES[schedule]}); "
            f"set --trainer.strategy.init_args.microbatches {valid}"
        )
    _check_batch_size(datamodule, schedule, microbatches, processes)
    stages = model_stages(model, "pipeline")
    if (problem := stage_count_problem(schedule, len(stages), processes)) is not None:
        if data_parallel > 1:
            problem += f" (processes per pipeline: --trainer.devices / data_parallel {data_parallel})"
        raise UserInputError(problem)
    in_stages = {id(param) for stage in stages for param in stage.parameters()}
    outside = [name for name, param in model.named_parameters() if id(param) not in in_stages]
    if outside:
        raise UserInputError(
            f"pipeline trains only parameters inside stages(), but {type(model).__name__} also has {outside[:3]}"
        )
    if scales_gradients:
        raise UserInputError("pipeline cannot use a gradient scaler (precision 16-mixed); use bf16-mixed or 32")
    if (problem := torch_version_problem(schedule, backend)) is not None:
        raise UserInputError(problem)


def _check_batch_size(
    datamodule: LightningDataModule | None, schedule: type, microbatches: int, processes: int
) -> None:
    """A batch size (the datamodule's `batch_size` hyper-parameter) that `microbatches` does not divide is refused:
    the run would otherwise split every batch into fewer micro-batches than the one it says it uses."""
    batch_size = getattr(datamodule, "hparams", {}).get("batch_size")
    if not isinstance(batch_size, int) or batch_size % microbatches == 0:
        return
    counts = [
        c for c in range(1, batch_size + 1) if not batch_size % c and accepts_microbatches(schedule, c, processes)
    ]
    nearest = min(counts or [1], key=lambda count: abs(count - microbatches))
    raise UserInputError(
        f"pipeline microbatches {microbatches} does not divide the batch size {batch_size} "
        f"(--data.init_args.batch_size); set --trainer.strategy.init_args.microbatches {nearest}, or a batch size "
        f"that {microbatches} divides"
    )


class CheckFirstLauncher(_SubprocessScriptLauncher):
    """Checks the model before starting the other processes, so a bad setup fails once, in one line."""

    def __init__(self, check: Callable[[LightningModule, LightningDataModule | None], None], *args):
        super().__init__(*args)
        self._check = check

    @override
    def launch(self, function, *args, trainer=None, **kwargs):
        if args and isinstance(args[0], LightningModule):
            datamodule = next((arg for arg in (*args, *kwargs.values()) if isinstance(arg, LightningDataModule)), None)
            self._check(args[0], datamodule)
        return super().launch(function, *args, trainer=trainer, **kwargs)
