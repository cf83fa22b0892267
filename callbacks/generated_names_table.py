"""After every validation, samples names and logs them with whether each occurs in the training data."""

import torch
from lightning.pytorch import Callback
from typing_extensions import override

from datamodules.pet_names import display_name
from trainrig.loggers.media import log_table


class GeneratedNamesTable(Callback):
    def __init__(self, num_names: int = 20, seed: int = 0):
        """
        Args:
            num_names: how many names each validation samples.
            seed: the names' seed, the same after every validation, so that the tables differ only as the weights do.
        """
        self.num_names, self.seed = num_names, seed

    @override
    def on_validation_epoch_end(self, trainer, pl_module) -> None:
        """Every process samples the same names from the same seed, only global rank 0 logs them: a sharded model's
        forwards are collective, so no process may sample alone."""
        if trainer.sanity_checking:
            return
        names = pl_module.generate(self.num_names, torch.Generator().manual_seed(self.seed))
        if not trainer.is_global_zero:
            return
        known = set(getattr(trainer.datamodule, "names", ()))
        rows = [[display_name(name), name in known] for name in names]
        log_table(trainer, "generated_names", ["name", "in_training_data"], rows)
