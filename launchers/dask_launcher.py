"""`--dask.n_workers N` / `--dask.address tcp://HOST:8786`: the same cli.py run as DDP over the workers of a Dask
cluster.

The client (this process) only parses the config. It pins one `dask_worker.run_rank` task to each
worker, and each task runs cli.py as one DDP rank. While they train, rank 0's epoch metrics arrive
here as Dask events; at the end rank 0's run directory (metrics, checkpoints) comes back as bytes
and is written to this machine's log directory. A task that raises or a worker that dies stops the
run: the client names the rank, the worker and the cause, cancels the rest and exits non-zero.
"""

import csv
import io
import logging
import os
import re
import signal
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import timedelta
from importlib import import_module
from pathlib import Path

import dask
import yaml
from distributed import Client, Event, Future, LocalCluster, Queue
from distributed.comm import get_address_host
from distributed.security import Security
from distributed.utils import open_port
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.strategies import DDPStrategy

from errors import UserInputError, find_user_error, lost_peer, one_line
from launchers import DaskOptions
from launchers.dask_worker import (
    DaskRankEnvironment,
    MetricsToClient,
    as_list,
    class_path,
    first_step_event,
    job_reference,
    run_rank,
)
from logger_extensions import extension
from resume.atomic_io import write_atomically
from resume.checkpoint import keep_as_previous
from resume.csv_logger import drop_rows_from_step
from resume.latest import RUN_FOLDERS, checkpoint_candidates, first_usable
from resume.preemption import STOP_SIGNALS, Preempted, restore_handlers
from resume.run_directory import CONFIG_FILE, METRICS_FILE, SAVED_CONFIG, config_file_to_write, next_version
from strategy_flag import with_launcher_timeout

log = logging.getLogger(__name__)
log.setLevel(logging.INFO)
if not logging.getLogger().hasHandlers():
    log.addHandler(logging.StreamHandler(sys.stdout))
    log.propagate = False

POLL_S = 0.5
# After a first failure, how long to keep watching so that the report names a dead worker (the cause)
# rather than the other ranks' broken-connection errors (the symptom).
SETTLE_S = 2.0
# Seconds for cluster housekeeping: connecting, restarting workers, picking the port.
CLUSTER_TIMEOUT_S = 60
# How long a restart waits for the workers of the failed attempt to be back (a nanny restarts a dead worker within
# seconds) before it goes on with fewer (--dask.min_workers) or fails.
REPLACEMENT_WAIT_S = 30
# How long the rendezvous and every collective wait for the other ranks when the strategy sets no timeout of its
# own (--trainer.strategy.init_args.timeout): a lost rank fails the run in minutes, not torch's 30.
RANK_TIMEOUT = timedelta(minutes=10)
# See DaskOptions.max_restarts.
EMBEDDED_MAX_RESTARTS = 1
EXISTING_MAX_RESTARTS = 3
URL_ONLY = re.compile(r"\S+://\S+")
DEATH_MESSAGE = re.compile(r"Worker process (\d+) (.+)")
EMBEDDED_CLUSTER_CONFIG = {
    # DataLoader workers are child processes, which a daemonic Dask worker may not start.
    "distributed.worker.daemon": False,
    # Dask's background work takes the GIL and a core from training (measured: ~15% of a short
    # run's training time): no task profiler, which samples the training thread's stack every
    # 10 ms, and slower event-loop, system and memory monitors.
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.worker.memory.monitor-interval": "1s",
    # Pinned tasks cannot move, so the scheduler need not look for tasks to steal.
    "distributed.scheduler.work-stealing": False,
}
REMOVAL_STIMULI = {
    "handle-worker-cleanup": "its connection to the scheduler closed",
    "check-worker-ttl": "the scheduler heard nothing from it for distributed.scheduler.worker-ttl",
}
# Special --ckpt_path values Lightning resolves itself; a path is read here and sent to the workers.
CHECKPOINT_KEYWORDS = {"last", "best", "hpc", "registry"}


