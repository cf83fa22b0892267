"""A training data order that survives a stop: which epoch's permutation, and how far all ranks together got.

Lightning saves and restores a training DataLoader that has `state_dict`/`load_state_dict` and then expects it to
yield only the rest of the interrupted epoch. The position is kept for all ranks together, not per rank, so a run
resumed with another number of processes deals out exactly the samples the interrupted epoch had not reached.
A data set that draws random numbers (random augmentation) is loaded with torch's CPU generator seeded from (run seed,
epoch, sample index), so its draws do not depend on which DataLoader worker, process or resumed run loads a sample.
A training DataLoader written the plain way (`shuffle=True` or not, any batch size and workers) is rebuilt into such a
loader as the run starts (`ResumableTrainingLoader`), as Lightning rebuilds it to put in its DistributedSampler.
"""

import functools
import math
import os
import sys
from contextlib import contextmanager

import numpy as np
import torch
from lightning.fabric.utilities.data import _reinstantiate_wrapped_cls
from lightning.pytorch import Callback, LightningDataModule, LightningModule, Trainer
from lightning.pytorch.trainer.states import RunningStage
from lightning.pytorch.utilities import rank_zero_warn
from lightning.pytorch.utilities.data import _get_dataloader_init_args_and_kwargs
from lightning.pytorch.utilities.model_helpers import is_overridden
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    Dataset,
    DistributedSampler,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
)
from typing_extensions import override

__all__ = [
    "LoaderPositionRestore",
    "ResumableDataLoader",
    "ResumableSampler",
    "ResumableTrainingLoader",
    "SeededSamples",
    "resumable_loader",
]


def sample_seed(seed: int, epoch: int, index: int) -> int:
    return int(np.random.SeedSequence([seed, epoch, index]).generate_state(1)[0])


def epoch_sample_seeds(seed: int, epoch: int, count: int) -> list[int]:
    """A seed for each of `count` samples in `epoch`, the one at position `index` for sample `index`.

    Drawn in one call per epoch: a `sample_seed` call per sample costs several times the seeding it feeds.
    """
    return np.random.SeedSequence([seed, epoch]).generate_state(count, np.uint64).tolist()


class ResumableSampler(DistributedSampler):
    """DistributedSampler's order (one permutation per epoch, dealt to ranks in turn) that can start mid-epoch.

    Being a DistributedSampler, Lightning keeps it instead of inserting its own. `start` counts the samples of
    this epoch's order consumed before the current pass; with `seed_each_sample` it yields (index, seed) keys
    for `SeededSamples`.
    """

    def __init__(
        self,
        dataset: Dataset,
        num_replicas: int = 1,
        rank: int = 0,
        shuffle: bool = True,
        seed: int = 0,
        seed_each_sample: bool = False,
    ):
        super().__init__(dataset, num_replicas=num_replicas, rank=rank, shuffle=shuffle, seed=seed)
        self.seed_each_sample = seed_each_sample
        self.start = 0

    @override
    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.start = 0
        super().set_epoch(epoch)

    def epoch_order(self) -> torch.Tensor:
        if not self.shuffle:
            return torch.arange(len(self.dataset))
        return torch.randperm(len(self.dataset), generator=torch.Generator().manual_seed(self.seed + self.epoch))

    def __iter__(self):
        remaining = self.epoch_order()[self.start :]
        padding = (-len(remaining)) % self.num_replicas
        if padding and len(remaining):  # as DistributedSampler: repeat the first samples so every rank gets as many
            remaining = torch.cat([remaining, remaining.repeat(math.ceil(padding / len(remaining)))[:padding]])
        indices = remaining[self.rank :: self.num_replicas].tolist()
        if self.seed_each_sample:
            seeds = epoch_sample_seeds(self.seed, self.epoch, len(self.dataset))
            return iter([(index, seeds[index]) for index in indices])
        return iter(indices)


@contextmanager
def _cpu_generator_put_back():
    """Torch's global CPU generator, its state put back after.

    Only the CPU generator: it is what torchvision's transforms draw from, and `torch.manual_seed` would also seed
    every accelerator, which before CUDA starts queues a lazy call that records the Python stack, once per sample.
    Putting the state back keeps loading in the main process (no workers) out of the training's own draws (dropout).
    """
    generator = torch.random.default_generator
    state = generator.get_state()
    try:
        yield generator
    finally:
        generator.set_state(state)


class SeededSamples(Dataset):
    """Loads sample `index` with torch's CPU generator seeded for that (epoch, sample).

    Numpy's and Python's generators are not seeded: torchvision's transforms draw from neither, and seeding them costs
    more per sample than seeding torch's (numpy's some 30 times more). A data set that draws from them draws what the
    loading worker's generators give.
    """

    def __init__(self, dataset: Dataset):
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    @override
    def __getitem__(self, key: tuple[int, int]):
        return self.__getitems__([key])[0]

    def __getitems__(self, keys: list[tuple[int, int]]) -> list:
        """A batch's samples, each loaded right after seeding with its own seed: the DataLoader's fetcher asks for a
        batch at once, so that the generator's state (5 KB) is saved and put back once a batch, not once a sample."""
        samples = []
        with _cpu_generator_put_back() as generator:
            for index, seed in keys:
                generator.manual_seed(seed)
                samples.append(self.dataset[index])
        return samples


