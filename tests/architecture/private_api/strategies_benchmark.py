"""What the strategies benchmark touches."""

from types import SimpleNamespace

from torch.distributed.pipelining.schedules import ScheduleGPipe


def _schedule() -> ScheduleGPipe:
    """A schedule as the benchmark reads one; a schedule only asks its stage where it sits, so a stand-in does."""
    stage = SimpleNamespace(num_stages=2, stage_index=0, group_rank=0, group_size=2, has_backward=True)
    return ScheduleGPipe(stage, n_microbatches=2)


MODULE_NAMES = {
    ("torch.distributed.pipelining.stage", "_PipelineStageBase"): "benchmarks/strategies.py (compute actions timed)",
}
ATTRIBUTES = [
    ("pipeline schedule", _schedule, "_num_stages", "benchmarks/strategies.py (the schedule's shape)"),
    ("pipeline schedule", _schedule, "_n_microbatches", "benchmarks/strategies.py (the schedule's shape)"),
]
