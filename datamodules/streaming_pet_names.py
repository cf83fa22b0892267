"""The pet names streamed from shards: the training examples of datamodules/pet_names.py (character windows, or whole
names) written once with `python -m trainrig.data.shards write --config configs/lstm_streaming.yaml`, read back a
few chunks at a time, in an order that resumes exactly on any number of processes (trainrig/data/streaming.py). The
same examples, model arguments and batches as reading the names file; docs/data.md says when to stream."""

from typing import Any

import torch
from jsonargparse.typing import NonNegativeInt, PositiveInt
from torch.utils.data import DataLoader, Dataset
from typing_extensions import override

from datamodules.pet_names import VOCAB, CharWindows, PetNamesDataModule, WholeNames
from trainrig.data.shards import ShardSource
from trainrig.data.streaming import ShardSamples, ShardsDataModule, streaming_loader
from trainrig.errors import UserInputError
from trainrig.registry import import_object


class ExampleRecords(Dataset):
    """A split's examples as records to store: the input and target rows (VOCAB indices, uint8), and the row's width
    without trailing padding (the whole row for a window)."""

    def __init__(self, examples: CharWindows):
        self.examples = examples
        self.widths = examples.widths if isinstance(examples, WholeNames) else None

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, index: int) -> dict:
        inputs, targets = self.examples.inputs[index], self.examples.targets[index]
        width = len(inputs) if self.widths is None else int(self.widths[index])
        return {"input": inputs.numpy(), "target": targets.numpy(), "width": width}


def decode_example(record: dict) -> tuple[torch.Tensor, torch.Tensor, int]:
    return torch.from_numpy(record["input"]).long(), torch.from_numpy(record["target"]).long(), record["width"]


def batch_of_examples(examples: list[tuple[torch.Tensor, torch.Tensor, int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and targets stacked, cut to the batch's widest row, as the names file's loader batches them."""
    inputs, targets, widths = zip(*examples)
    width = max(widths)
    return torch.stack(inputs)[:, :width], torch.stack(targets)[:, :width]


class StreamingPetNamesDataModule(ShardsDataModule):
    model_arguments = ("vocab", "context_length", "formulation")

    def __init__(
        self,
        shards: str,
        source: dict[str, Any],
        batch_size: PositiveInt = 512,
        num_workers: NonNegativeInt = 0,
        window_chunks: PositiveInt = 4,
    ):
        """
        Args:
            shards: the shards' folder, or s3://bucket/prefix (credentials from the environment: docs/data.md).
            source: the pet-names datamodule the shards are written from (`class_path`, `init_args`); its
                `context_length` and `formulation` decide the examples. A shard folder written from another is refused.
            batch_size: examples per batch (windows, or names with `formulation: whole_names`).
            window_chunks: chunks whose examples are shuffled together, and kept in memory by each process.
        """
        super().__init__()
        self.save_hyperparameters()
        self.train_set: ShardSamples | None = None
        self.val_set: ShardSamples | None = None

    @property
    def vocab(self) -> str:
        return VOCAB

    @property
    def context_length(self) -> int:
        return self.shards.metadata["context_length"]

    @property
    def formulation(self) -> str:
        return self.shards.metadata["formulation"]

    @override
    def setup(self, stage: str) -> None:
        if self.train_set is not None:
            return
        window = self.hparams.window_chunks
        self.train_set = ShardSamples(self.shards, "train", decode_example, window)
        if "val" in self.shards.manifest["splits"]:
            self.val_set = ShardSamples(self.shards, "val", decode_example, window)

    @override
    def train_dataloader(self) -> DataLoader:
        workers = self.hparams.num_workers
        return streaming_loader(
            self,
            self.train_set,
            self.hparams.batch_size,
            collate_fn=batch_of_examples,
            num_workers=workers,
            persistent_workers=workers > 0,
        )

    @override
    def val_dataloader(self):
        if self.val_set is None:
            return []
        workers = self.hparams.num_workers
        return DataLoader(
            self.val_set,
            batch_size=self.hparams.batch_size,
            collate_fn=batch_of_examples,
            num_workers=workers,
            persistent_workers=workers > 0,
        )

    def shard_source(self) -> ShardSource:
        """The source's training and validation examples, encoded as the names file's datamodule encodes them."""
        source = dict(self.hparams.source)
        datamodule = import_object(source["class_path"])(**source.get("init_args", {}))
        if not isinstance(datamodule, PetNamesDataModule):
            raise UserInputError(
                f"source {source['class_path']} is not a pet-names datamodule; it cannot be written here"
            )
        datamodule.setup("fit")
        splits = {"train": ExampleRecords(datamodule.train_examples)}
        if datamodule.val_examples is not None:
            splits["val"] = ExampleRecords(datamodule.val_examples)
        return ShardSource(
            identity=source,
            metadata={"context_length": datamodule.context_length, "formulation": datamodule.formulation},
            splits=splits,
        )