class ResumableDataLoader(DataLoader):
    """Reports how many samples of the epoch all ranks have consumed, and resumes from such a report."""

    sampler: ResumableSampler

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not isinstance(self.sampler, ResumableSampler):
            raise TypeError("ResumableDataLoader needs a ResumableSampler")
        self._batches_yielded = 0

    def __iter__(self):
        self._batches_yielded = 0
        for batch in super().__iter__():
            self._batches_yielded += 1
            yield batch

    def state_dict(self) -> dict:
        sampler = self.sampler
        consumed = sampler.start + self._batches_yielded * self.batch_size * sampler.num_replicas
        return {
            "epoch": sampler.epoch,
            "consumed": min(consumed, len(sampler.dataset)),
            "dataset_size": len(sampler.dataset),
        }

    def load_state_dict(self, state: dict) -> None:
        sampler = self.sampler
        sampler.set_epoch(state["epoch"])
        if state["dataset_size"] != len(sampler.dataset):
            rank_zero_warn(
                f"the checkpoint's data order is for {state['dataset_size']} training samples, the data now has "
                f"{len(sampler.dataset)}: epoch {state['epoch']} starts over with the new data"
            )
            return
        sampler.start = state["consumed"]


def process_share(trainer: Trainer | None) -> dict:
    """This process's `num_replicas` and `rank` of the training data, as Lightning's DistributedSampler gets them."""
    placement = getattr(trainer.strategy, "distributed_sampler_kwargs", None) if trainer is not None else None
    return placement or {"num_replicas": 1, "rank": 0}


def run_seed() -> int:
    """The seed Lightning's own DistributedSampler would get: the one seed_everything set."""
    return int(os.environ.get("PL_GLOBAL_SEED", 0))


def resumable_loader(
    datamodule: LightningDataModule,
    dataset: Dataset,
    batch_size: int,
    seed_each_sample: bool = False,
    sampler_class: type[ResumableSampler] = ResumableSampler,
    loader_class: type[ResumableDataLoader] = ResumableDataLoader,
    **loader_kwargs,
) -> ResumableDataLoader:
    """A shuffled training loader for this process's share of `dataset`, resumable mid-epoch.

    Args:
        seed_each_sample: seed torch's CPU generator per (epoch, sample) while loading it; for data sets that draw
            random numbers (random augmentation). One that draws none loads faster without.
        sampler_class, loader_class: subclasses that change the epoch's order or add to the saved position
            (streamed shards: trainrig/data/streaming.py).
        loader_kwargs: further DataLoader arguments (num_workers, collate_fn, ...).
    """
    placement = process_share(datamodule.trainer)
    sampler = sampler_class(dataset, **placement, shuffle=True, seed=run_seed(), seed_each_sample=seed_each_sample)
    # The loader's own generator draws the workers' base seeds, so creating an iterator leaves the global one alone.
    return loader_class(
        SeededSamples(dataset) if seed_each_sample else dataset,
        batch_size=batch_size,
        sampler=sampler,
        generator=torch.Generator(),
        **loader_kwargs,
    )


class LoaderPositionRestore(Callback):
    """Hands a resumed run's training loader the position its checkpoint saved, where Lightning dropped it.

    Lightning gives the saved loader state to the training loader only when it builds the loader after reading the
    checkpoint. Reading `trainer.estimated_stepping_batches` while the optimizers are configured (OneCycleLR's total
    steps) builds it before; the state then waits unused and the resumed epoch starts over, without a word (Lightning
    #20550). When training starts, no batch has been drawn yet: this loads the state and starts the loader's iterator
    again, as Lightning's `setup_data` does in that order, so the run continues where it stopped.
    """

    @override
    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        fit_loop = trainer.fit_loop
        if not fit_loop._combined_loader_states_to_load:
            return
        fit_loop._load_combined_loader_states()
        iter(fit_loop._data_fetcher)


