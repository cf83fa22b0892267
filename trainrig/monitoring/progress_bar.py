"""The progress bar every run shows unless its config chooses one: Lightning's TQDM bar, showing the training loss (and
samples a second, where `trainrig.monitoring.throughput.Throughput` measures them) as of the last step the loggers
wrote.

Lightning's own bars show the values logged with `prog_bar=True`, which its logger connector turns into Python numbers
at every step: on a GPU each of those host reads waits for the step's kernels, so the host can no longer queue the
next step while the GPU runs this one. This bar reads `trainer.callback_metrics` (tensors, on the device) only at the
steps the loggers write, where the values are read anyway.

It also redraws at most every `min_interval_s` (and at an epoch's last batch): Lightning's bar redraws at every batch,
twice (the count, then the values beside it), which on a fast loop costs more host time than any other part of the
template (`benchmarks/host_time.py`); tqdm's own `mininterval` would limit that, but Lightning's forced redraws bypass
it.
"""

import time
from collections.abc import Sequence

from lightning.pytorch.callbacks import Callback, RichProgressBar, TQDMProgressBar
from typing_extensions import override

from trainrig.monitoring.log_steps import is_log_step
from trainrig.monitoring.throughput import Throughput

__all__ = ["LogStepProgressBar", "with_log_step_progress_bar"]


class LogStepProgressBar(TQDMProgressBar):
    def __init__(
        self,
        shown: Sequence[str] = ("train/loss", "throughput/samples_per_s"),
        refresh_rate: int = 1,
        min_interval_s: float = 0.5,
    ) -> None:
        """`shown`: the logged training values the bar shows, where a step logged them. `refresh_rate`: redraw at most
        every this many batches (Lightning's); `min_interval_s`: and at most every this many seconds."""
        super().__init__(refresh_rate=refresh_rate)
        self.shown = tuple(shown)
        self.min_interval_s = min_interval_s
        self.latest: dict[str, float] = {}
        self.drawn_at = float("-inf")

    @override
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if is_log_step(trainer):
            # Throughput writes to the loggers directly (no `log` call): its values come from the callback, which runs
            # first (with_throughput puts it there).
            throughput = [callback.latest for callback in trainer.callbacks if isinstance(callback, Throughput)]
            logged = {**trainer.callback_metrics, **(throughput[0] if throughput else {})}
            self.latest = {name: float(logged[name]) for name in self.shown if name in logged}
        if not self.is_enabled or self.train_progress_bar.disable:
            return
        bar, done, now = self.train_progress_bar, batch_idx + 1, time.monotonic()
        if done == bar.total or (done % self.refresh_rate == 0 and now - self.drawn_at >= self.min_interval_s):
            bar.n = done
            bar.set_postfix(self.get_metrics(trainer, pl_module))  # one redraw: the count and the values together
            self.drawn_at = now

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
