"""DDP whose node count comes from torchrun's elastic rendezvous instead of a fixed `--trainer.num_nodes`.

Under `torchrun --nnodes MIN:MAX` the number of pods that train is known only after the rendezvous
and can change at every restart. Lightning needs it (it checks devices x num_nodes against the world
size and sizes the DistributedSampler with it), so this strategy takes it from torchrun's
GROUP_WORLD_SIZE, the number of agents the rendezvous admitted.
"""

import os

from lightning.pytorch.strategies import DDPStrategy

__all__ = ["ElasticDDPStrategy"]


class ElasticDDPStrategy(DDPStrategy):
    @property
    def num_nodes(self) -> int:
        return self._num_nodes

    @num_nodes.setter
    def num_nodes(self, num_nodes: int) -> None:
        self._num_nodes = int(os.environ.get("GROUP_WORLD_SIZE", num_nodes))
