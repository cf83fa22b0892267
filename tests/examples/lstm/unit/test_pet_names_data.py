"""The pet-name data in this process: names cleaned, read and split, encoded as windows or whole names, batched,
resumed mid-epoch and sharded by rank."""

import json
from types import SimpleNamespace

import pytest
import torch
from torch.utils.data import DataLoader, DistributedSampler

from datamodules.pet_names import (
    ALPHABET,
    PAD,
    STOP,
    VOCAB,
    CharWindows,
    PetNamesDataModule,
    WholeNames,
    clean_names,
    encode_whole_names,
    encode_windows,
    keep_batch,
    read_names,
)
from trainrig.errors import UserInputError


def window_text(indices: torch.Tensor) -> str:
    return "".join(VOCAB[i] for i in indices.tolist())


def test_clean_names_lowercases_trims_and_counts_dropped():
    kept, dropped = clean_names(["Ozzy", " Mr. Pickles ", "", "   ", "R2-D2", "Zoë", "Jean-luc"])
    assert kept == ["ozzy", "mr. pickles", "jean-luc"]
    assert dropped == 4
    assert all(set(name) <= set(ALPHABET) for name in kept)


def test_windows_are_every_prefix_left_padded_and_shifted_by_one():
    inputs, targets = encode_windows(["bo", "abcdefghij"], context_length=4)
    assert len(inputs) == (2 + 1) + (10 + 1)
    rows = [window_text(x) + window_text(y)[-1] for x, y in zip(inputs, targets)]
    assert rows[:3] == ["****b", "***bo", "**bo+"]
    assert rows[-1] == "ghij+"
    assert "abcde" in rows
    for x, y in zip(inputs, targets):
        assert window_text(x)[1:] == window_text(y)[:-1]


def names_from_targets(targets: torch.Tensor) -> list[str]:
    """Decode names back from the last target character of each window."""
    text = "".join(VOCAB[i] for i in targets[:, -1].tolist())
    return text.split(STOP)[:-1]


def test_windows_round_trip_recovers_every_name():
    names = ["rex", "mister whiskers", "a", "o.malley"]
    inputs, targets = encode_windows(names, context_length=8)
    assert names_from_targets(targets) == names
    assert inputs.dtype == torch.uint8 and PAD == VOCAB[0]


def test_batches_come_whole_from_tensor_indexing():
    dataset = CharWindows(*encode_windows(["bella", "max", "luna"], context_length=8))
    loader = DataLoader(dataset, batch_size=5, shuffle=False, collate_fn=keep_batch)
    x, y = next(iter(loader))
    assert x.shape == y.shape == (5, 8)
    assert x.dtype == torch.long
    assert torch.equal(x, dataset.inputs[:5].long())


def test_whole_names_predict_every_character_and_the_stop_once_after_the_padding():
    inputs, targets, widths = encode_whole_names(["bo", "abcdefghij"], context_length=4)
    assert [window_text(row[:width]) for row, width in zip(inputs, widths)] == ["****bo", "****abcdefghij"]
    assert [window_text(row[:width]) for row, width in zip(targets, widths)] == ["***bo+", "***abcdefghij+"]
    predicted = [window_text(row[row != VOCAB.index(PAD)]) for row in targets]
    assert predicted == ["bo+", "abcdefghij+"]


def test_whole_name_batches_are_cut_to_their_longest_name():
    dataset = WholeNames(*encode_whole_names(["bella", "max", "mister whiskers"], context_length=8))
    inputs, targets = dataset.__getitems__([0, 1])
    assert inputs.shape == targets.shape == (2, 8 + len("bella")) and inputs.dtype == torch.long
    assert window_text(targets[0]).endswith("bella+") and window_text(targets[1]).endswith("max+**")


def test_whole_names_loader_resumes_mid_epoch():
    """The same resumable loader as windows: a new loader given the state after 2 batches deals out the rest."""
    datamodule = PetNamesDataModule(formulation="whole_names", batch_size=4096)
    datamodule.setup("fit")
    loader = datamodule.train_dataloader()
    batches = iter(loader)
    for _ in range(2):
        next(batches)
    state = loader.state_dict()
    rest = [inputs for inputs, _ in batches]
    resumed = datamodule.train_dataloader()
    resumed.load_state_dict(state)
    resumed_rest = [inputs for inputs, _ in resumed]
    assert len(rest) == len(resumed_rest) == len(loader) - 2
    assert all(torch.equal(a, b) for a, b in zip(rest, resumed_rest))
    assert state["dataset_size"] == len(datamodule.train_examples) < len(datamodule.names)


def test_real_data_keeps_the_documented_names_and_splits_by_name():
    datamodule = PetNamesDataModule(val_fraction=0.1, seed=3)
    datamodule.setup("fit")
    assert len(datamodule.names) == 64357
    assert datamodule.dropped_names == 66042 - 64357
    train_names = set(names_from_targets(datamodule.train_examples.targets))
    val_names = set(names_from_targets(datamodule.val_examples.targets))
    assert train_names | val_names == set(datamodule.names)
    assert not train_names & val_names
    again = PetNamesDataModule(val_fraction=0.1, seed=3)
    again.setup("fit")
    assert torch.equal(again.val_examples.inputs, datamodule.val_examples.inputs)
    total_windows = sum(len(name) + 1 for name in datamodule.names)
    assert len(datamodule.train_examples) + len(datamodule.val_examples) == total_windows
    assert 0.05 < len(datamodule.val_examples) / total_windows < 0.2


def test_names_load_from_json_and_text(tmp_path):
    json_file = tmp_path / "names.json"
    json_file.write_text(json.dumps(["Rex", "Fido"]))
    text_file = tmp_path / "names.txt"
    text_file.write_text("Rex\nFido\n")
    assert read_names(json_file) == read_names(text_file) == ["Rex", "Fido"]


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "is not valid JSON"),
        ('{"a": 1}', "must hold a JSON list of strings"),
        ("[1, 2]", "must hold a JSON list of strings"),
    ],
)
def test_bad_json_names_file(tmp_path, content, message):
    path = tmp_path / "names.json"
    path.write_text(content)
    with pytest.raises(UserInputError, match=message):
        read_names(path)


def test_pet_name_training_batches_shard_by_rank_without_lightnings_sampler():
    """The resumable loader places each rank's share itself; being a DistributedSampler, Lightning keeps it."""
    positions = torch.arange(1003)
    per_rank = []
    for rank in range(2):
        datamodule = PetNamesDataModule(batch_size=64)
        placement = {"num_replicas": 2, "rank": rank}
        datamodule.trainer = SimpleNamespace(strategy=SimpleNamespace(distributed_sampler_kwargs=placement))
        loader = datamodule.loader(CharWindows(positions[:, None], positions[:, None]), shuffle=True)
        assert isinstance(loader.sampler, DistributedSampler)  # so Lightning's _requires_distributed_sampler is False
        batches = list(loader)
        assert all(inputs.shape[1] == 1 and inputs.dtype == torch.long for inputs, _ in batches)
        per_rank.append(torch.cat([inputs[:, 0] for inputs, _ in batches]).tolist())
    assert len(per_rank[0]) == len(per_rank[1]) == 502  # 1003 windows, one repeated to even the ranks out
    assert set(per_rank[0]) | set(per_rank[1]) == set(positions.tolist())
    assert len(set(per_rank[0]) & set(per_rank[1])) == 1
