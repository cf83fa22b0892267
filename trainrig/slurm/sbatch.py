"""Write a SLURM batch script that runs `cli.py fit` on N nodes and continues its run when SLURM requeues it.

    python -m trainrig.slurm.sbatch --nodes 2 --gpus-per-node 4 --partition gpu --time 1-00:00:00 \\
        --config configs/EXAMPLE.yaml --output job.sbatch -- --trainer.max_epochs 20
    sbatch job.sbatch

`srun` starts one task per process (nodes x processes per node) and Lightning's SLURMEnvironment reads ranks and
the first node's name from SLURM's variables; every node reaches rank 0 on a port derived from the job id.

Stopping and continuing, one checkpoint path (`last.ckpt` of ResumableCheckpoint):
- Preemption, `scontrol requeue`, node failure: SLURM sends SIGTERM to the tasks, every rank saves `last.ckpt` at
  the next step and exits 143, and SLURM requeues the job (`--requeue`).
- The time limit: SLURM sends USR1 to the batch shell only (`--signal=B:USR1@LEAD`) ahead of the limit; the script
  sends SIGTERM to the tasks (`scancel --signal=TERM`), which save and exit 143, and the script requeues its own
  job. Lightning's own SLURM handler (SIGUSR1 in the tasks, `hpc_ckpt_N.ckpt`, its own `scontrol requeue`) is
  switched off (`auto_requeue=False`), so no second checkpoint kind exists and exactly one party requeues.
- The requeued script sees `SLURM_RESTART_COUNT > 0` and adds `--ckpt_path last`: the run continues in its own run
  directory. A new `sbatch` of the same script has no restart count and starts a new run.
- Bad input exits 2 and a bug 1: the job fails and is not requeued (SLURM requeues only on its own events).

Strategies by flag after `--`: DDP by default; `--trainer.strategy pipeline` spreads the stages over all processes
of all nodes; a strategy that trains in one process (`layer_split`) runs one task on one node with the node's GPUs;
any other multi-process strategy of trainrig/strategies (e.g. `fsdp2`) runs like DDP.
"""

import argparse
import re
import shlex
import sys
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from trainrig.errors import UserInputError
from trainrig.errors.exit_status import entry_point
from trainrig.errors.options import OneLineArgumentParser
from trainrig.launch.arguments import RESUME, Launcher, check_job_fits, job_arguments, split_at_separator
from trainrig.launch.fit_arguments import check_fit_arguments
from trainrig.launch.strategy import JobStrategy, Placement, pipeline_hint
from trainrig.launch.trainer_flags import trainer_flags
from trainrig.strategies.strategy_option import STRATEGY_FLAG

SLURM = Launcher(
    runs_in="under srun",
    node="node",
    sized_by="--nodes and --gpus-per-node",
    resized_by="--nodes or --gpus-per-node",
    resumes="when SLURM requeues the job, so that it continues its run",
)
# Lightning's SLURM environment without its SIGUSR1 handler: this script, not the tasks, handles the time limit.
SLURM_ENVIRONMENT = (
    '{"class_path": "lightning.fabric.plugins.environments.SLURMEnvironment", "init_args": {"auto_requeue": false}}'
)
# sbatch's --time formats: minutes, minutes:seconds, hours:minutes:seconds, days-hours[:minutes[:seconds]].
TIME_FORMATS = (
    re.compile(r"(?P<minutes>\d+)"),
    re.compile(r"(?P<minutes>\d+):(?P<seconds>\d+)"),
    re.compile(r"(?P<hours>\d+):(?P<minutes>\d+):(?P<seconds>\d+)"),
    re.compile(r"(?P<days>\d+)-(?P<hours>\d+)(:(?P<minutes>\d+)(:(?P<seconds>\d+))?)?"),
)
JOB_NAME = re.compile(r"[A-Za-z0-9][-A-Za-z0-9_.]*")
SLURM_WORD = re.compile(r"[-A-Za-z0-9_.,]+")  # partition and account names
# What sbatch's own reading of an #SBATCH line takes for a separator, a quote, an escape or a comment (_get_argument in
# SLURM's src/sbatch/opt.c); its quoting differs between releases, so a file name holding one is refused, not quoted.
SBATCH_LINE_SPECIAL = re.compile(r"[\s'\"\\#]")
# A control character (a newline above all), or a byte of the command line that is not UTF-8.
UNWRITABLE = ("Cc", "Cs")
DEFAULT_SIGNAL_LEAD_S = 300
MASTER_PORT_LINE = "export MASTER_PORT=$((15000 + SLURM_JOB_ID % 10000))"


