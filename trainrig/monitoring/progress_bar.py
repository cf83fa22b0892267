"""The progress bar every run shows unless its config chooses one: Lightning's TQDM bar, showing the training loss (and
samples a second, where `trainrig.monitoring.throughput.Throughput` logs them) as of the last step the loggers wrote.

Lightning's own bars show the values logged with `prog_bar=True`, which its logger connector turns into Python numbers
at every step: on a GPU each of those host reads waits for the step's kernels, so the host can no longer queue the
next step while the GPU runs this one. This bar reads `trainer.callback_metrics` (tensors, on the device) only at the
steps the loggers write, where the values are read anyway.
"""

from collections.abc import Sequence

from lightning.pytorch.callbacks import Callback, RichProgressBar, TQDMProgressBar
from typing_extensions import override

from trainrig.monitoring.log_steps import is_log_step

__all__ = ["LogStepProgressBar", "with_log_step_progress_bar"]


class LogStepProgressBar(TQDMProgressBar):
    def __init__(
        self, shown: Sequence[str] = ("train/loss", "throughput/samples_per_s"), refresh_rate: int = 1
    ) -> None:
        """`shown`: the logged training values the bar shows, where a step logged them."""
        super().__init__(refresh_rate=refresh_rate)
        self.shown = tuple(shown)
        self.latest: dict[str, float] = {}

    @override
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if is_log_step(trainer):
            logged = trainer.callback_metrics
            self.latest = {name: float(logged[name]) for name in self.shown if name in logged}
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)

    @override
    def get_metrics(self, trainer, pl_module) -> dict[str, int | str | float | dict[str, float]]:
        return {**super().get_metrics(trainer, pl_module), **self.latest}


def with_log_step_progress_bar(callbacks: list[Callback]) -> list[Callback]:
    """`callbacks` with Lightning's default progress bar (a plain RichProgressBar or TQDMProgressBar: a subclass is
    the user's own) replaced by `LogStepProgressBar`."""
    return [
        LogStepProgressBar() if type(callback) in (RichProgressBar, TQDMProgressBar) else callback
        for callback in callbacks
    ]
