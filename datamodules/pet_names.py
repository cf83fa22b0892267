"""Pet names (Seattle pet licences) for next-character prediction: as fixed-length character windows, or whole."""

import json
import logging
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from jsonargparse.typing import NonNegativeInt, PositiveInt, restricted_number_type
from lightning.pytorch import LightningDataModule
from torch.utils.data import DataLoader, Dataset

from trainrig.errors import UserInputError
from trainrig.resume.data_order import resumable_loader, sample_seed

log = logging.getLogger(__name__)

PAD, STOP = "*", "+"
ALPHABET = "abcdefghijklmnopqrstuvwxyz-. "
VOCAB = PAD + STOP + ALPHABET
# A share that may be zero (no validation) but never all: training needs names.
FractionBelowOne = restricted_number_type("FractionBelowOne", float, [(">=", 0), ("<", 1)])


def read_names(path: Path) -> list[str]:
    """Names from a JSON list of strings or a text file with one name per line."""
    if not path.is_file():
        raise UserInputError(
            f"names file {path} does not exist; set --data.init_args.names_path (derive the default with "
            "scripts/prepare_pet_names.py)"
        )
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".json":
        return text.splitlines()
    try:
        names = json.loads(text)
    except json.JSONDecodeError as error:
        raise UserInputError(f"names file {path} is not valid JSON: {error}") from error
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise UserInputError(f"names file {path} must hold a JSON list of strings")
    return names


def clean_names(raw_names: list[str]) -> tuple[list[str], int]:
    """Lower-case and trim; drop names that are empty or use characters outside ALPHABET. Returns (kept, dropped)."""
    allowed = set(ALPHABET)
    kept = [name for name in (raw.strip().lower() for raw in raw_names) if name and set(name) <= allowed]
    return kept, len(raw_names) - len(kept)


def usable_names(path: Path) -> tuple[list[str], int]:
    """The file's usable names and how many were dropped; a UserInputError when none is usable."""
    raw_names = read_names(path)
    names, dropped = clean_names(raw_names)
    if not names:
        raise UserInputError(
            f"names file {path} has no usable name: {dropped} of {len(raw_names)} are empty or use "
            f"characters outside {ALPHABET!r}; set --data.init_args.names_path to a file of names"
        )
    log.info(
        "pet names: kept %d of %d, dropped %d (empty or outside %r)", len(names), len(raw_names), dropped, ALPHABET
    )
    return names, dropped


def display_name(name: str) -> str:
    """Names are learned lower-case; people read them title-cased, as the reference prints them (`Ozzy`)."""
    return name.title()


def pad_names(names: list[str], context_length: int) -> tuple[np.ndarray, np.ndarray]:
    """One row of VOCAB indices per name, without Python loops over characters: `context_length` padding
    characters, the name, the stop character, then padding to the longest name. Returns the rows and name lengths.
    """
    lookup = np.zeros(256, dtype=np.uint8)
    lookup[np.frombuffer(VOCAB.encode("ascii"), dtype=np.uint8)] = np.arange(len(VOCAB), dtype=np.uint8)
    codes = lookup[np.frombuffer("".join(names).encode("ascii"), dtype=np.uint8)]
    lengths = np.fromiter(map(len, names), dtype=np.int64, count=len(names))
    starts = np.cumsum(lengths) - lengths
    padded = np.full((len(names), context_length + int(lengths.max()) + 1), VOCAB.index(PAD), dtype=np.uint8)
    rows = np.repeat(np.arange(len(names)), lengths)
    padded[rows, context_length + np.arange(len(codes)) - np.repeat(starts, lengths)] = codes
    padded[np.arange(len(names)), context_length + lengths] = VOCAB.index(STOP)
    return padded, lengths