@dataclass(frozen=True)
class BatchRequest:
    name: str
    nodes: int
    gpus_per_node: int
    tasks_per_node: int
    config: str
    partition: str | None
    account: str | None
    time_limit: str | None
    signal_lead_s: int
    cpus_per_task: int | None
    log: str
    overrides: tuple[str, ...]  # without the strategy, which `strategy` holds
    strategy: JobStrategy

    @property
    def processes(self) -> int:
        return self.nodes * self.tasks_per_node


def option_parser() -> argparse.ArgumentParser:
    parser = OneLineArgumentParser(
        prog="python -m trainrig.slurm.sbatch",
        description="Write a SLURM batch script running cli.py fit on N nodes, requeued on preemption and ahead of "
        "the time limit, continuing its run. Arguments after `--` are passed on to cli.py fit.",
    )
    parser.add_argument("--nodes", type=int, required=True, help="nodes (#SBATCH --nodes)")
    parser.add_argument(
        "--gpus-per-node",
        type=int,
        default=0,
        help="GPUs per node, one training process each (default 0: CPU, one process per node)",
    )
    parser.add_argument(
        "--config", required=True, help="config path relative to the project root, e.g. configs/EXAMPLE.yaml"
    )
    parser.add_argument("--partition", help="partition to run in (#SBATCH --partition); default: the cluster's")
    parser.add_argument("--account", help="account charged for the job (#SBATCH --account)")
    parser.add_argument(
        "--time",
        help="time limit per run of the job (#SBATCH --time), e.g. 20:00:00 or 1-00:00:00; the job requeues itself "
        "ahead of it and continues",
    )
    parser.add_argument(
        "--signal-lead",
        type=int,
        default=DEFAULT_SIGNAL_LEAD_S,
        metavar="SECONDS",
        help="seconds before the time limit at which the job checkpoints and requeues itself (default "
        f"{DEFAULT_SIGNAL_LEAD_S}; SLURM may signal up to 60 s earlier)",
    )
    parser.add_argument("--cpus-per-task", type=int, help="CPU cores per training process (#SBATCH --cpus-per-task)")
    parser.add_argument("--job-name", help="job name (default: the config's stem)")
    parser.add_argument(
        "--log",
        default="slurm-%x-%j.out",
        help="the job's output file, appended to by every requeued run (default slurm-%%x-%%j.out)",
    )
    parser.add_argument("--output", type=Path, help="batch script to write; without it, it goes to stdout")
    return parser


