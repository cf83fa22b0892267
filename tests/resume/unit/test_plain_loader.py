"""How the template rebuilds a user's plain training DataLoader to resume mid-epoch
(trainrig/resume/data_order.py, `ResumableTrainingLoader`): the user's arguments kept, its order kept when it does
not shuffle, and one line, the loader left as it is, where the position cannot be kept."""

import torch
from lightning.pytorch import Trainer
from torch.utils.data import DataLoader, SequentialSampler, TensorDataset

from trainrig.resume.data_order import ResumableDataLoader, ResumableTrainingLoader

DATA = TensorDataset(torch.arange(23.0))


def rebuilt(loader):
    return ResumableTrainingLoader().resumable(loader, Trainer(logger=False, enable_progress_bar=False))


def doubled(samples):
    return torch.stack([sample for (sample,) in samples]) * 2


def test_rebuilt_loader_keeps_the_users_batch_size_collate_function_and_order():
    loader = DataLoader(DATA, batch_size=5, shuffle=False, collate_fn=doubled, drop_last=True, pin_memory=False)
    resumable = rebuilt(loader)
    assert isinstance(resumable, ResumableDataLoader)
    assert (resumable.batch_size, resumable.drop_last, resumable.collate_fn) == (5, True, doubled)
    assert [batch.tolist() for batch in resumable] == [batch.tolist() for batch in loader]


def test_shuffled_loader_gets_a_seeded_order_of_every_sample():
    resumable = rebuilt(DataLoader(DATA, batch_size=4, shuffle=True))
    samples = [value for (batch,) in resumable for value in batch.tolist()]
    assert sorted(samples) == DATA.tensors[0].tolist() and samples != sorted(samples)
    assert samples == [value for (batch,) in resumable for value in batch.tolist()], "an epoch's order is seeded"


class NamedLoader(DataLoader):
    def __init__(self, dataset, name: str, **kwargs):
        super().__init__(dataset, **kwargs)
        self.name = name


def test_dataloader_subclass_stays_itself():
    resumable = rebuilt(NamedLoader(DATA, "mine", batch_size=4, shuffle=True))
    assert isinstance(resumable, NamedLoader) and isinstance(resumable, ResumableDataLoader)
    assert resumable.name == "mine"


def test_loader_with_its_own_sampler_is_left_and_named_in_one_line(capsys):
    loader = DataLoader(DATA, batch_size=4, sampler=SequentialSampler(range(10)))
    assert rebuilt(loader) is loader
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("resume: the training loader's sampler SequentialSampler is its own: ")
