import torch

from datamodules.pet_names import VOCAB
from lightning_modules.name_generator import PAD_INDEX, STOP_INDEX, NameGenerator
from models.char_lstm import CharLSTM


def sample_by_rerunning_prefix(model: CharLSTM, num: int, context_length: int, max_length: int, generator: torch.Generator):
    """The slow way: re-run padding plus the whole prefix for every character, one sample per row."""
    sequences = torch.full((num, context_length), PAD_INDEX, dtype=torch.long)
    finished = torch.zeros(num, dtype=torch.bool)
    for _ in range(max_length):
        logits = model(sequences)[0][:, -1]
        logits[:, PAD_INDEX] = float("-inf")
        chars = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator).squeeze(1)
        chars = chars.masked_fill(finished, STOP_INDEX)
        finished |= chars == STOP_INDEX
        sequences = torch.cat([sequences, chars[:, None]], dim=1)
        if finished.all():
            break
    return sequences[:, context_length:]


def test_stateful_sampling_matches_rerunning_the_whole_prefix():
    torch.manual_seed(0)
    model = CharLSTM(len(VOCAB), hidden_size=16, num_layers=2).eval()
    fast, lengths = model.sample(64, PAD_INDEX, STOP_INDEX, context_length=8, max_length=12, generator=torch.Generator().manual_seed(5))
    slow = sample_by_rerunning_prefix(model, 64, context_length=8, max_length=12, generator=torch.Generator().manual_seed(5))
    assert torch.equal(fast[:, : slow.shape[1]], slow)
    for row, length in zip(fast.tolist(), lengths.tolist()):
        assert STOP_INDEX not in row[:length]
        assert all(char == STOP_INDEX for char in row[length:])


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
