"""Real SLURM events at chosen training steps, named in a run's config like any callback.

The events go through SLURM itself (`scontrol requeue` to the controller, which signals the job's tasks); the step is
chosen from inside only to make it a given training step instead of a race against a timer.
"""

import os
import subprocess
import time
from pathlib import Path

from lightning.pytorch import Callback

from trainrig.resume.preemption import received_stop

SIGNAL_WAIT_S = 60


class RequeueAtStep(Callback):
    """Once global step `step` has finished on rank 0 of the job's first run, `scontrol requeue` the job and hold
    that rank until SLURM's SIGTERM has reached it, so that the checkpoint is written at this step."""

    def __init__(self, step: int, once_marker: str):
        self.step, self.once_marker = step, Path(once_marker)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step != self.step or trainer.global_rank != 0 or self.once_marker.exists():
            return
        self.once_marker.touch()
        subprocess.run(["scontrol", "requeue", os.environ["SLURM_JOB_ID"]], check=True)
        deadline = time.monotonic() + SIGNAL_WAIT_S
        while received_stop() is None and time.monotonic() < deadline:
            time.sleep(0.05)


class SlowSteps(Callback):
    """Every rank waits `seconds` after each training step: a run long enough for SLURM's time-limit signal, which
    slurmctld sends from a check it makes every 30 s."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        time.sleep(self.seconds)
