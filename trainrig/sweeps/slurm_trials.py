"""Trials as SLURM jobs (`--sweep.slurm_nodes`), submitted and watched with submitit from the driver's login node.

A trial's job is the batch script of `python -m trainrig.slurm.sbatch` reduced to its run: the same `#SBATCH`
shape (nodes, tasks per node, GPUs, partition, account, time limit), the same rank-0 port, and on every task the same
`cli.py fit` options sized to the job (`launcher_arguments`), after the trial's own arguments. Each srun task runs
that command as a child and returns its exit status as submitit's result, so the driver reads a trial's status as it
reads a local process's: 0 done (or pruned), 2 bad input, 143 stopped with a checkpoint. SLURM never requeues a
trial's job; the driver starts a stopped trial again as it does locally, as a new job from the trial's checkpoint.

- Pruning: rank 0 reports through files in the trial's folder (trainrig/sweeps/channel.py), which the nodes share
  with the login node, as a cluster's file system is shared; it does not watch the driver's process id, which means
  nothing on another machine.
- Stopping: the driver cancels the job (`scancel` through submitit): SLURM sends the tasks SIGTERM, the training
  processes save `last.ckpt` and exit 143, which the task wrapper (submitit ignores SIGTERM) returns.
- The time limit: SLURM sends SIGTERM to the tasks `slurm_signal_lead` seconds ahead (`--signal=TERM@LEAD`), with
  the same outcome.
- A driver started again finds each interrupted trial's job id in its folder and watches that job while it still
  runs, instead of submitting it again.
- A job that ended without its tasks' results (cancelled from outside, its node lost, killed at the limit) counts as
  killed (137): restarted from its checkpoint like a local trial killed by a signal.

submitit reads a job's state with `sacct` once no result file says it ended: the cluster needs job accounting
(slurmdbd), as production clusters have.

Only the driver (and, through the pickled task, the job's tasks) imports this module.
"""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import submitit

from trainrig.errors import UserInputError
from trainrig.errors.exit_status import KILLED
from trainrig.launch.arguments import SEPARATOR
from trainrig.launch.strategy import strategy_arguments
from trainrig.slurm.sbatch import MASTER_PORT_LINE, launcher_arguments, parse_request
from trainrig.sweeps import trials
from trainrig.sweeps.channel import DriverSide
from trainrig.sweeps.driver import say
from trainrig.sweeps.trials import JOB_VARIABLES, LOG

__all__ = ["SlurmTrial", "SlurmTrials", "run_task"]

JOB_ID = "slurm_job"  # the trial's latest job id, for a driver started again
SUBMITIT = "submitit"  # submitit's folder in the trial's: batch scripts, pickled task, results, task logs
STATE_CHECK_S = 5.0  # how often `sacct` is asked about a job whose tasks left no result yet
JOB_ID_TEXT = re.compile(r"[0-9]+")  # what submitit's submit returns for a job that is no array
FAILED_STATES = ("FAILED",)  # a job that could not run the wrapper at all; anything else that ended it killed it
# The batch-script generator's flags, as the sweep section spells them, for its error messages.
SWEEP_FLAGS = {
    "--nodes": "--sweep.slurm_nodes",
    "--gpus-per-node": "--sweep.slurm_gpus_per_node",
    "--partition": "--sweep.slurm_partition",
    "--account": "--sweep.slurm_account",
    "--time": "--sweep.slurm_time",
    "--signal-lead": "--sweep.slurm_signal_lead",
    "--cpus-per-task": "--sweep.slurm_cpus_per_task",
}