def encode_windows(names: list[str], context_length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Every prefix of every name (stop character included) as a left-padded window.

    Returns inputs and targets, both (windows, context_length) uint8 indices into VOCAB; the
    target is the input shifted by one character.
    """
    padded, lengths = pad_names(names, context_length)
    windows = np.lib.stride_tricks.sliding_window_view(padded, context_length + 1, axis=1)
    valid = np.arange(windows.shape[1])[None, :] <= lengths[:, None]
    selected = torch.from_numpy(np.ascontiguousarray(windows[valid]))
    return selected[:, :-1], selected[:, 1:]


def encode_whole_names(names: list[str], context_length: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each name as one sequence after `context_length` padding characters, so that training predicts every
    character and the stop once, each from everything before it.

    Returns inputs and targets, both (names, context_length + longest name) uint8 indices into VOCAB, the target
    being the input shifted by one character (padding targets are ignored by the loss), and each row's width
    without its trailing padding.
    """
    padded, lengths = pad_names(names, context_length)
    rows = torch.from_numpy(padded)
    return rows[:, :-1], rows[:, 1:], torch.from_numpy(context_length + lengths)


class CharWindows(Dataset):
    """Hands out whole batches by tensor indexing (`__getitems__`), never sample by sample."""

    def __init__(self, inputs: torch.Tensor, targets: torch.Tensor):
        self.inputs, self.targets = inputs, targets

    def __len__(self) -> int:
        return len(self.inputs)

    def __getitem__(self, index: int):
        return self.__getitems__([index])

    def __getitems__(self, indices: list[int]):
        selection = torch.as_tensor(indices)
        return self.inputs[selection].long(), self.targets[selection].long()


class WholeNames(CharWindows):
    """Whole-name rows, each batch cut to its longest name: beyond it, inputs and targets are only padding."""

    def __init__(self, inputs: torch.Tensor, targets: torch.Tensor, widths: torch.Tensor):
        super().__init__(inputs, targets)
        self.widths = widths

    def __getitems__(self, indices: list[int]):
        selection = torch.as_tensor(indices)
        width = int(self.widths[selection].max())
        return self.inputs[selection, :width].long(), self.targets[selection, :width].long()


def keep_batch(batch):
    """The collate step for datasets that already return a whole batch."""
    return batch


class PetNamesDataModule(LightningDataModule):
    model_arguments = ("vocab", "context_length", "formulation")

    def __init__(
        self,
        names_path: str = "data/pet_names.txt",
        context_length: PositiveInt = 8,
        val_fraction: FractionBelowOne = 0.1,
        seed: int = 42,
        batch_size: PositiveInt = 16384,
        num_workers: NonNegativeInt = 0,
        num_names_to_generate: PositiveInt = 50,
        formulation: Literal["windows", "whole_names"] = "windows",
    ):
        """
        Args:
            names_path: a text file (one name per line) or a JSON list of names.
            context_length: characters the model sees before predicting the next; the reference uses 8.
            val_fraction: share of distinct names held out for validation (split by name, seeded).
            seed: the validation split's seed, and that of the names `cli.py predict` samples.
            num_names_to_generate: how many names `cli.py predict` samples.
            formulation: what a training example is, and so which conditional the model learns and samples from.
                `windows` (the reference's): every prefix of every name as its last `context_length` characters,
                left-padded, each character predicted from those. `whole_names`: one name after `context_length`
                padding characters, each character predicted once from everything before it; `batch_size` then
                counts names.
        """
        super().__init__()
        self.save_hyperparameters()
        # Read when the data is configured, so that an unusable file is refused before the run writes anything.
        self.names, self.dropped_names = usable_names(Path(names_path))
        self.held_out_names: set[str] = set()  # the validation names, never trained on
        self.train_examples: CharWindows | None = None  # windows, or names with `formulation: whole_names`
        self.val_examples: CharWindows | None = None

    @property
    def vocab(self) -> str:
        return VOCAB

    @property
    def context_length(self) -> int:
        return self.hparams.context_length

    @property
    def formulation(self) -> str:
        return self.hparams.formulation

    def setup(self, stage: str) -> None:
        if self.train_examples is not None:
            return
        distinct = sorted(set(self.names))
        generator = torch.Generator().manual_seed(self.hparams.seed)
        order = torch.randperm(len(distinct), generator=generator).tolist()
        num_val = int(len(distinct) * self.hparams.val_fraction)
        val_names = {distinct[i] for i in order[:num_val]}
        self.held_out_names = val_names
        train = [name for name in self.names if name not in val_names]
        val = [name for name in self.names if name in val_names]
        self.train_examples = self._examples(train)
        self.val_examples = self._examples(val) if val else None

    def _examples(self, names: list[str]) -> CharWindows:
        if self.formulation == "whole_names":
            return WholeNames(*encode_whole_names(names, self.context_length))
        return CharWindows(*encode_windows(names, self.context_length))

    def loader(self, dataset: Dataset, shuffle: bool, batch_size: int | None = None) -> DataLoader:
        """Training (shuffled) batches come from a loader that resumes mid-epoch."""
        batch_size = batch_size or self.hparams.batch_size
        workers = self.hparams.num_workers
        settings = dict(collate_fn=keep_batch, num_workers=workers, persistent_workers=workers > 0)
        if shuffle:
            return resumable_loader(self, dataset, batch_size, **settings)
        return DataLoader(dataset, batch_size=batch_size, **settings)

    def train_dataloader(self) -> DataLoader:
        return self.loader(self.train_examples, shuffle=True)

    def val_dataloader(self):
        return self.loader(self.val_examples, shuffle=False) if self.val_examples is not None else []

    def predict_dataloader(self) -> DataLoader:
        """One (index, seed) item per name to generate; the model samples a whole batch of names at once. A seed per
        name, drawn from `seed` and the name's index, gives the same names whatever the number of processes."""
        count, seed = self.hparams.num_names_to_generate, self.hparams.seed
        items = torch.tensor([[index, sample_seed(seed, 0, index)] for index in range(count)])
        return DataLoader(items, batch_size=min(count, 1024))
