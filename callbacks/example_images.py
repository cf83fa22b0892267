"""Shows a few training inputs every N steps, to check that the data looks as it should."""

from lightning.pytorch import Callback

from trainrig.loggers.media import log_images


class ExampleImages(Callback):
    def __init__(self, every_n_steps: int = 25, num_images: int = 5):
        self.every_n_steps = every_n_steps
        self.num_images = num_images

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.is_global_zero and batch_idx % self.every_n_steps == 0:
            images = batch[0][: self.num_images]
            log_images(
                trainer,
                "examples/example_images",
                images,
                caption=f"epoch {trainer.current_epoch} step {trainer.global_step}",
            )
