"""Lightning's model summary without a FLOPs column of zeros."""

import logging

from lightning.pytorch.callbacks import Callback, ModelSummary, RichModelSummary
from lightning.pytorch.utilities.model_summary.model_summary import _format_summary_table
from typing_extensions import override

log = logging.getLogger("lightning.pytorch.callbacks.model_summary")  # where Lightning's own summary goes

__all__ = ["SummaryWithoutEmptyFlops", "without_empty_flops"]


class SummaryWithoutEmptyFlops(ModelSummary):
    """Lightning counts FLOPs only by running the module's `example_input_array`. The examples have none (a full
    forward pass is no option for a module whose stages live in other processes), so Lightning's summary shows a
    FLOPs column and total of zeros; this one leaves them out then, and shows them when something was counted.
    """

    @staticmethod
    @override
    def summarize(
        summary_data: list[tuple[str, list[str]]],
        total_parameters: int,
        trainable_parameters: int,
        model_size: float,
        total_training_modes: dict[str, int],
        total_flops: int,
        **summarize_kwargs,
    ) -> None:
        if total_flops:
            ModelSummary.summarize(
                summary_data,
                total_parameters,
                trainable_parameters,
                model_size,
                total_training_modes,
                total_flops,
                **summarize_kwargs,
            )
            return
        columns = [column for column in summary_data if column[0] != "FLOPs"]
        table = _format_summary_table(
            total_parameters, trainable_parameters, model_size, total_training_modes, total_flops, *columns
        )
        log.info("\n" + table.rpartition("\n")[0])  # the last line is the total FLOPs


def without_empty_flops(callbacks: list[Callback]) -> list[Callback]:
    """The trainer's callbacks, Lightning's own summary (added by `enable_model_summary`) replaced by the one above."""
    lightnings_own = (ModelSummary, RichModelSummary)
    return [SummaryWithoutEmptyFlops(c._max_depth) if type(c) in lightnings_own else c for c in callbacks]
