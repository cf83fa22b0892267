import torch

from datamodules.pet_names import VOCAB
from lightning_modules.name_generator import PAD_INDEX, STOP_INDEX, NameGenerator
from models.char_lstm import CharLSTM, sample_categorical


def sample_by_rerunning_prefix(
    model: CharLSTM, num: int, context_length: int, max_length: int, generator: torch.Generator
):
    """The slow way: re-run padding plus the whole prefix for every character of every unfinished name."""
    prefixes = [[PAD_INDEX] * context_length for _ in range(num)]
    active = list(range(num))
    for _ in range(max_length):
        logits = model(torch.tensor([prefixes[row] for row in active]))[0][:, -1]
        logits[:, PAD_INDEX] = float("-inf")
        chars = sample_categorical(torch.softmax(logits, dim=-1), generator).tolist()
        for row, char in zip(active, chars):
            prefixes[row].append(char)
        active = [row for row, char in zip(active, chars) if char != STOP_INDEX]
        if not active:
            break
    return [prefix[context_length:] for prefix in prefixes]


def test_stateful_sampling_matches_rerunning_the_whole_prefix():
    torch.manual_seed(0)
    model = CharLSTM(len(VOCAB), hidden_size=16, num_layers=2).eval()
    fast, lengths = model.sample(
        64, PAD_INDEX, STOP_INDEX, context_length=8, max_length=12, generator=torch.Generator().manual_seed(5)
    )
    slow = sample_by_rerunning_prefix(
        model, 64, context_length=8, max_length=12, generator=torch.Generator().manual_seed(5)
    )
    for row, length, expected in zip(fast.tolist(), lengths.tolist(), slow):
        assert row[: len(expected)] == expected
        assert STOP_INDEX not in row[:length]
        assert all(char == STOP_INDEX for char in row[length:])
    assert lengths.min() < 12 and lengths.max() == 12, "the test should cover early stops and names cut at max_length"


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
    kept = generator.predict_step(torch.arange(300), 0)
    assert kept and not set(kept) & generator.known_names