def launch(job: Callable[[list[str]], None], subcommand: str, resolved: dict) -> None:
    """Run `job([subcommand, "--config", FILE])` on every rank, on the Dask cluster the config's `dask` section names.

    A failure that a retry can fix starts every rank again from the newest checkpoint, up to `max_restarts` times.

    Args:
        job: the entry point each rank runs (cli.py's `run`), sent to the workers by reference.
        resolved: the subcommand's whole parsed config as plain data, as `--print_config` shows it.
    """
    options = DaskOptions(**resolved["dask"])
    config_text = yaml.safe_dump(resolved, sort_keys=False)  # before the run's version is pinned below
    check_options(options)
    output_root = client_output_root(resolved)
    pin_run_version(resolved, output_root)
    strategy = rank_strategy(resolved["trainer"].get("strategy", "auto"))
    check_one_device_per_rank(resolved["trainer"])
    checkpoint = read_local_checkpoint(resolved.get("ckpt_path"))
    # The run's checkpoints in the shared directory, in the run's own folder: another run never overwrites them.
    shared_dir = (
        Path(options.checkpoint_dir) / run_folder(resolved) / "checkpoints"
        if options.checkpoint_dir is not None
        else None
    )
    if shared_dir is not None and resolved.get("ckpt_path") is not None:
        checkpoint = resolved["ckpt_path"]  # resolved in the shared directory, which the ranks read themselves

    with ExitStack() as stack:
        client, embedded = stack.enter_context(connected_client(options))
        death_reasons = stack.enter_context(recorded_worker_deaths())
        if options.restart:
            log.info("dask: restarting the cluster's workers")
            client.restart(timeout=CLUSTER_TIMEOUT_S)
        max_restarts = options.max_restarts
        if max_restarts is None:
            max_restarts = EMBEDDED_MAX_RESTARTS if embedded else EXISTING_MAX_RESTARTS
        ranks, previous_cause = None, None
        for restart in range(max_restarts + 1):
            workers = chosen_workers(client, options, ranks)
            ranks = ranks or len(workers)
            receiver = CheckpointReceiver(client, output_root, shared_dir)
            try:
                results = run_attempt(job, subcommand, resolved, strategy, client, workers, checkpoint, receiver)
            except RankFailure as failure:
                cause = failure.cause(death_reasons)
                # Failing again the same way before any training step: a restart would only repeat it.
                repeated = not failure.stepped and cause == previous_cause
                last = restart == max_restarts or failure.user_error is not None or repeated
                # Read before cancelling changes what it reads; a user error needs its one line, no traceback.
                report = failure.report(death_reasons, tracebacks=last and failure.user_error is None)
                stop_ranks(client, failure.futures, workers, cluster_closes=embedded and last)
                if failure.user_error is not None:  # bad input fails the same way every time
                    raise failure.user_error from None
                if repeated:
                    raise SystemExit(
                        f"error: the Dask run stopped: {report} (again before the first training step, as in the "
                        "attempt before: a restart does not heal it)"
                    ) from None
                if last:
                    restarts = f" after {max_restarts} restart(s)" if max_restarts else ""
                    raise SystemExit(f"error: the Dask run stopped{restarts}: {report}") from None
                previous_cause = cause
                checkpoint, step = receiver.resume_point(checkpoint)
                resumed = f"resuming at step {step}" if step is not None else "from the start: no checkpoint yet"
                log.info(f"dask: {report}; restart {restart + 1} of {max_restarts}, {resumed}")
                continue
            destination = write_run_dir(results[0], output_root, config_text, receiver.metrics_bases)
            log.info(f"dask: rank 0's results are in {destination}")
            if any(result["preempted"] for result in results):
                log.info(
                    f"dask: stopped with a checkpoint in {shared_dir or destination / 'checkpoints'}; "
                    "the same command with --ckpt_path last continues the run"
                )
                raise Preempted
            return


def check_options(options: DaskOptions) -> None:
    for name in ("n_workers", "min_workers"):
        if getattr(options, name) is not None and getattr(options, name) < 1:
            raise UserInputError(f"--dask.{name} must be at least 1, got {getattr(options, name)}")
    if options.max_restarts is not None and options.max_restarts < 0:
        raise UserInputError(f"--dask.max_restarts must be 0 or more, got {options.max_restarts}")
    for name in ("min_workers", "workers"):
        if getattr(options, name) is not None and options.address is None:
            raise UserInputError(f"--dask.{name} applies to an existing cluster (--dask.address)")
    if options.workers is not None:
        if not options.workers or len(set(options.workers)) != len(options.workers):
            raise UserInputError(f"--dask.workers must name distinct workers, got {options.workers}")
        if options.n_workers is not None and options.n_workers != len(options.workers):
            raise UserInputError(
                f"--dask.n_workers {options.n_workers} disagrees with the {len(options.workers)} --dask.workers"
            )


