"""How a process runs a `cli.py` job: `run` builds the TemplateCLI with the user's choices and releases what the job
opened; `main`, for `python cli.py ...`, ends the process with the status a launcher or a cluster's restart policy
acts on (trainrig/errors/exit_status.py)."""

import gc
import logging
import sys
import warnings
from collections.abc import Callable, Collection

from trainrig.cli.template_cli import TemplateCLI
from trainrig.errors import exit_status, find_user_error, lost_peer, one_line
from trainrig.errors.held_output import held_output
from trainrig.network import RanksCannotConnect, rendezvous_network
from trainrig.registry import hooks
from trainrig.resume.torchrun_restarts import separate_restart_attempts
from trainrig.strategies.strategy_option import TIMEOUT_FLAG

__all__ = ["main", "release_job_resources", "run", "silence_library_noise"]


def run(
    args: list[str] | None,
    *,
    job: Callable[[list[str] | None], None],
    data_to_model_links: Collection[str],
    trainer_defaults: dict,
) -> None:
    """Parse `args` and run the subcommand, letting errors propagate (a launcher's worker sends them to its client).

    `job` is the caller (cli.py's `run`), which a launcher runs on every process it starts."""
    silence_library_noise()
    try:
        with rendezvous_network():
            TemplateCLI(args=args, job=job, data_to_model_links=data_to_model_links, trainer_defaults=trainer_defaults)
    finally:
        release_job_resources()


@exit_status.entry_point
def main(job: Callable[[list[str] | None], None], args: list[str] | None = None) -> None:
    """`job(args)` as the whole process. Exit statuses: DONE; BAD_INPUT, the user's mistake in one line (never worth a
    retry); STOPPED by SIGTERM/SIGINT with a checkpoint; LOST_PEER, another process of the job was lost; 1 anything
    else. 128 and above: a restart resumes (`--ckpt_path last`)."""
    try:
        separate_restart_attempts()
        with held_output():
            job(args)
    except Exception as error:
        if find_user_error(error) is not None or (line := lost_peer_line(error)) is None:
            raise
        print(f"error: {line}", file=sys.stderr)
        sys.exit(exit_status.LOST_PEER)


def lost_peer_line(error: Exception) -> str | None:
    """The one line for a job that lost another of its processes, or could not reach them, or None. Retryable by a
    launcher or a cluster's restart policy, like NCCL's own abort on a collective timeout."""
    if isinstance(error, RanksCannotConnect):
        return f"{error}; exiting {exit_status.LOST_PEER}, a restart retries"
    if (peer_error := lost_peer(error)) is not None:
        line = one_line(peer_error)
        # A peer that only came back slowly (a loaded node, a pod's back-off) looks the same as a lost one once the
        # wait for it times out: the line names the option that lengthens the wait.
        timed_out = "timed out" in line.lower() or "timeout" in line.lower()
        slow = f"; a peer slower to come back needs a longer {TIMEOUT_FLAG}" if timed_out else ""
        status = f"exiting {exit_status.LOST_PEER}, a restart resumes"
        return f"lost another process of the job ({type(peer_error).__name__}: {line}){slow}; {status}"
    return None


def silence_library_noise() -> None:
    """Leave out what no user of this project can act on: Lightning's tip for a product the project does not use,
    and torch's deprecation of a class Lightning's own code still uses. Every other warning still shows."""
    warnings.filterwarnings(
        "ignore",
        message=r"`isinstance\(treespec, LeafSpec\)` is deprecated",
        category=FutureWarning,
        module=r"lightning\.pytorch\.utilities\._pytree",
    )
    logging.getLogger("lightning.pytorch.utilities.rank_zero").addFilter(not_a_litlogger_tip)


def not_a_litlogger_tip(record: logging.LogRecord) -> bool:
    return "try installing [litlogger]" not in record.getMessage()


def release_job_resources() -> None:
    """Close what the job opened before the process, or the next job in the same process, goes on."""
    for release in hooks("release"):
        release()
    # Left to exit handlers, gloo's threads can abort the process after a successful run
    # ("terminate called without an active exception"), and a process that runs another job
    # (a launcher's worker) must not find this one's process group. The job's objects (trainer,
    # strategy, pipeline stages) hold groups in reference cycles: collected first, each group is
    # freed here, its threads joined, rather than during the interpreter's shutdown.
    distributed = sys.modules.get("torch.distributed")
    if distributed is not None and distributed.is_available() and distributed.is_initialized():
        gc.collect()
        distributed.destroy_process_group()
        gc.collect()