def parse_request(argv: list[str], config_anywhere: bool = False) -> tuple[BatchRequest, Path | None]:
    """The job asked for on the command line, checked so that a script that is written can run. `config_anywhere`:
    the config may be any existing file (a sweep's resolved `base.yaml`), not only one relative to the project root."""
    refuse_unwritable(argv)
    own, overrides = split_at_separator(argv)
    args = option_parser().parse_args(own)

    if args.nodes < 1:
        raise UserInputError(f"--nodes must be at least 1, got {args.nodes}")
    if args.gpus_per_node < 0:
        raise UserInputError(f"--gpus-per-node must be 0 or more, got {args.gpus_per_node}")
    if args.cpus_per_task is not None and args.cpus_per_task < 1:
        raise UserInputError(f"--cpus-per-task must be at least 1, got {args.cpus_per_task}")
    config = Path(args.config)
    if (config.is_absolute() and not config_anywhere) or not config.is_file():
        raise UserInputError(
            f"--config {args.config!r} must be an existing file given relative to the project root, from which "
            "the script is submitted"
        )
    name = args.job_name or config.stem
    if not JOB_NAME.fullmatch(name):
        raise UserInputError(f"--job-name {name!r} must be letters, digits, '-', '_' and '.'")
    for flag, value in (("--partition", args.partition), ("--account", args.account)):
        if value is not None and not SLURM_WORD.fullmatch(value):
            raise UserInputError(f"{flag} {value!r} is not a SLURM {flag[2:]} name")
    if args.time is not None:
        limit_s = time_limit_seconds(args.time)
        if args.signal_lead >= limit_s:
            raise UserInputError(
                f"--signal-lead {args.signal_lead} s must be shorter than the time limit --time {args.time} "
                f"({limit_s} s), or the job stops before it trains"
            )
    if args.signal_lead < 1:
        raise UserInputError(f"--signal-lead must be at least 1 second, got {args.signal_lead}")
    if SBATCH_LINE_SPECIAL.search(args.log):
        raise UserInputError(
            f"--log {args.log!r} holds a space, a quote, a backslash or '#', which sbatch would read as more options "
            "or a comment; choose a file name without them"
        )
    strategy, overrides = job_arguments(overrides, SLURM)
    single_process = strategy.placement is Placement.ONE_PROCESS
    tasks_per_node = 1 if single_process else max(args.gpus_per_node, 1)
    if single_process and args.nodes != 1:
        raise UserInputError(
            f"{STRATEGY_FLAG} {strategy.name} trains in one process on one node's devices, but --nodes is "
            f"{args.nodes}; use --nodes 1{pipeline_hint('nodes')}"
        )
    check_job_fits(strategy, overrides, config.as_posix(), args.nodes, tasks_per_node, SLURM)
    request = BatchRequest(
        name=name,
        nodes=args.nodes,
        gpus_per_node=args.gpus_per_node,
        tasks_per_node=tasks_per_node,
        config=config.as_posix(),
        partition=args.partition,
        account=args.account,
        time_limit=args.time,
        signal_lead_s=args.signal_lead,
        cpus_per_task=args.cpus_per_task,
        log=args.log,
        overrides=overrides,
        strategy=strategy,
    )
    return request, args.output


def refuse_unwritable(argv: list[str]) -> None:
    """Every argument reaches the script, in the `# Generated by:` comment if nowhere else. Quoting keeps a value one
    word, but a newline in it would still end that comment (or an #SBATCH line), and bash would run the rest as a
    command; other control characters hide text on a terminal, and a byte that is not UTF-8 cannot be written."""
    for value in argv:
        if any(unicodedata.category(char) in UNWRITABLE for char in value):
            raise UserInputError(
                f"{value!r} holds a control character (a newline, a tab, ...) or a byte that is not UTF-8, which a "
                "batch script cannot carry"
            )


def time_limit_seconds(value: str) -> int:
    """An sbatch `--time` value in seconds; a UserInputError for anything sbatch would refuse."""
    for pattern in TIME_FORMATS:
        match = pattern.fullmatch(value)
        if match:
            parts = {key: int(number) for key, number in match.groupdict().items() if number is not None}
            seconds = (
                parts.get("days", 0) * 86400
                + parts.get("hours", 0) * 3600
                + parts.get("minutes", 0) * 60
                + parts.get("seconds", 0)
            )
            if seconds > 0:
                return seconds
    raise UserInputError(
        f"--time {value!r} is not a SLURM time limit; use minutes, HH:MM:SS or D-HH:MM:SS, e.g. 20:00:00"
    )


def training_command(request: BatchRequest) -> list[str]:
    """What every srun task runs: cli.py fit sized to the whole job, with the strategy asked for."""
    return ["python", "cli.py", "fit", *fit_arguments(request)]


def fit_arguments(request: BatchRequest) -> list[str]:
    """The arguments of every task's `cli.py fit`, which the generator parses before it writes the script."""
    return ["--config", request.config, *launcher_arguments(request), *request.overrides]


