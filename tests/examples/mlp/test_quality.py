"""The staged MLP's quality, guarded without timing it: `configs/mlp.yaml`'s optimizer trains a reduced run to a
held-out loss that a run with a broken rate does not reach, on two seeds.

The example's measure is `val/acc` (`# target:` in the config), but a reduced run ends near 0.47 (chance: 0.2) and
a run whose rate is a hundred times too high still ends at 0.38: its accuracy recovers while it stays confidently
wrong. The loss on the held-out images tells them apart, so it is the measure here.
"""

import pytest

from tests.helpers.runs import last_value, read_metrics, run_cli, small_run_args

# Held-out loss the reduced run reaches, below uniform guessing over 5 classes (1.61). Measured: the test's docstring.
HELD_OUT_LOSS = 1.4
# 500 generated images a class, drawn at 32 pixels (2,000 to train on, 500 held out), for 4 epochs in the config's
# batches of 100: 80 steps of the config's network, optimizer and rate.
REDUCED = ["--data.init_args.images_per_class", "500", "--data.init_args.batch_size", "100"]
REDUCED += ["--trainer.max_epochs", "4", "--trainer.limit_train_batches", "1.0", "--trainer.limit_val_batches", "1.0"]
REDUCED += ["--trainer.log_every_n_steps", "20"]


@pytest.mark.parametrize("seed", [42, 1])
def test_the_configured_optimizer_reaches_a_low_held_out_loss(tmp_path, shapes_root, seed):
    """Held-out loss <= 1.4 after 80 steps (measured: 1.25 at seed 42, 1.23 at seed 1). With Adam's rate a hundred
    times the config's (0.1): 5.49 and 7.17; a tenth of it (1e-4): 1.48 and 1.48; both fail. Ten times (1e-2) is no
    break for this network and passes: 1.21 and 1.20 (val/acc 0.49 and 0.46, against 0.46 and 0.49)."""
    run_cli("fit", small_run_args("mlp.yaml", tmp_path, shapes_root, "--seed_everything", str(seed), *REDUCED))
    assert last_value(read_metrics(tmp_path), "val/loss") <= HELD_OUT_LOSS
