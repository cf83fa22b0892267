"""The DataLoader side shared by the image datamodules: `setup` fills the splits, this serves them."""

from lightning.pytorch import LightningDataModule
from torch.utils.data import DataLoader, Dataset

from trainrig.resume.data_order import resumable_loader


class SplitsDataModule(LightningDataModule):
    """Expects `batch_size` and `num_workers` hyper-parameters; tests on `test_set`, or on `val_set` when there is
    none."""

    train_set: Dataset | None = None
    val_set: Dataset | None = None
    test_set: Dataset | None = None

    def _loader(self, dataset: Dataset) -> DataLoader:
        workers = self.hparams.num_workers
        return DataLoader(
            dataset, batch_size=self.hparams.batch_size, num_workers=workers, persistent_workers=workers > 0
        )

    def train_dataloader(self) -> DataLoader:
        workers = self.hparams.num_workers
        return resumable_loader(
            self,
            self.train_set,
            self.hparams.batch_size,
            seed_each_sample=True,
            num_workers=workers,
            persistent_workers=workers > 0,
        )

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.val_set)

    def test_dataloader(self) -> DataLoader:
        return self._loader(self.test_set if self.test_set is not None else self.val_set)
