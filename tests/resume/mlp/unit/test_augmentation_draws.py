"""Random augmentation draws from a seed of (run seed, epoch, sample index), so a sample's augmentation does not depend
on which worker, process or resumed run loads it; a data set that draws nothing is loaded without that seeding, as
fast as a plain DataLoader."""

from types import SimpleNamespace

import pytest
import torch
from lightning.pytorch import LightningDataModule
from torch.utils.data import Dataset
from torchvision import transforms

from datamodules.synthetic_shapes import SyntheticShapesDataModule
from trainrig.resume.data_order import resumable_loader

SAMPLES = 16


class AugmentedCopies(Dataset):
    """Copies of one image under torchvision's random crops and flips: what differs between two loaded samples is
    what their augmentation drew."""

    def __init__(self):
        self.image = torch.arange(3 * 32 * 32, dtype=torch.float32).reshape(3, 32, 32)
        self.augment = transforms.Compose(
            [transforms.RandomResizedCrop(16, scale=(0.2, 1.0), antialias=True), transforms.RandomHorizontalFlip()]
        )

    def __len__(self) -> int:
        return SAMPLES

    def __getitem__(self, index: int) -> tuple[int, torch.Tensor]:
        return index, self.augment(self.image)


def augmented(epoch: int, num_workers: int = 0, ranks: int = 1, consumed: int = 0) -> dict[int, torch.Tensor]:
    """Each sample's image as the training loaders of `ranks` processes load it in `epoch`, resumed after `consumed`
    samples of it."""
    loaded = {}
    for rank in range(ranks):
        datamodule = LightningDataModule()
        placement = {"num_replicas": ranks, "rank": rank}
        datamodule.trainer = SimpleNamespace(strategy=SimpleNamespace(distributed_sampler_kwargs=placement))
        loader = resumable_loader(
            datamodule, AugmentedCopies(), batch_size=4, seed_each_sample=True, num_workers=num_workers
        )
        loader.load_state_dict({"epoch": epoch, "consumed": consumed, "dataset_size": SAMPLES})
        for indices, images in loader:
            loaded.update(zip(indices.tolist(), images))
    return loaded


def test_every_sample_and_every_epoch_draws_its_own_augmentation():
    first, second = augmented(epoch=0), augmented(epoch=1)
    assert len({image.numpy().tobytes() for image in first.values()}) == SAMPLES
    assert not any(torch.equal(first[index], second[index]) for index in range(SAMPLES))


@pytest.mark.parametrize(
    "loading",
    [{"num_workers": 2}, {"ranks": 2}, {"consumed": 6}],
    ids=["two workers", "two processes", "resumed mid-epoch"],
)
def test_an_epochs_sample_draws_the_same_augmentation_whoever_loads_it(loading):
    alone = augmented(epoch=1)
    loaded = augmented(epoch=1, **loading)
    assert len(loaded) == SAMPLES - loading.get("consumed", 0)
    assert all(torch.equal(image, alone[index]) for index, image in loaded.items())


def test_loading_in_the_training_process_leaves_its_own_draws_alone():
    """Without workers the samples load where the model trains: its dropout must draw the same as with workers."""
    before = torch.random.get_rng_state()
    augmented(epoch=0)
    assert torch.equal(torch.random.get_rng_state(), before)


def shapes(shapes_root, augment: bool) -> SyntheticShapesDataModule:
    datamodule = SyntheticShapesDataModule(
        root=str(shapes_root), images_per_class=4, canvas_size=16, image_size=8, augment=augment, num_workers=0
    )
    datamodule.prepare_data()
    datamodule.setup("fit")
    return datamodule


def test_augmented_training_images_draw_anew_each_epoch_and_the_same_for_the_same_epoch(shapes_root):
    loader = shapes(shapes_root, augment=True).train_dataloader()

    def epoch_images(epoch: int) -> list[bytes]:
        loader.sampler.set_epoch(epoch)
        return [image.numpy().tobytes() for images, _ in loader for image in images]

    first = epoch_images(0)
    assert epoch_images(0) == first
    assert not set(epoch_images(1)) & set(first)


def test_training_images_without_augmentation_load_unseeded(shapes_root):
    datamodule = shapes(shapes_root, augment=False)
    assert datamodule.train_dataloader().dataset is datamodule.train_set
