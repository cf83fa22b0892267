"""The environment of one rank under the Dask launcher: the variables torch.distributed and Lightning read, and the
cluster environment that tells Lightning that Dask, not Lightning, started the process.

Set by the worker's task (worker.py) before the rank's cli.py run starts.
"""

import os

from lightning.fabric.plugins.environments import ClusterEnvironment
from typing_extensions import override

from trainrig.dask.description import Attempt


def set_rank_environment(attempt: Attempt, rank: int) -> None:
    """Make this worker process global rank `rank` of the attempt, one rank per worker."""
    os.environ.update(
        MASTER_ADDR=attempt.main_address,
        MASTER_PORT=str(attempt.main_port),
        RANK=str(rank),
        WORLD_SIZE=str(attempt.world_size),
        LOCAL_RANK="0",
    )
    # Lightning reads the rank for its rank-zero-only logging once, at import, which may have happened in an earlier
    # task.
    from lightning_utilities.core.rank_zero import rank_zero_only

    rank_zero_only.rank = rank


class DaskRankEnvironment(ClusterEnvironment):
    """Rank and world size as the launcher's task set them: Dask started the process, one rank per worker.

    Without it Lightning, seeing no LOCAL_RANK, would launch processes itself and every worker would
    believe it is global rank 0.
    """

    @property
    @override
    def creates_processes_externally(self) -> bool:
        return True

    @property
    @override
    def main_address(self) -> str:
        return os.environ["MASTER_ADDR"]

    @property
    @override
    def main_port(self) -> int:
        return int(os.environ["MASTER_PORT"])

    @staticmethod
    @override
    def detect() -> bool:
        """Never picked automatically: the launcher passes it as a trainer plugin."""
        return False

    @override
    def world_size(self) -> int:
        return int(os.environ["WORLD_SIZE"])

    @override
    def set_world_size(self, size: int) -> None:
        """The launcher fixed the world size; Lightning's num_nodes x devices equals it."""

    @override
    def global_rank(self) -> int:
        return int(os.environ["RANK"])

    @override
    def set_global_rank(self, rank: int) -> None:
        """The launcher fixed the rank."""

    @override
    def local_rank(self) -> int:
        return 0

    @override
    def node_rank(self) -> int:
        return self.global_rank()