def run_attempt(
    job: Callable,
    subcommand: str,
    resolved: dict,
    strategy: dict,
    client: Client,
    workers: list[str],
    checkpoint: bytes | str | None,
    receiver: "CheckpointReceiver",
) -> list[dict]:
    """Run every rank once: their results, or a RankFailure with the ranks still pinned to their workers."""
    pids = client.run(os.getpid, workers=workers)
    main_address = get_address_host(workers[0])
    main_port = client.submit(open_port, workers=[workers[0]], pure=False, allow_other_workers=False).result(
        timeout=CLUSTER_TIMEOUT_S
    )
    for rank, worker in enumerate(workers):
        log.info(f"dask: rank {rank} on worker {worker} (pid {pids[worker]})")

    topic = f"lightning-dask-{uuid.uuid4().hex}"
    client.subscribe_topic(topic, show_metrics)
    config = rank_run_config(resolved, strategy, len(workers), topic, receiver.queue_name, receiver.shared_dir)
    if isinstance(checkpoint, str):  # in the shared checkpoint directory, which the ranks read themselves
        config["ckpt_path"], checkpoint = checkpoint, None
    rank_config = yaml.safe_dump(config, sort_keys=False)
    shipped_checkpoint = client.scatter(checkpoint, broadcast=True) if checkpoint is not None else None
    stop_event = f"{topic}-stop"
    futures = [
        client.submit(
            run_rank,
            job_reference(job),
            subcommand,
            rank_config,
            rank,
            len(workers),
            main_address,
            main_port,
            shipped_checkpoint,
            stop_event,
            receiver.queue_name,
            receiver.shared_dir is None,
            key=f"{topic}-rank{rank}",
            workers=[worker],
            pure=False,
            allow_other_workers=False,
        )
        for rank, worker in enumerate(workers)
    ]
    try:
        with stop_requests_forwarded(client, stop_event):
            failed = wait_for_ranks(client, futures, workers, on_poll=receiver.receive)
        receiver.receive()
    except BaseException:  # a second Ctrl-C here must not leave ranks training on an existing cluster
        stop_ranks(client, futures, workers, cluster_closes=False)
        raise
    if failed:
        stepped = Event(first_step_event(topic), client=client).is_set()
        raise RankFailure(client, failed, futures, workers, pids, stepped)
    return [future.result() for future in futures]


