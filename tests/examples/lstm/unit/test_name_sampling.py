from pathlib import Path

import pytest
import torch
from lightning.pytorch import Trainer

from datamodules.pet_names import VOCAB, clean_names, encode_whole_names, encode_windows, read_names
from lightning_modules.name_generator import PAD_INDEX, STOP_INDEX, NameGenerator
from models.char_lstm import CharLSTM, sample_categorical
from tests.helpers.runs import ROOT, last_value, read_metrics, run_cli, small_run_args


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


# Options given to `cli.py predict` take effect although the checkpoint was trained with other values.
@pytest.fixture(scope="module")
def trained_checkpoint(tmp_path_factory) -> Path:
    log_dir = tmp_path_factory.mktemp("fit")
    run_cli("fit", small_run_args("lstm.yaml", log_dir))
    (checkpoint,) = log_dir.rglob("last.ckpt")
    return checkpoint


def predicted_names(checkpoint: Path, log_dir: Path, *options: str) -> list[str]:
    args = small_run_args("lstm.yaml", log_dir, None, "--ckpt_path", str(checkpoint), *options)
    run_cli("predict", [*args, "--data.init_args.num_names_to_generate", "300"])
    (names_file,) = log_dir.rglob("generated_names.txt")
    return [name.lower() for name in names_file.read_text().splitlines()]


def test_predict_honours_temperature(trained_checkpoint, tmp_path):
    keep_all = ("--model.init_args.exclude_training_names", "false")
    cold = predicted_names(trained_checkpoint, tmp_path / "cold", "--model.init_args.temperature", "1e-4", *keep_all)
    warm = predicted_names(trained_checkpoint, tmp_path / "warm", *keep_all)
    assert len(set(cold)) <= 3 < len(set(warm)), "a cold sampler repeats the likeliest name (3 steps: flat logits)"


def test_predict_honours_max_name_length(trained_checkpoint, tmp_path):
    names = predicted_names(trained_checkpoint, tmp_path, "--model.init_args.max_name_length", "3")
    assert (
        names
        and max(map(len, names)) <= 3
        and max(map(len, predicted_names(trained_checkpoint, tmp_path / "default"))) > 3
    )


def test_predict_honours_exclude_training_names(trained_checkpoint, tmp_path):
    known = set(clean_names(read_names(ROOT / "data" / "pet_names.txt"))[0])
    short = ("--model.init_args.max_name_length", "2")
    kept = predicted_names(
        trained_checkpoint, tmp_path / "kept", "--model.init_args.exclude_training_names", "false", *short
    )
    excluded = predicted_names(trained_checkpoint, tmp_path / "excluded", *short)
    assert set(kept) & known, "two-letter names include real ones (Bo, Jo, ...)"
    assert not set(excluded) & known


def test_whole_names_train_through_the_cli_and_generate_from_the_carried_state(tmp_path):
    """Predict samples from the conditional the checkpoint learned, whatever formulation the predict config names."""
    whole_names = ("--data.init_args.formulation", "whole_names")
    run_cli("fit", small_run_args("lstm.yaml", tmp_path / "fit", None, *whole_names, "--trainer.max_steps", "3"))
    rows = read_metrics(tmp_path / "fit")
    assert 0 < last_value(rows, "val/loss") < last_value(rows, "train/loss") + 1
    (checkpoint,) = (tmp_path / "fit").rglob("last.ckpt")
    as_trained = predicted_names(checkpoint, tmp_path / "as_trained", *whole_names)
    config_says_windows = predicted_names(checkpoint, tmp_path / "config_says_windows")
    assert as_trained and as_trained == config_says_windows
    assert NameGenerator.load_from_checkpoint(checkpoint).hparams.formulation == "whole_names"
