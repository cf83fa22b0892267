"""The image examples' data streamed from shards: an image folder (real or generated) written once into chunks with
`python -m trainrig.data.shards write --config configs/EXAMPLE_streaming.yaml`, read back a few chunks at a time, in an
order that resumes exactly on any number of processes (trainrig/data/streaming.py). The same transforms, classes and
model arguments as reading the folder itself; docs/data.md says when to stream."""

import io
from pathlib import Path
from typing import Any

from jsonargparse.typing import NonNegativeInt, PositiveInt
from PIL import Image
from torch.utils.data import Dataset, Subset
from torchvision.datasets import ImageFolder
from typing_extensions import override

from datamodules.image_folder import ImageFolderDataModule
from trainrig.data.shards import ShardSource
from trainrig.data.streaming import ShardSamples, ShardsDataModule, streaming_loader
from trainrig.errors import UserInputError
from trainrig.registry import import_object


class DecodedImage:
    """A stored record as the image folder serves it: the image through `transform`, and its class."""

    def __init__(self, transform):
        self.transform = transform

    def __call__(self, record: dict) -> tuple:
        with Image.open(io.BytesIO(record["image"])) as image:
            return self.transform(image.convert("RGB")), record["label"]


class ImageFileRecords(Dataset):
    """An image-folder split as records to store: each image file's bytes as they are, and its class."""

    def __init__(self, split: Subset):
        folder = split.dataset
        self.samples = [folder.samples[index] for index in split.indices]

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> dict:
        path, label = self.samples[index]
        return {"image": Path(path).read_bytes(), "label": label}


class StreamingImagesDataModule(ShardsDataModule, ImageFolderDataModule):
    training_loader = staticmethod(streaming_loader)  # the chunk-local order, the shards named in the position

    def __init__(
        self,
        shards: str,
        source: dict[str, Any],
        image_size: PositiveInt = 224,
        grayscale: bool = False,
        augment: bool = True,
        batch_size: PositiveInt = 64,
        num_workers: NonNegativeInt = 2,
        window_chunks: PositiveInt = 4,
    ):
        """
        Args:
            shards: the shards' folder, or s3://bucket/prefix (credentials from the environment: docs/data.md).
            source: the image datamodule the shards are written from (`class_path`, `init_args`); a shard folder
                written from another is refused.
            window_chunks: chunks whose samples are shuffled together, and kept in memory by each process.
        """
        super().__init__(
            shards, image_size, grayscale=grayscale, augment=augment, batch_size=batch_size, num_workers=num_workers
        )

    @property
    @override
    def class_names(self) -> list[str]:
        return self.shards.metadata["class_names"]

    @override
    def prepare_data(self) -> None:
        pass

    @override
    def setup(self, stage: str) -> None:
        if self.train_set is not None:
            return
        window = self.hparams.window_chunks
        self.train_set = ShardSamples(self.shards, "train", DecodedImage(self._transforms(train=True)), window)
        self.val_set = ShardSamples(self.shards, "val", DecodedImage(self._transforms(train=False)), window)

    def shard_source(self) -> ShardSource:
        """The source image folder's splits, each image file's bytes as they are (decoded when read back)."""
        source = dict(self.hparams.source)
        datamodule = import_object(source["class_path"])(**source.get("init_args", {}))
        datamodule.prepare_data()
        datamodule.setup("fit")
        splits = {"train": datamodule.train_set, "val": datamodule.val_set}
        if not all(isinstance(s, Subset) and isinstance(s.dataset, ImageFolder) for s in splits.values()):
            raise UserInputError(f"source {source['class_path']} is not an image folder; it cannot be written here")
        return ShardSource(
            identity=source,
            metadata={"class_names": datamodule.class_names},
            splits={name: ImageFileRecords(split) for name, split in splits.items()},
        )