class ResumableTrainingLoader(Callback):
    """Makes the training DataLoader that the datamodule (or the model) returns resumable mid-epoch, bit for bit.

    A plain `DataLoader(dataset, batch_size=..., shuffle=True)` keeps no position: a run resumed in the middle of an
    epoch would start that epoch's order again while Lightning counts the steps already done. Lightning rebuilds such
    a loader with its own DistributedSampler on several processes; this rebuilds it, on any number of processes, as
    the loader `resumable_loader` makes: a `ResumableSampler` (shuffled if the user's loader shuffled) and each sample
    loaded with torch's generator seeded for it, so that workers draw the same whatever sample they resume at. The
    user's batch size, workers, collate function, `drop_last`, `pin_memory` and DataLoader subclass are kept.
    A loader with a position of its own (a `state_dict`) is left as it is; one whose position cannot be kept (an
    IterableDataset, a sampler of the user's own) is left too, with one line saying so at the start of the run.
    """

    def __init__(self) -> None:
        self._source = None  # the datamodule or model whose `train_dataloader` is wrapped while fitting
        self._warned = False

    @override
    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        if stage != "fit" or trainer.overfit_batches:  # overfitting: Lightning puts in a SequentialSampler itself
            return
        datamodule = trainer.datamodule
        source = datamodule if datamodule is not None and is_overridden("train_dataloader", datamodule) else pl_module
        returned_loader = source.train_dataloader

        # Wrapped where Lightning calls it, so Lightning sees the user's arguments (it records them while the hook
        # runs) and every reload of the loader is rebuilt too; `wraps` keeps Lightning's check that it is overridden.
        @functools.wraps(returned_loader)
        def train_dataloader():
            return self.resumable(returned_loader(), trainer)

        source.train_dataloader = train_dataloader
        self._source = source

    @override
    def teardown(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        if self._source is not None:
            del self._source.train_dataloader  # the class's method again
            self._source = None

    def resumable(self, loader, trainer: Trainer):
        if callable(getattr(loader, "state_dict", None)) and callable(getattr(loader, "load_state_dict", None)):
            return loader  # keeps its own position (resumable_loader's, a streaming loader's)
        problem = why_not_resumable(loader)
        rebuilt = rebuilt_resumable(loader, trainer) if problem is None else None
        if rebuilt is not None:
            return rebuilt
        if not self._warned and trainer.is_global_zero:
            problem = problem or f"the training loader {type(loader).__name__} builds its dataset itself"
            print(
                f"resume: {problem}: a run resumed in the middle of an epoch starts that epoch's data again; "
                "give the loader a state_dict and load_state_dict, or build it with "
                "trainrig.resume.data_order.resumable_loader (docs/resume.md)",
                file=sys.stderr,
                flush=True,
            )
            self._warned = True
        return loader


def why_not_resumable(loader) -> str | None:
    """Why the template cannot rebuild `loader` to resume mid-epoch, or None when it can."""
    if not isinstance(loader, DataLoader):
        return f"the training data is a {type(loader).__name__}, not a DataLoader"
    if isinstance(loader.dataset, IterableDataset):
        return f"the training dataset {type(loader.dataset).__name__} is an IterableDataset, which keeps no position"
    sampler, batch_sampler = loader.sampler, loader.batch_sampler
    if batch_sampler is None:
        return "the training loader has no batch_size (its dataset gives whole batches)"
    if type(batch_sampler) is not BatchSampler:
        return f"the training loader's batch_sampler {type(batch_sampler).__name__} is its own"
    # What `shuffle=True` or `shuffle=False` makes: every sample of the dataset once an epoch.
    made_by_shuffle = (
        type(sampler) in (RandomSampler, SequentialSampler)
        and sampler.data_source is loader.dataset
        and len(sampler) == len(loader.dataset)
        and not getattr(sampler, "replacement", False)
    )
    if not made_by_shuffle:
        return f"the training loader's sampler {type(sampler).__name__} is its own"
    return None


def rebuilt_resumable(loader: DataLoader, trainer: Trainer) -> ResumableDataLoader | None:
    """`loader` with this process's share of a `ResumableSampler` and seeded samples, its other arguments kept; None
    when its arguments do not hold its dataset (a DataLoader subclass that builds it)."""
    shuffle = isinstance(loader.sampler, RandomSampler)
    sampler = ResumableSampler(
        loader.dataset, **process_share(trainer), shuffle=shuffle, seed=run_seed(), seed_each_sample=True
    )
    args, kwargs = _get_dataloader_init_args_and_kwargs(loader, sampler, RunningStage.TRAINING)
    seeded = SeededSamples(loader.dataset)
    if kwargs.get("dataset") is loader.dataset:
        kwargs["dataset"] = seeded
    elif any(arg is loader.dataset for arg in args):
        args = tuple(seeded if arg is loader.dataset else arg for arg in args)
    else:
        return None
    if kwargs.get("generator") is None:  # the workers' base seeds, drawn without touching the global generator
        kwargs["generator"] = torch.Generator()
    return _reinstantiate_wrapped_cls(loader, *args, explicit_cls=resumable_class(type(loader)), **kwargs)


@functools.cache
def resumable_class(loader_class: type[DataLoader]) -> type[ResumableDataLoader]:
    """ResumableDataLoader, or for a DataLoader subclass the subclass with ResumableDataLoader's position."""
    if loader_class is DataLoader:
        return ResumableDataLoader
    return type(f"Resumable{loader_class.__name__}", (ResumableDataLoader, loader_class), {})
