"""The name generator's quality, guarded without timing it: `configs/lstm.yaml`'s optimizer trains a reduced run
past the plateau where a character LSTM only knows how often each letter comes, on two seeds.

The example's own measure, the share of real pet names among generated ones (`# target:` in the config), needs the
full run's ~1,500 steps to mean anything; a reduced run's names are nearly all new. So the measure here is the one it
grows from: the loss per character on held-out names. A deep LSTM first sits on a plateau at ~3.05, the entropy of
the letters' frequencies, and a rate far from the config's keeps it there.
"""

import pytest

from tests.helpers.runs import last_value, read_metrics, run_cli, small_run_args

# Held-out loss per character the reduced run reaches; the letter-frequency plateau is at ~3.05. Measured: the
# test's docstring.
HELD_OUT_LOSS = 2.85
# 200 steps of 128 windows: the config's network, optimizer and rate on a fifteenth of an epoch, in batches a
# quarter of the config's so that the steps are cheap. 20 validation batches: the same 2,560 held-out windows on
# every seed.
REDUCED = ["--data.init_args.batch_size", "128", "--trainer.limit_train_batches", "200"]
REDUCED += ["--trainer.limit_val_batches", "20", "--trainer.log_every_n_steps", "50"]


@pytest.mark.parametrize("seed", [42, 1])
def test_the_configured_optimizer_leaves_the_letter_frequency_plateau(tmp_path, seed):
    """Held-out loss <= 2.85 after 200 steps (measured: 2.69 at seed 42, 2.62 at seed 1). With Adam's rate ten
    times the config's (3e-2), seed 42 stays on the plateau (3.07) and fails, but seed 1 leaves it (2.62) and passes:
    at ten times, whether the network leaves the plateau depends on the seed. A tenth of the rate (3e-4): 3.06 and
    3.06; a hundred times (0.3): 3.28 and 3.53; all fail."""
    run_cli("fit", small_run_args("lstm.yaml", tmp_path, None, "--seed_everything", str(seed), *REDUCED))
    assert last_value(read_metrics(tmp_path), "val/loss") <= HELD_OUT_LOSS
