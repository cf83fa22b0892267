"""After every validation, samples names and logs them with whether each occurs in the training data."""

from lightning.pytorch import Callback

from datamodules.pet_names import display_name
from trainrig.loggers.media import log_table


class GeneratedNamesTable(Callback):
    def __init__(self, num_names: int = 20):
        self.num_names = num_names

    def on_validation_epoch_end(self, trainer, pl_module) -> None:
        if not trainer.is_global_zero or trainer.sanity_checking:
            return
        known = set(getattr(trainer.datamodule, "names", ()))
        rows = [[display_name(name), name in known] for name in pl_module.generate(self.num_names)]
        log_table(trainer, "generated_names", ["name", "in_training_data"], rows)