def launcher_arguments(request: BatchRequest) -> list[str]:
    """The `cli.py fit` options that size the run to the job and choose its strategy; they follow the config. The
    devices are a node's: one GPU per task, all of them in the one task of a one-process strategy, or the CPU."""
    accelerator = "gpu" if request.gpus_per_node else "cpu"
    devices = max(request.gpus_per_node, 1)
    return trainer_flags(request.strategy, accelerator, devices, request.nodes, SLURM_ENVIRONMENT)


def batch_script(request: BatchRequest, generated_by: str) -> str:
    lines = [
        "#!/bin/bash",
        f"# {request.name}: {request.nodes} node(s) x {request.tasks_per_node} process(es)"
        + (f", {request.gpus_per_node} GPU(s) per node" if request.gpus_per_node else " on CPU"),
        f"# Generated by: {generated_by}",
        "# Submit from the project root: sbatch THIS_FILE. See docs/slurm.md.",
        f"#SBATCH --job-name={request.name}",
        f"#SBATCH --nodes={request.nodes}",
        f"#SBATCH --ntasks-per-node={request.tasks_per_node}",
    ]
    if request.gpus_per_node:
        lines.append(f"#SBATCH --gpus-per-node={request.gpus_per_node}")
    if request.cpus_per_task:
        lines.append(f"#SBATCH --cpus-per-task={request.cpus_per_task}")
    if request.partition:
        lines.append(f"#SBATCH --partition={request.partition}")
    if request.account:
        lines.append(f"#SBATCH --account={request.account}")
    if request.time_limit:
        lines.append(f"#SBATCH --time={request.time_limit}")
    lines += [
        "#SBATCH --requeue",
        f"#SBATCH --signal=B:USR1@{request.signal_lead_s}",
        "#SBATCH --open-mode=append",
        f"#SBATCH --output={request.log}",
        "",
        "# A requeued job continues its own run from last.ckpt; a new sbatch of this script starts a new run.",
        "resume=()",
        'if [ "${SLURM_RESTART_COUNT:-0}" -gt 0 ]; then resume=(' + shlex.join(RESUME) + "); fi",
        "# Rank 0's port, the same on every node, of this job's own.",
        MASTER_PORT_LINE,
        "",
        "# USR1 (only this shell gets it) comes ahead of the time limit: the tasks checkpoint on SIGTERM and exit 143,",
        "# then this script requeues the job. On preemption or scontrol requeue SLURM signals the tasks itself and",
        "# requeues; this shell waits for their checkpoint.",
        "time_limit_near=0",
        "interrupted=0",
        # scancel signals the job's steps (the tasks), not this shell; SIGTERM to srun would make it kill them.
        "trap 'time_limit_near=1; interrupted=1; scancel --signal=TERM \"$SLURM_JOB_ID\"' USR1",
        "trap 'interrupted=1' TERM",
        "srun " + shlex.join(training_command(request)) + ' "${resume[@]}" &',
        "training=$!",
        "while :; do",
        "    interrupted=0",
        '    wait "$training"',
        "    status=$?",
        '    [ "$interrupted" = 1 ] || break  # a trapped signal ended the wait, not the tasks',
        "done",
        'if [ "$time_limit_near" = 1 ] && [ "$status" = 143 ]; then',
        '    echo "time limit near: checkpoint saved, requeueing job $SLURM_JOB_ID" >&2',
        '    scontrol requeue "$SLURM_JOB_ID"',
        "fi",
        'exit "$status"',
        "",
    ]
    return "\n".join(lines)


@entry_point
def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    request, output = parse_request(argv)
    check_fit_arguments(fit_arguments(request))
    script = batch_script(request, shlex.join(["python", "-m", "trainrig.slurm.sbatch", *argv]))
    summary = (
        f"# {request.name}: {request.nodes} node(s) x {request.tasks_per_node} process(es) = world size "
        f"{request.processes}\n"
    )
    if output is None:
        sys.stdout.write(script)
        sys.stderr.write(summary)
        return
    output.write_text(script)
    output.chmod(0o755)
    sys.stdout.write(f"# wrote {output}; submit it from the project root with: sbatch {shlex.quote(str(output))}\n")
    sys.stdout.write(summary)


if __name__ == "__main__":
    main()
