"""The pipeline schedules by name and their rules: which stages each process runs, how many stages and micro-batches
a schedule accepts.

Kept apart from the strategy (pipeline.py) so that everyone who checks a pipeline before it runs (the strategy at
launch, the launchers when they write a job) reads the same rules, and the strategy resolves its schedule here once.
"""

import torch
from torch.distributed.pipelining import (
    Schedule1F1B,
    ScheduleDualPipeV,
    ScheduleInterleaved1F1B,
    ScheduleInterleavedZeroBubble,
    ScheduleZBVZeroBubble,
)
from torch.distributed.pipelining.schedules import PipelineScheduleMulti, PipelineScheduleSingle, get_schedule_class

from trainrig.errors import UserInputError

# torch.distributed.pipelining's schedules by the names get_schedule_class knows. GPipe and 1F1B run one stage
# per process; the others run several ("virtual stages"), ZBVZeroBubble and DualPipeV exactly two, placed as a V.
SCHEDULE_NAMES = (
    "GPipe",
    "1F1B",
    "Interleaved1F1B",
    "LoopedBFS",
    "InterleavedZeroBubble",
    "ZBVZeroBubble",
    "DualPipeV",
)
# Schedules placing two stages on each process as a V: process r holds stages r and 2P-1-r.
V_SCHEDULES = (ScheduleZBVZeroBubble, ScheduleDualPipeV)
# Torch 2.11 and older hand a micro-batch between a process's own two stages of the V as a message to itself, which
# gloo refuses ("Pair is not connected"); 2.12 passes it in memory. Seen with DualPipeV and ZBVZeroBubble on gloo.
V_SCHEDULES_ON_GLOO_SINCE = (2, 12)
# torch's conditions on the number of micro-batches, where it has any.
MICROBATCH_RULES = {
    Schedule1F1B: "it needs at least one micro-batch per process",
    ScheduleInterleaved1F1B: "it needs whole rounds: a multiple of microbatches // processes",
    ScheduleInterleavedZeroBubble: "it needs whole rounds: a multiple of microbatches // processes",
    ScheduleDualPipeV: "it needs at least as many micro-batches as stages",
}


def schedule_class(name: str) -> type[PipelineScheduleSingle | PipelineScheduleMulti]:
    if name.lower() not in {known.lower() for known in SCHEDULE_NAMES}:
        raise UserInputError(f"pipeline schedule {name!r} is unknown; choose one of {', '.join(SCHEDULE_NAMES)}")
    return get_schedule_class(name)


def stages_of_process(schedule: type, rank: int, processes: int, num_stages: int) -> list[int]:
    """The stages process `rank` runs: stage i on process i mod P, or the V of ZBVZeroBubble and DualPipeV (r and
    2P-1-r)."""
    if schedule in V_SCHEDULES:
        return [rank, 2 * processes - 1 - rank]
    return list(range(rank, num_stages, processes))


def stage_count_problem(schedule: type, num_stages: int, processes: int) -> str | None:
    """Why `schedule` cannot run `num_stages` stages on `processes` processes (None when it can)."""
    if issubclass(schedule, PipelineScheduleSingle):
        rule, per_process = "one stage per process", 1
    elif schedule in V_SCHEDULES:
        rule, per_process = "exactly two stages per process", 2
    else:
        rule, per_process = "the same number of stages on every process", None
    if (num_stages == per_process * processes) if per_process else (num_stages % processes == 0):
        return None
    if num_stages % (per_process or 1):
        fix = f"give the model {per_process * processes} stages"
    else:
        devices = num_stages // (per_process or 1)
        fix = f"set --trainer.devices {devices} (or {devices} rank(s) on a launcher) or change the model's stages"
    name = schedule.__name__.removeprefix("Schedule")
    return (
        f"pipeline schedule {name} runs {rule}, but the model has {num_stages} stages and the trainer starts "
        f"{processes} process(es); {fix}"
    )


def torch_version_problem(schedule: type, backend: str) -> str | None:
    """Why this torch cannot run `schedule` on `backend` (None when it can)."""
    version = torch.__version__.split("+")[0]
    if schedule in V_SCHEDULES and backend == "gloo":
        needed = V_SCHEDULES_ON_GLOO_SINCE
        if tuple(int(part) for part in version.split(".")[:2]) < needed:
            name = schedule.__name__.removeprefix("Schedule")
            return (
                f"pipeline schedule {name} on gloo needs torch {needed[0]}.{needed[1]} or newer (this is {version}): "
                "older versions pass data between a process's own stages as messages to itself, which gloo refuses"
            )
    return None


def process_of_stage(schedule: type, stage: int, processes: int, num_stages: int) -> int:
    return next(rank for rank in range(processes) if stage in stages_of_process(schedule, rank, processes, num_stages))


def accepts_microbatches(schedule: type, count: int, processes: int) -> bool:
    if schedule is Schedule1F1B:
        return count >= processes
    if schedule in (ScheduleInterleaved1F1B, ScheduleInterleavedZeroBubble):
        return count % max(1, count // processes) == 0
    if schedule is ScheduleDualPipeV:
        return count >= 2 * processes
    return True
