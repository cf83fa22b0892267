"""The trainer flags a launcher derives from its job's shape (nodes, processes, devices) and puts after the config of
every process's `cli.py fit`: an override of them would break world size = nodes x processes per node."""

from trainrig.launch.strategy import JobStrategy, Placement
from trainrig.launch.timeouts import JOB_TIMEOUT
from trainrig.strategies.strategy_option import STRATEGY_FLAG, TIMEOUT_FLAG

__all__ = ["DDP_STRATEGY", "DERIVED_TRAINER_FLAGS", "trainer_flags"]

DDP_STRATEGY = "lightning.pytorch.strategies.DDPStrategy"  # what a job runs unless a strategy follows `--`
ACCELERATOR_FLAG = "--trainer.accelerator"
DEVICES_FLAG = "--trainer.devices"
NUM_NODES_FLAG = "--trainer.num_nodes"
PLUGINS_FLAG = "--trainer.plugins"
DERIVED_TRAINER_FLAGS = (ACCELERATOR_FLAG, DEVICES_FLAG, NUM_NODES_FLAG, PLUGINS_FLAG)


def trainer_flags(
    strategy: JobStrategy, accelerator: str, devices: int, num_nodes: int | None = None, plugins: str | None = None
) -> list[str]:
    """The strategy with the job's timeout (an override after `--` comes later and wins), the accelerator, the
    devices of each process's node, the number of nodes and the cluster environment where the launcher gives them.
    A strategy of one process trains on one node with no peers: its strategy, accelerator and devices only."""
    if strategy.placement is Placement.ONE_PROCESS:
        return [STRATEGY_FLAG, strategy.name, ACCELERATOR_FLAG, accelerator, DEVICES_FLAG, str(devices)]
    flags = [STRATEGY_FLAG, strategy.name or DDP_STRATEGY, TIMEOUT_FLAG, str(JOB_TIMEOUT)]
    flags += [ACCELERATOR_FLAG, accelerator, DEVICES_FLAG, str(devices)]
    if num_nodes is not None:
        flags += [NUM_NODES_FLAG, str(num_nodes)]
    if plugins is not None:
        flags += [PLUGINS_FLAG, plugins]
    return flags
