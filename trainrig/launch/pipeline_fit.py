"""Whether a pipeline's stages fit a launched job's processes, checked when the job is written rather than in its
first process after the queue wait: the same rule the pipeline strategy applies when it starts (its schedules'
rules), on the schedule, data-parallel degree and stage count the job's arguments and config give.

Part of the pipeline strategy's files: the strategy names `check_pipeline_fits` as its `job_check`, which
`trainrig.launch.arguments.check_job_fits` imports only for a job that runs the pipeline.
"""

from pathlib import Path

import yaml

from trainrig.errors import UserInputError
from trainrig.launch.arguments import Launcher
from trainrig.strategies.pipeline_schedules import schedule_class, stage_count_problem
from trainrig.strategies.strategy_option import STRATEGY_FLAG, flag_values

__all__ = ["check_pipeline_fits"]

STAGES_FLAG = "--model.init_args.num_stages"


def check_pipeline_fits(
    overrides: tuple[str, ...], config: str, nodes: int, processes_per_node: int, launcher: Launcher
) -> None:
    """A UserInputError when the model's stages (from the overrides, else the config) do not fit the pipeline's
    schedule on the job's `nodes` x `processes_per_node` processes; nothing to check for a model that decides its
    stages itself."""

    def last_value(flag: str) -> str | None:
        values = flag_values(list(overrides), flag)[0]
        return values[-1] if values else None

    processes = nodes * processes_per_node
    schedule = schedule_class(last_value(f"{STRATEGY_FLAG}.init_args.schedule") or "GPipe")
    data_parallel = int(last_value(f"{STRATEGY_FLAG}.init_args.data_parallel") or 1)
    if data_parallel < 1 or processes % data_parallel:
        raise UserInputError(
            f"pipeline data_parallel {data_parallel} does not divide the job's {processes} processes "
            f"({nodes} {launcher.node}(s) x {processes_per_node})"
        )
    stages = last_value(STAGES_FLAG)
    if stages is None:
        model = (yaml.safe_load(Path(config).read_text()) or {}).get("model") or {}
        stages = (model.get("init_args") or {}).get("num_stages") if isinstance(model, dict) else None
    if stages is None:
        return  # the model decides its stages itself; the strategy checks them when the job starts
    problem = stage_count_problem(schedule, int(stages), processes // data_parallel)
    if problem:
        what_fails = problem.split(";", 1)[0].replace("the trainer starts", "the job runs")
        raise UserInputError(f"{what_fails}; change {launcher.resized_by}, or the model's stages")
