"""The part of the Dask launcher that runs inside each Dask worker: one DDP rank of the usual cli.py run.

The launcher pins one `run_rank` task to each worker. The task sets the rank's environment, points
every output at a worker-local temporary directory and runs cli.py on the launcher's config. Rank 0
sends its epoch metrics to the client while it trains and returns its run directory as bytes, so
nothing relies on a filesystem shared with the client.
"""

import multiprocessing
import os
import sys
import tempfile
import warnings
from pathlib import Path

import yaml
from lightning.fabric.plugins.environments import ClusterEnvironment
from lightning.pytorch import Callback, LightningModule, Trainer

# The input config lives outside the output root: a run without a logger writes config.yaml to its root.
LAUNCH_CONFIG = "launch.yaml"
OUTPUT_ROOT = "output"
CHECKPOINT_FILE = "resume.ckpt"


class DaskRankEnvironment(ClusterEnvironment):
    """Rank and world size as the launcher's task set them: Dask started the process, one rank per worker.

    Without it Lightning, seeing no LOCAL_RANK, would launch processes itself and every worker would
    believe it is global rank 0.
    """

    @property
    def creates_processes_externally(self) -> bool:
        return True

    @property
    def main_address(self) -> str:
        return os.environ["MASTER_ADDR"]

    @property
    def main_port(self) -> int:
        return int(os.environ["MASTER_PORT"])

    @staticmethod
    def detect() -> bool:
        """Never picked automatically: the launcher passes it as a trainer plugin."""
        return False

    def world_size(self) -> int:
        return int(os.environ["WORLD_SIZE"])

    def set_world_size(self, size: int) -> None:
        """The launcher fixed the world size; Lightning's num_nodes x devices equals it."""

    def global_rank(self) -> int:
        return int(os.environ["RANK"])

    def set_global_rank(self, rank: int) -> None:
        """The launcher fixed the rank."""

    def local_rank(self) -> int:
        return 0

    def node_rank(self) -> int:
        return self.global_rank()


class MetricsToClient(Callback):
    """Sends global rank 0's metrics at the end of each epoch to the launching client as a Dask event."""

    def __init__(self, topic: str):
        """
        Args:
            topic: the Dask event topic the client listens to for this run.
        """
        self.topic = topic

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._send(trainer, "fit")

    def on_validation_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.state.fn == "validate":
            self._send(trainer, "validate")

    def on_test_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._send(trainer, "test")

    def _send(self, trainer: Trainer, stage: str) -> None:
        if not trainer.is_global_zero:
            return
        from distributed import get_worker

        metrics = {name: float(value) for name, value in trainer.callback_metrics.items() if value.numel() == 1}
        get_worker().log_event(self.topic, {"stage": stage, "epoch": trainer.current_epoch, "step": trainer.global_step, "metrics": metrics})


def run_rank(
    subcommand: str,
    config_yaml: str,
    rank: int,
    world_size: int,
    main_address: str,
    main_port: int,
    checkpoint: bytes | None = None,
) -> dict | None:
    """Run cli.py as global rank `rank`; rank 0 returns its run directory as {"run_dir", "files": {path: bytes}}."""
    os.environ.update(MASTER_ADDR=main_address, MASTER_PORT=str(main_port), RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_RANK="0")
    # Lightning reads the rank for its rank-zero-only logging once, at import, which may have happened in an earlier task.
    from lightning_utilities.core.rank_zero import rank_zero_only

    rank_zero_only.rank = rank

    import cli

    with tempfile.TemporaryDirectory(prefix=f"dask-rank{rank}-") as workdir:
        config = yaml.safe_load(config_yaml)
        output_root = Path(workdir) / OUTPUT_ROOT
        write_outputs_under(config, output_root)
        if multiprocessing.current_process().daemon:
            load_data_in_process(config)
        if checkpoint is not None:
            config["ckpt_path"] = str(Path(workdir) / CHECKPOINT_FILE)
            Path(config["ckpt_path"]).write_bytes(checkpoint)
        launch_config = Path(workdir) / LAUNCH_CONFIG
        launch_config.write_text(yaml.safe_dump(config, sort_keys=False))
        # LightningCLI warns when it is given `args` while the process has command-line arguments (the worker's own).
        worker_argv, sys.argv = sys.argv, sys.argv[:1]
        try:
            cli.run([subcommand, "--config", str(launch_config)])
        finally:
            sys.argv = worker_argv
        return collect_run_dir(output_root) if rank == 0 else None


def write_outputs_under(config: dict, output_root: Path) -> None:
    """Point the loggers and the trainer's root dir at this worker's own directory."""
    trainer = config.setdefault("trainer", {})
    trainer["default_root_dir"] = str(output_root)
    loggers = trainer.get("logger")
    for logger in loggers if isinstance(loggers, list) else [loggers]:
        if isinstance(logger, dict) and "save_dir" in (logger.get("init_args") or {}):
            logger["init_args"]["save_dir"] = str(output_root)


def load_data_in_process(config: dict) -> None:
    """A daemonic Dask worker may not start DataLoader worker processes: load batches in the rank's own process."""
    data_args = (config.get("data") or {}).get("init_args") or {}
    if data_args.get("num_workers"):
        warnings.warn(
            f"this Dask worker is a daemonic process and cannot start DataLoader workers: loading data with num_workers=0 "
            f"instead of {data_args['num_workers']} (start the workers with DASK_DISTRIBUTED__WORKER__DAEMON=False to keep them)"
        )
        data_args["num_workers"] = 0


def collect_run_dir(output_root: Path) -> dict:
    """The run directory (where LightningCLI saved config.yaml) with every file in it, as bytes."""
    saved_configs = sorted(output_root.rglob("config.yaml"))
    run_dir = saved_configs[0].parent if saved_configs else output_root
    files = {path.relative_to(run_dir).as_posix(): path.read_bytes() for path in sorted(run_dir.rglob("*")) if path.is_file()}
    return {"run_dir": run_dir.relative_to(output_root).as_posix(), "files": files}
