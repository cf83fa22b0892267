"""The steps the loggers write (`log_every_n_steps`, and the last): the only training steps at which a value computed
on the device may be read on the host. A read at any other step stalls a GPU until every queued kernel has run."""

from lightning.pytorch import Trainer

__all__ = ["is_log_step"]


def is_log_step(trainer: Trainer) -> bool:
    """Whether the loggers write the step now running, asked from a training batch's hooks; the test LearningRateMonitor
    makes (Lightning has no public one)."""
    return trainer._logger_connector.should_update_logs
