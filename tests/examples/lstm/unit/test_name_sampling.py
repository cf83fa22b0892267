"""How the name generator samples, on small untrained models in this process: the fast sampler draws the names the
training data's conditional gives, within the length, alphabet and stop character, one name per seed; the runs of
`cli.py predict` are in tests/examples/lstm/test_name_generation.py."""

import pytest
import torch
from lightning.pytorch import Trainer

from datamodules.pet_names import VOCAB, encode_whole_names, encode_windows
from lightning_modules.name_generator import PAD_INDEX, STOP_INDEX, NameGenerator
from models.char_lstm import CharLSTM, sample_categorical


def sample_as_trained(model: CharLSTM, context_length: int, uniforms: torch.Tensor):
    """The slow reference, from the training data's definition of the conditional: one name at a time, each next
    character drawn from the model run on the window `encode_windows` makes for the name so far (its last window,
    whose training target is the character after the prefix), with the name's uniform number for its position."""
    num, max_length = uniforms.shape
    names, finished = [""] * num, [False] * num
    for position in range(max_length):
        for row in range(num):
            if finished[row]:
                continue
            inputs, _ = encode_windows([names[row]], context_length)
            logits = model(inputs[-1:].long())[0][:, -1]
            logits[:, PAD_INDEX] = float("-inf")
            char = sample_categorical(torch.softmax(logits, dim=-1), uniforms[row, position : position + 1]).item()
            finished[row] = char == STOP_INDEX
            names[row] += "" if finished[row] else VOCAB[char]
    return names


def sample_as_trained_on_whole_names(model: CharLSTM, context_length: int, uniforms: torch.Tensor):
    """The slow reference for `formulation: whole_names`, from `encode_whole_names`: one name at a time, each next
    character drawn from the model run from a zero state over the name so far as a training row (padding, then the
    name), at the row's last input, whose training target is the character after the name so far."""
    num, max_length = uniforms.shape
    names, finished = [""] * num, [False] * num
    for position in range(max_length):
        for row in range(num):
            if finished[row]:
                continue
            inputs, _, widths = encode_whole_names([names[row]], context_length)
            logits = model(inputs[:, : widths[0]].long())[0][:, -1]
            logits[:, PAD_INDEX] = float("-inf")
            char = sample_categorical(torch.softmax(logits, dim=-1), uniforms[row, position : position + 1]).item()
            finished[row] = char == STOP_INDEX
            names[row] += "" if finished[row] else VOCAB[char]
    return names


@pytest.mark.parametrize(
    "carry_state, slow_reference", [(False, sample_as_trained), (True, sample_as_trained_on_whole_names)]
)
def test_fast_sampling_draws_the_names_the_training_conditional_gives(carry_state, slow_reference):
    torch.manual_seed(0)
    model = CharLSTM(len(VOCAB), hidden_size=16, num_layers=2).eval()
    uniforms = torch.rand(48, 14, generator=torch.Generator().manual_seed(5))
    fast, lengths = model.sample(uniforms, PAD_INDEX, STOP_INDEX, context_length=8, carry_state=carry_state)
    fast_names = ["".join(VOCAB[i] for i in row[:length]) for row, length in zip(fast.tolist(), lengths.tolist())]
    slow_names = slow_reference(model, context_length=8, uniforms=uniforms)
    assert fast_names == slow_names
    assert min(map(len, fast_names)) < 8 and sum(len(name) > 8 for name in fast_names) >= 10, (
        "the test should cover early stops and names longer than the context"
    )


def test_the_two_conditionals_agree_only_on_the_first_character():
    """Both see 8 padding characters first; then they differ, so the test above tells which one a sampler uses."""
    torch.manual_seed(0)
    model = CharLSTM(len(VOCAB), hidden_size=16, num_layers=2).eval()
    uniforms = torch.rand(48, 14, generator=torch.Generator().manual_seed(5))
    windows = sample_as_trained(model, 8, uniforms)
    whole = sample_as_trained_on_whole_names(model, 8, uniforms)
    assert [name[:1] for name in windows] == [name[:1] for name in whole] and windows != whole


def test_generated_names_respect_length_alphabet_and_stop():
    torch.manual_seed(0)
    generator = NameGenerator(VOCAB, hidden_size=16, num_layers=1, max_name_length=6, exclude_training_names=False)
    names = generator.generate(200)
    assert len(names) == 200
    assert all(len(name) <= 6 for name in names)
    assert all(set(name) <= set(VOCAB[2:]) for name in names)
    assert any(len(name) < 6 for name in names), "an untrained model should sometimes emit the stop character"


def test_low_temperature_concentrates_on_the_likeliest_character():
    torch.manual_seed(0)
    cold = NameGenerator(VOCAB, hidden_size=16, num_layers=1, max_name_length=4, temperature=0.01)
    assert len(set(cold.generate(50))) <= 2


def test_prediction_drops_names_seen_in_training():
    torch.manual_seed(0)
    generator = NameGenerator(VOCAB, hidden_size=16, num_layers=1, max_name_length=2)
    generated = generator.generate(300)
    generator.known_names = set(generated[:150])
    generator.trainer = Trainer(accelerator="cpu", devices=1, logger=False)
    kept = generator.predict_step(torch.stack([torch.arange(300), torch.arange(300) + 7], dim=1), 0)
    assert len(kept) == 300, "as many new names as asked for: dropped ones are sampled again"
    assert all(kept) and not set(kept) & generator.known_names


def test_a_predicted_name_depends_on_its_seed_alone():
    """Not on the batch it is sampled in: processes sampling their share of the names give the names one does."""
    torch.manual_seed(0)
    generator = NameGenerator(VOCAB, hidden_size=16, num_layers=1, max_name_length=8, exclude_training_names=False)
    generator.trainer = Trainer(accelerator="cpu", devices=1, logger=False)
    items = torch.stack([torch.arange(40), torch.arange(40) * 13 + 1], dim=1)
    together = generator.predict_step(items, 0)
    assert generator.predict_step(items[1::2], 0) == together[1::2]
    assert generator.predict_step(items[[5, 0, 9]], 0) == [together[5], together[0], together[9]]
    assert len(set(together)) > 30, "each name's own seed: no two names drawn alike"
