"""A checkpoint's data position is a count into the order of the shards it trained on: resuming it over other shards
would skip and repeat samples, so it is refused in one line (trainrig/data/streaming.py)."""

import pytest
import torch

from trainrig.data.location import Location
from trainrig.data.shards import Shards
from trainrig.data.streaming import check_checkpoint_position
from trainrig.errors import UserInputError, one_line


def checkpoint_counting_in(tmp_path, fingerprint: str):
    """The loop state Lightning saves for a ShardsDataLoader, and nothing else."""
    position = {"epoch": 1, "consumed": 16, "dataset_size": 64, "shards": fingerprint}
    path = tmp_path / f"{fingerprint[:4]}.ckpt"
    torch.save({"loops": {"fit_loop": {"state_dict": {"combined_loader": [position]}}}}, path)
    return path


def test_a_position_in_other_shards_is_refused_in_one_line_and_one_in_these_passes(tmp_path):
    these = Shards(Location(str(tmp_path / "shards")), {"fingerprint": "b" * 64})
    check_checkpoint_position(str(checkpoint_counting_in(tmp_path, "b" * 64)), these)
    with pytest.raises(UserInputError) as refused:
        check_checkpoint_position(str(checkpoint_counting_in(tmp_path, "a" * 64)), these)
    message = one_line(refused.value)
    assert "counts its data position in other shards (fingerprint aaaaaaaaaaaa)" in message
    assert "\n" not in message