class SlurmTrials:
    """Each trial a SLURM job of `options.slurm_nodes` nodes, checked as the batch-script generator checks a job."""

    on_this_machine = False  # rank 0 runs on a node: the channel does not watch the driver's process id

    def __init__(self, options, base: dict, base_path: Path):
        argv = ["--nodes", str(options.slurm_nodes), "--gpus-per-node", str(options.slurm_gpus_per_node)]
        argv += ["--config", str(base_path), "--signal-lead", str(options.slurm_signal_lead)]
        for flag, value in (
            ("--partition", options.slurm_partition),
            ("--account", options.slurm_account),
            ("--time", options.slurm_time),
            ("--cpus-per-task", options.slurm_cpus_per_task),
        ):
            if value is not None:
                argv += [flag, str(value)]
        chosen = strategy_arguments((base.get("trainer") or {}).get("strategy"))
        try:
            self.request, _ = parse_request([*argv, SEPARATOR, *chosen], config_anywhere=True)
        except UserInputError as error:
            message = re.sub(r"--[a-z-]+", lambda flag: SWEEP_FLAGS.get(flag[0], flag[0]), str(error))
            raise UserInputError(message) from None
        request = self.request
        self.parameters = {
            "nodes": request.nodes,
            "ntasks_per_node": request.tasks_per_node,
            "time": request.time_limit,  # None: the partition's limit (submitit's own default is 5 minutes)
            "setup": [MASTER_PORT_LINE],
            "stderr_to_stdout": True,
            # SIGTERM to the tasks ahead of the limit, instead of submitit's USR2 and its own requeue.
            "additional_parameters": {"signal": f"TERM@{request.signal_lead_s}"},
        }
        optional = {
            "gpus_per_node": request.gpus_per_node or None,
            "cpus_per_task": request.cpus_per_task,
            "partition": request.partition,
            "account": request.account,
        }
        self.parameters.update({key: value for key, value in optional.items() if value is not None})

    def take(self) -> list[str]:
        return launcher_arguments(self.request)

    def give_back(self, arguments: list[str]) -> None:
        pass

    def channel(self, name: str, directory: Path) -> DriverSide:
        return DriverSide(directory / "channel")

    def start(self, cli: Path, arguments: list[str], directory: Path, port: int) -> "SlurmTrial":
        """Submit the trial's job, or watch the job an earlier driver left running. `port` is unused: the job's
        rank 0 takes the port of its job id on its own node."""
        earlier = self._earlier(directory)
        if earlier is not None:
            say(f"{directory.name}: SLURM job {earlier.job.job_id} still runs; watching it")
            return earlier
        trials.private_folder(directory / SUBMITIT)  # before submitit makes it after the umask
        executor = submitit.SlurmExecutor(folder=directory / SUBMITIT)  # tasks run this Python
        executor.update_parameters(job_name=f"{directory.parent.name}-{directory.name}", **self.parameters)
        job = executor.submit(run_task, [sys.executable, str(cli), "fit", *arguments], str(directory / LOG))
        (directory / JOB_ID).write_text(job.job_id)
        (directory / JOB_ID).chmod(0o600)  # `check_only_mine` reads it, whatever the umask
        say(f"{directory.name}: SLURM job {job.job_id} submitted ({self.request.nodes} node(s))")
        return SlurmTrial(job, directory)

    def stop(self, trial: "SlurmTrial") -> None:
        trial.stop()

    def _earlier(self, directory: Path) -> "SlurmTrial | None":
        path = directory / JOB_ID
        if not path.exists():
            return None
        trials.check_only_mine(directory, path)  # the job the driver would cancel, and whose results it would read
        job_id = path.read_text()
        if not JOB_ID_TEXT.fullmatch(job_id):
            raise UserInputError(f"{path} holds {job_id[:40]!r}, not a SLURM job id; delete it if no job of it runs")
        tasks = range(self.request.processes)
        job = submitit.SlurmJob(folder=directory / SUBMITIT, job_id=job_id, tasks=tasks)
        trial = SlurmTrial(job, directory)
        return None if trial.job.done(force_check=True) else trial


class SlurmTrial:
    """One trial's job, read as a process: `poll()` is None while it runs, then the tasks' exit status."""

    def __init__(self, job: submitit.SlurmJob, directory: Path):
        self.job, self.directory = job, directory
        self.cancelled = False
        self._checked_at = time.monotonic()

    def poll(self) -> int | None:
        tasks = [self.job.task(task) for task in range(self.job.num_tasks)]
        if all(task.paths.result_pickle.exists() for task in tasks):
            return self._exit_status(tasks)
        if time.monotonic() - self._checked_at < STATE_CHECK_S:
            return None
        self._checked_at = time.monotonic()
        if not self.job.done(force_check=True):
            return None
        if all(task.paths.result_pickle.exists() for task in tasks):  # written since
            return self._exit_status(tasks)
        state = self.job.state
        with (self.directory / LOG).open("a") as log:
            log.write(f"SLURM job {self.job.job_id} ended {state} without every task's exit status\n")
        return 1 if state.split()[0] in FAILED_STATES else KILLED

    def stop(self) -> None:
        """Cancel the job once: the tasks get SIGTERM, checkpoint and exit 143."""
        if not self.cancelled:
            self.job.cancel(check=False)
            self.cancelled = True

    def _exit_status(self, tasks: list[submitit.SlurmJob]) -> int:
        """The first task's (by rank) non-zero status, else 0; a wrapper that failed itself counts as 1. submitit
        unpickles each result: only from a trial folder that no other user can write."""
        statuses = []
        for task in tasks:
            trials.check_only_mine(self.directory, task.paths.result_pickle)
            try:
                statuses.append(task.result())
            except submitit.core.utils.FailedJobError:
                statuses.append(1)
        return next((status for status in statuses if status), 0)


def run_task(command: list[str], log: str) -> int:
    """One srun task: the training command as a child process writing to the trial's log, its exit status returned
    (as a shell reports it: 128 + the signal that killed it). Runs on the job's node, in the submitting directory."""
    # The job's own MASTER_PORT stays; variables of a job the driver itself ran in go.
    environment = {key: value for key, value in os.environ.items() if key == "MASTER_PORT" or key not in JOB_VARIABLES}
    # submitit pickles what this returns, in this process: into a file no other user may write, or the driver refuses
    # to read it (`check_only_mine`). The training keeps the user's umask.
    umask = os.umask(0o022)
    os.umask(umask | 0o022)
    with open(log, "ab") as output:
        command_run = subprocess.run(command, stdout=output, stderr=subprocess.STDOUT, env=environment, umask=umask)
    status = command_run.returncode
    return 128 - status if status < 0 else status
