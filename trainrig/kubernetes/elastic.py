"""DDP whose node count comes from torchrun's elastic rendezvous instead of a fixed `--trainer.num_nodes`.

Under `torchrun --nnodes MIN:MAX` the number of pods that train is known only after the rendezvous
and can change at every restart. Lightning needs it (it checks devices x num_nodes against the world
size and sizes the DistributedSampler with it), so this strategy takes it from torchrun's
GROUP_WORLD_SIZE, the number of agents the rendezvous admitted.

Registered as `ddp_elastic` by this part's plugin; an elastic PyTorchJob names it by its class path
(pytorchjob_v1.py). It is the project's `ddp` (trainrig/strategies/compile.py), `compile` included.
"""

import os

from typing_extensions import override

from trainrig.strategies.compile import CompilingDDPStrategy

__all__ = ["ElasticDDPStrategy"]


class ElasticDDPStrategy(CompilingDDPStrategy):
    strategy_name = "ddp_elastic"
    strategy_description = "DDP on as many machines as torchrun's elastic rendezvous admitted (--nnodes MIN:MAX)"

    @property
    @override
    def num_nodes(self) -> int:
        return self._num_nodes

    @num_nodes.setter
    def num_nodes(self, num_nodes: int) -> None:
        self._num_nodes = int(os.environ.get("GROUP_WORLD_SIZE", num_nodes))