@contextmanager
def stop_requests_forwarded(client: Client, stop_event: str) -> Iterator[None]:
    """The first SIGINT or SIGTERM to this process asks every rank to checkpoint and stop; the next one interrupts."""
    previous: dict = {}

    def forward(signum: int, frame) -> None:
        restore_handlers(previous)  # a second signal takes the default path: KeyboardInterrupt or termination
        log.info(f"dask: {signal.Signals(signum).name}: every rank checkpoints at its next step, then the run stops")
        Event(stop_event, client=client).set()

    if threading.current_thread() is threading.main_thread():
        previous = {signum: signal.signal(signum, forward) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        restore_handlers(previous)


@contextmanager
def connected_client(options: DaskOptions) -> Iterator[tuple[Client, bool]]:
    """A client of the cluster at `options.address`, or of an embedded LocalCluster that is closed on exit."""
    if options.address is not None:
        check_tls_settings(options.address)
        try:
            client = Client(options.address, timeout=CLUSTER_TIMEOUT_S)
        except OSError as error:
            raise UserInputError(
                f"cannot reach the Dask scheduler at {options.address} ({one_line(error)}); check --dask.address"
            ) from error
        with client:
            yield client, False
        return
    threads_per_rank = os.environ.get("OMP_NUM_THREADS") or str(max(1, (os.cpu_count() or 1) // options.n_workers))
    with dask.config.set(EMBEDDED_CLUSTER_CONFIG):
        log.info(f"dask: starting a LocalCluster with {options.n_workers} worker processes")
        with (
            LocalCluster(
                n_workers=options.n_workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                # The client reports a failed task itself, in one line; the workers' own error logs would repeat it.
                silence_logs=logging.CRITICAL,
                env={"OMP_NUM_THREADS": threads_per_rank, "MKL_NUM_THREADS": threads_per_rank},
            ) as cluster,
            Client(cluster) as client,
        ):
            yield client, True


def check_tls_settings(address: str) -> None:
    """A tls:// scheduler takes clients with a certificate its CA signed, given in Dask's configuration."""
    security = Security()
    if address.startswith("tls://") and None in (security.tls_ca_file, security.tls_client_cert):
        raise UserInputError(
            f"--dask.address {address} is a TLS scheduler: give this client the CA's certificate and its own "
            "certificate and key in Dask's config (distributed.comm.tls.ca-file, .client.cert, .client.key, e.g. "
            "DASK_DISTRIBUTED__COMM__TLS__CA_FILE, DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT and "
            "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY)"
        )


class WorkerDeathLog(logging.Handler):
    """Keeps the nanny's "Worker process PID was killed by signal 9" lines, the cause of a death on an embedded
    cluster."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.reasons: dict[int, str] = {}

    def emit(self, record: logging.LogRecord) -> None:
        match = DEATH_MESSAGE.fullmatch(record.getMessage())
        if match:
            self.reasons[int(match.group(1))] = match.group(2)


@contextmanager
def recorded_worker_deaths() -> Iterator[dict[int, str]]:
    """pid -> how that worker process ended, as reported by the nannies running in this process."""
    handler = WorkerDeathLog()
    nanny_log = logging.getLogger("distributed.nanny")
    nanny_log.addHandler(handler)
    try:
        yield handler.reasons
    finally:
        nanny_log.removeHandler(handler)


def chosen_workers(client: Client, options: DaskOptions, ranks: int | None = None) -> list[str]:
    """Worker addresses in a stable order; rank i runs on the i-th. A restart (`ranks` known) waits for as many."""
    if options.workers is not None:
        return named_workers(client, options.workers, restart=ranks is not None)
    wanted = ranks or options.n_workers
    if wanted is not None:
        try:
            client.wait_for_workers(wanted, timeout=REPLACEMENT_WAIT_S if ranks else CLUSTER_TIMEOUT_S)
        except TimeoutError as error:
            found = len(client.scheduler_info()["workers"])
            if ranks is None:
                raise UserInputError(
                    f"the Dask cluster has {found} worker(s) but --dask.n_workers asks for {options.n_workers}"
                ) from error
            if found < (options.min_workers or ranks):
                raise SystemExit(
                    f"error: the Dask run stopped: {found} healthy worker(s) left for {ranks} ranks "
                    f"(--dask.min_workers {options.min_workers or ranks})"
                ) from error
            log.info(
                f"dask: continuing with {found} of {ranks} ranks (--dask.min_workers {options.min_workers}): each "
                "keeps its batch size and the learning rate, so the global batch is smaller"
            )
            wanted = found
    workers = sorted(client.scheduler_info()["workers"])
    if not workers:
        raise UserInputError(f"the Dask cluster at {options.address} has no workers")
    return workers[:wanted]


def named_workers(client: Client, names: list[str], restart: bool) -> list[str]:
    """The addresses of the workers `--dask.workers` names, once all of them are connected."""
    deadline = time.monotonic() + (REPLACEMENT_WAIT_S if restart else CLUSTER_TIMEOUT_S)
    while True:
        workers = client.scheduler_info(n_workers=-1)["workers"]
        by_name = {str(worker.get("name")): address for address, worker in workers.items()}
        found = {**by_name, **{address: address for address in workers}}
        missing = [name for name in names if name not in found]
        if not missing:
            return [found[name] for name in names]
        if time.monotonic() > deadline:
            message = f"the Dask cluster at {client.scheduler.address} has no worker named {', '.join(missing)}"
            if restart:
                raise SystemExit(f"error: the Dask run stopped: {message}")
            raise UserInputError(f"{message} (--dask.workers); its workers: {', '.join(sorted(by_name)) or 'none'}")
        time.sleep(POLL_S)


def rank_strategy(strategy) -> dict:
    """The trainer.strategy entry every rank runs: the chosen DDP-style strategy, with the launcher's timeout unless
    the strategy has its own."""
    entry = with_launcher_timeout(strategy, DDPStrategy, RANK_TIMEOUT)
    strategy_class = import_class(entry["class_path"])
    if not issubclass(strategy_class, DDPStrategy):
        raise UserInputError(
            f"the Dask launcher runs one DDP process per worker; --trainer.strategy {strategy} is not "
            "DDP-based (use ddp or pipeline)"
        )
    # Dask started the processes: a spawn or fork start method would make Lightning start more.
    entry["init_args"].pop("start_method", None)
    if "timeout" not in entry["init_args"]:
        log.warning(f"dask: {strategy_class.__name__} takes no timeout, so a lost rank can leave the others waiting")
    return entry


def import_class(path: str) -> type:
    module_name, _, class_name = path.rpartition(".")
    return getattr(import_module(module_name), class_name)


def check_one_device_per_rank(trainer: dict) -> None:
    """Each Dask worker runs one rank on one device; more devices or nodes would contradict the worker count."""
    if str(trainer.get("devices", "auto")) not in ("auto", "1") or trainer.get("num_nodes", 1) != 1:
        raise UserInputError(
            "with --dask.* every worker runs one rank on one device: set --trainer.devices 1 and --trainer.num_nodes 1 "
            "(or leave them unset) and choose the number of ranks with --dask.n_workers"
        )


def read_local_checkpoint(ckpt_path: str | None) -> bytes | None:
    """The bytes of a --ckpt_path on this machine, which the workers may not see; None leaves the path to them."""
    if ckpt_path is None or ckpt_path in CHECKPOINT_KEYWORDS or not Path(ckpt_path).is_file():
        return None
    return Path(ckpt_path).read_bytes()


def rank_run_config(
    resolved: dict, strategy: dict, world_size: int, topic: str, queue: str, shared_dir: Path | None = None
) -> dict:
    """The config every rank runs: the user's, minus the dask section, as one DDP process per node; its checkpoints in
    `shared_dir` when given."""
    config = {key: value for key, value in resolved.items() if key != "dask"}
    trainer = config["trainer"] = dict(config["trainer"])
    trainer.update(strategy=strategy, devices=1, num_nodes=world_size)
    if shared_dir is not None:
        trainer["callbacks"] = [
            {**callback, "init_args": {**(callback.get("init_args") or {}), "dirpath": str(shared_dir)}}
            if isinstance(callback, dict) and issubclass(import_class(callback["class_path"]), ModelCheckpoint)
            else callback
            for callback in as_list(trainer.get("callbacks"))
        ]
    trainer["plugins"] = [*as_list(trainer.get("plugins")), {"class_path": class_path(DaskRankEnvironment)}]
    trainer["callbacks"] = [
        *as_list(trainer.get("callbacks")),
        {"class_path": class_path(MetricsToClient), "init_args": {"topic": topic, "queue": queue}},
    ]
    return config


def show_metrics(event: tuple[float, dict]) -> None:
    """Print one epoch's metrics from rank 0 (a Dask event) on the client."""
    _, message = event
    values = "  ".join(f"{name} {value:.4g}" for name, value in sorted(message["metrics"].items()))
    where = f"epoch {message['epoch']} step {message['step']}" if message["stage"] == "fit" else message["stage"]
    log.info(f"dask: {where}: {values}")


def wait_for_ranks(client: Client, futures: list, workers: list[str], on_poll=lambda: None) -> set[int]:
    """Block until every rank finished (returns an empty set) or one failed (returns the ranks that failed)."""
    first_failure_at = None
    while True:
        on_poll()
        alive = set(client.nthreads())  # the cheapest way to ask the scheduler which workers it has
        failed = {
            rank
            for rank, (future, worker) in enumerate(zip(futures, workers))
            if future.status in ("error", "cancelled") or (future.status == "pending" and worker not in alive)
        }
        if not failed and all(future.status == "finished" for future in futures):
            return set()
        if failed:
            first_failure_at = first_failure_at or time.monotonic()
            settled = all(future.status == "finished" or rank in failed for rank, future in enumerate(futures))
            if settled or time.monotonic() - first_failure_at >= SETTLE_S:
                return failed
        time.sleep(POLL_S)


def stop_ranks(client: Client, futures: list, workers: list[str], cluster_closes: bool) -> None:
    """Cancel every rank and restart the workers whose rank is still running, unless the cluster closes anyway.

    Cancelling a running task does not stop its thread, which would wait in a collective for the
    failed rank until the timeout.
    """
    alive = set(client.scheduler_info()["workers"])
    still_running = [
        worker for future, worker in zip(futures, workers) if future.status == "pending" and worker in alive
    ]
    client.cancel(futures, force=True)
    if still_running and not cluster_closes:
        log.info(f"dask: restarting workers {still_running}, whose ranks were still running")
        client.restart_workers(still_running, timeout=CLUSTER_TIMEOUT_S, raise_for_error=False)


class RankFailure(Exception):
    """Ranks of one attempt failed: which, on which worker, and why; `user_error` when a rank reported bad input;
    `stepped` when rank 0 had taken a training step."""

    def __init__(
        self,
        client: Client,
        failed: set[int],
        futures: list,
        workers: list[str],
        pids: dict[str, int],
        stepped: bool = False,
    ):
        super().__init__(failed)
        self.client, self.failed, self.futures, self.workers, self.pids = client, failed, futures, workers, pids
        self.stepped = stepped
        self.user_error = None
        if all(futures[rank].status == "error" for rank in failed):  # no dead worker: the ranks' own errors
            user_errors = [(rank, find_user_error(futures[rank].exception())) for rank in sorted(failed)]
            rank, user_error = next(((rank, error) for rank, error in user_errors if error is not None), (None, None))
            if user_error is not None:
                self.user_error = UserInputError(f"{self._where(rank)}: {one_line(user_error)}")

    def _where(self, rank: int) -> str:
        worker = self.workers[rank]
        return f"rank {rank} (Dask worker {worker}, pid {self.pids[worker]})"

    def _deaths(self, death_reasons: dict[int, str]) -> list[tuple[int, str]]:
        """(rank, what ended it) for ranks whose worker died or whose task was cancelled."""
        deaths = []
        for rank in sorted(self.failed):
            future, worker = self.futures[rank], self.workers[rank]
            if future.status == "cancelled":
                deaths.append((rank, "was cancelled outside this run"))
            elif future.status != "error":
                reason = death_reasons.get(self.pids[worker]) or removal_reason(self.client, worker)
                deaths.append((rank, f"died: {reason}"))
        return deaths

    def _errors(self) -> list[tuple[int, BaseException]]:
        return [
            (rank, self.futures[rank].exception())
            for rank in sorted(self.failed)
            if self.futures[rank].status == "error"
        ]

    def cause(self, death_reasons: dict[int, str]) -> frozenset[str]:
        """What failed, without ranks, addresses or numbers: equal for two attempts that failed the same way.

        A dead worker is the cause when there is one; else the ranks' own errors, broken connections to another
        rank only when nothing else failed.
        """
        if deaths := self._deaths(death_reasons):
            causes = [cause for _, cause in deaths]
        else:
            errors = self._errors()
            own = [error for _, error in errors if lost_peer(error) is None] or [error for _, error in errors]
            causes = [underlying_cause(error) for error in own]
        return frozenset(re.sub(r"\d+", "#", cause) for cause in causes)

    def report(self, death_reasons: dict[int, str], tracebacks: bool = False) -> str:
        """One line: a dead worker or a cancelled task is the cause; other ranks' errors then are broken connections.

        With `tracebacks`, the errors of ranks that raised on their own are also logged in full.
        """
        deaths = self._deaths(death_reasons)
        errors = [] if deaths else self._errors()  # else broken connections to the dead or cancelled rank
        for rank, error in errors if tracebacks else []:
            log.error(f"dask: {self._where(rank)} raised:\n{''.join(traceback.format_exception(error))}")
        reports = [f"{self._where(rank)} {cause}" for rank, cause in deaths]
        reports += [f"{self._where(rank)} failed: {underlying_cause(error)}" for rank, error in errors]
        # A rank still running when another timed out waiting for it is the one that hung.
        running = [
            f"rank {rank} (Dask worker {self.workers[rank]})"
            for rank, future in enumerate(self.futures)
            if rank not in self.failed and future.status == "pending"
        ]
        if running:
            reports.append(f"still running: {', '.join(running)}")
        return "; ".join(reports)


def underlying_cause(error: BaseException) -> str:
    """`Type: message` of `error` in one line; when its message ends in a bare URL (Dask's "Error during
    deserialization of the task graph ... see https://..."), of the exception that caused it, with the first
    sentence of the wrapper after it: the ModuleNotFoundError says what, the wrapper where."""
    line = one_line(error)
    if not (URL_ONLY.fullmatch(line) and error.__cause__ is not None):
        return f"{type(error).__name__}: {line}"
    root = error.__cause__
    while root.__cause__ is not None and root.__cause__ is not root:
        root = root.__cause__
    wrapper = " ".join(str(error).split()).split(". ")[0].rstrip(".")
    return f"{type(root).__name__}: {one_line(root)} ({type(error).__name__}: {wrapper})"


def removal_reason(client: Client, worker: str) -> str:
    """Why the scheduler dropped a worker whose nanny, if any, is not in this process to say how its process ended."""
    removals = [message for _, message in client.get_events(worker) if message.get("action") == "remove-worker"]
    stimulus = re.sub(r"-[\d.]+$", "", removals[-1]["stimulus_id"]) if removals else None
    explanation = REMOVAL_STIMULI.get(
        stimulus, f"the scheduler removed it ({stimulus})" if stimulus else "it left the cluster"
    )
    return f"{explanation}; see the worker's log (crashed, killed or out of memory?)"


def client_output_root(resolved: dict) -> Path:
    """Where the run's logs would go on this machine: the first logger's save_dir, else the trainer's root dir."""
    trainer = resolved["trainer"]
    for logger in as_list(trainer.get("logger")):
        if isinstance(logger, dict) and (logger.get("init_args") or {}).get("save_dir"):
            return Path(logger["init_args"]["save_dir"])
    return Path(trainer.get("default_root_dir") or ".")


def run_folder(resolved: dict) -> Path:
    """The run's folder relative to the logger's save_dir (`<experiment>/<run>`), once its version is pinned."""
    loggers = [logger for logger in as_list(resolved["trainer"].get("logger")) if isinstance(logger, dict)]
    if not loggers:
        return Path()
    logger = loggers[0]
    argument_name, environment_variable, run_argument = RUN_FOLDERS.get(
        logger["class_path"].rsplit(".", 1)[-1], ("name", None, "version")
    )
    init_args = logger.get("init_args") or {}
    fallback = os.environ.get(environment_variable, "lightning_logs") if environment_variable else "lightning_logs"
    run = init_args.get(run_argument)
    return Path(init_args.get(argument_name) or fallback) / (
        f"version_{run}" if run_argument == "version" else str(run)
    )


def pin_run_version(resolved: dict, output_root: Path) -> None:
    """Fix the run's version directory before the ranks start, so checkpoints they send land in the right place and
    every restart of the job continues the same run."""
    loggers = as_list(resolved["trainer"].get("logger"))
    for configured in loggers:  # a logger that names its runs gets a name every attempt continues
        if not isinstance(configured, dict):
            continue
        pin_run = getattr(extension(configured.get("class_path", "").rsplit(".", 1)[-1]), "pin_run", None)
        if pin_run is not None and (pinned := pin_run(configured.setdefault("init_args", {}))):
            log.info(f"dask: {pinned}")
    logger = loggers[0] if loggers and isinstance(loggers[0], dict) else None
    run_argument = RUN_FOLDERS.get(logger["class_path"].rsplit(".", 1)[-1], (None,))[-1] if logger else None
    if run_argument != "version":  # numbered run folders only; other loggers name their runs
        return
    init_args = logger.setdefault("init_args", {})
    if init_args.get("version") is None:  # not resumed (`--ckpt_path last` sets the version it continues)
        init_args["version"] = next_version(output_root / (init_args.get("name") or "lightning_logs"))


class CheckpointReceiver:
    """Stores what rank 0 sends while it trains, under the client's output root as rank 0 has it: each checkpoint as
    it is written, and with it the attempt's metrics so far, added to the rows the run had before the attempt."""

    def __init__(self, client: Client, output_root: Path, shared_dir: Path | None = None):
        """
        Args:
            shared_dir: the `--dask.checkpoint_dir` the ranks write their checkpoints to; then only metrics are sent.
        """
        self.queue_name, self.output_root = f"lightning-dask-files-{uuid.uuid4().hex}", output_root
        self.shared_dir = shared_dir
        self._client, self._queue = client, Queue(self.queue_name, client=client)
        self.checkpoints: list[Path] = []
        self.metrics_bases: dict[Path, str | None] = {}  # metrics file -> its text before this attempt

    def receive(self) -> None:
        while self._queue.qsize():
            item = self._queue.get(timeout=CLUSTER_TIMEOUT_S)
            sent = item
            if isinstance(item, Future):  # a checkpoint, left on rank 0's worker until fetched
                try:
                    sent = item.result(timeout=CLUSTER_TIMEOUT_S)
                except Exception:  # noqa: BLE001 - lost with the worker that held it, before it was fetched
                    continue
                finally:
                    item.release()
            path = self.output_root / sent.path
            if sent.removed:
                path.unlink(missing_ok=True)
                self.checkpoints = [kept for kept in self.checkpoints if kept != path]
            elif path.suffix == ".ckpt":
                store_checkpoint(path, sent.data)
                self.checkpoints.append(path)
                if sent.stored_event is not None:
                    Event(sent.stored_event, client=self._client).set()
            else:
                if path not in self.metrics_bases:
                    self.metrics_bases[path] = path.read_text() if path.is_file() else None
                write_atomically(path, combined_metrics(self.metrics_bases[path], sent.data).encode())

    def resume_point(self, fallback: bytes | str | None) -> tuple[bytes | str | None, int | None]:
        """The newest usable checkpoint (its bytes, or its path in the shared directory, and its step), after dropping
        the metrics rows logged from its step on, which the restart logs again; else `fallback`, the checkpoint the
        attempt started from."""
        self.receive()
        directory = self.shared_dir or (self.checkpoints[-1].parent if self.checkpoints else None)
        checkpoint, progress = newest_checkpoint(directory)
        if checkpoint is None:
            return fallback, None
        for metrics in self.metrics_bases:
            drop_rows_from_step(metrics, progress["first_logged_step"])
        return (checkpoint if self.shared_dir else Path(checkpoint).read_bytes()), progress["global_step"]


def newest_checkpoint(directory: Path | None) -> tuple[str | None, dict]:
    """The newest usable checkpoint in `directory` and its progress counters, or None."""
    found = first_usable(checkpoint_candidates(directory)) if directory is not None and directory.is_dir() else None
    return (str(found[0]), found[1]) if found is not None else (None, {})


def store_checkpoint(path: Path, data: bytes) -> None:
    """Write atomically; a new last.ckpt keeps the one it replaces as previous.ckpt, as on the rank."""
    path.parent.mkdir(parents=True, exist_ok=True)
    keep_as_previous(path)
    write_atomically(path, data)


def write_run_dir(
    result: dict, output_root: Path, config_yaml: str, metrics_bases: dict[Path, str | None] | None = None
) -> Path:
    """Write what rank 0 wrote under `output_root`; a resumed run's metrics.csv continues the one there.

    `metrics_bases`: the metrics files' text before this attempt, where the attempt already sent rows.
    """
    destination = output_root / result["run_dir"]
    for relative_path, data in result["files"].items():
        path = output_root / relative_path
        in_run = path.relative_to(destination).as_posix() if path.is_relative_to(destination) else None
        path.parent.mkdir(parents=True, exist_ok=True)
        if in_run == METRICS_FILE:
            base = (metrics_bases or {}).get(path, path.read_text() if path.is_file() else None)
            write_atomically(path, combined_metrics(base, data).encode())
        elif path.suffix == ".ckpt":
            continue  # received while training, in the order they were written
        elif in_run is None or not SAVED_CONFIG.fullmatch(in_run):
            path.write_bytes(data)
    # The config that reproduces this run is the client's, with its dask section, not the one each rank ran.
    if (name := config_file_to_write(destination, config_yaml, CONFIG_FILE)) is not None:
        (destination / name).write_text(config_yaml)
    return destination


def combined_metrics(base: str | None, new_rows_csv: bytes) -> str:
    """A run's earlier metrics rows followed by an attempt's, under the union of both headers."""
    old = csv.DictReader(io.StringIO(base or ""))
    rows = list(old)
    fieldnames = list(old.fieldnames or [])
    new = csv.DictReader(io.StringIO(new_rows_csv.decode()))
    new_rows = list(new)
    fieldnames += [name for name in new.fieldnames or [] if name not in fieldnames]
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=sorted(fieldnames))
    writer.writeheader()
    writer.writerows(rows + new_rows)
    return text.getvalue()
