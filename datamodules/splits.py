"""The DataLoader side shared by the image datamodules: `setup` fills the splits, this serves them."""

import os

from lightning.pytorch import LightningDataModule
from torch.utils.data import DataLoader, Dataset, Subset

from trainrig.resume.data_order import resumable_loader


class SplitsDataModule(LightningDataModule):
    """Expects `batch_size` and `num_workers` hyper-parameters; tests on `test_set`, or on `val_set` when there is
    none, and `cli.py predict` classifies the same images."""

    train_set: Dataset | None = None
    val_set: Dataset | None = None
    test_set: Dataset | None = None
    # Whether loading a training sample draws random numbers (random augmentation): only then is each one loaded with
    # torch's CPU generator seeded for its (epoch, sample), which keeps the draws the same whichever worker or
    # resumed run loads it, at a cost per sample. Assumed, so that a subclass that augments without saying so still
    # resumes exactly; one whose training samples draw nothing says False.
    training_draws_random_numbers: bool = True

    def _loader(self, dataset: Dataset) -> DataLoader:
        workers = self.hparams.num_workers
        return DataLoader(
            dataset, batch_size=self.hparams.batch_size, num_workers=workers, persistent_workers=workers > 0
        )

    # How the training loader is built: the resumable order over this datamodule's samples (a subclass that streams
    # them from shards names its own builder).
    training_loader = staticmethod(resumable_loader)

    def train_dataloader(self) -> DataLoader:
        workers = self.hparams.num_workers
        return self.training_loader(
            self,
            self.train_set,
            self.hparams.batch_size,
            seed_each_sample=self.training_draws_random_numbers,
            num_workers=workers,
            persistent_workers=workers > 0,
        )

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.val_set)

    @property
    def held_out_set(self) -> Dataset:
        """What `test` scores and `predict` classifies, so the predictions line up with the accuracy `test` reports."""
        return self.test_set if self.test_set is not None else self.val_set

    def test_dataloader(self) -> DataLoader:
        return self._loader(self.held_out_set)

    def predict_dataloader(self) -> DataLoader:
        return self._loader(self.held_out_set)

    def predict_sample(self, index: int) -> tuple[str, int | None]:
        """The `index`-th predicted image, named so a user can find it, and its true class: its file relative to
        the image folder, or for a data set without files its position in that data set.

        Read from the data set's file list and targets, so naming every prediction loads no image.
        """
        dataset, position = self.held_out_set, index
        while isinstance(dataset, Subset):
            dataset, position = dataset.dataset, dataset.indices[position]
        samples = getattr(dataset, "samples", None)  # torchvision's ImageFolder: (path, class) pairs
        if samples is not None:
            path, label = samples[position]
            return os.path.relpath(path, dataset.root), label
        targets = getattr(dataset, "targets", None)
        return str(position), int(targets[position]) if targets is not None else None
