"""Which config a resumed run saves: none when the run folder already holds the config it continues."""

import yaml

from trainrig.resume.run_directory import CONFIG_FILE, config_file_to_write

# What a run folder's config.yaml holds of a run (its trainer, the run's own folder, the checkpoint it started from).
SAVED = {
    "seed_everything": 42,
    "trainer": {
        "max_epochs": 2,
        "logger": {"class_path": "trainrig.resume.csv_logger.ContinuingCSVLogger", "init_args": {"save_dir": "logs"}},
    },
    "ckpt_path": None,
}


def test_a_run_saved_before_weights_only_was_set_resumes_without_another_config(tmp_path):
    """Runs saved `weights_only: null` before cli.py set it to true (or a user trusts the checkpoint with false to
    continue): whether the checkpoint is trusted says nothing about the run, as which checkpoint it continues."""
    (tmp_path / CONFIG_FILE).write_text(yaml.safe_dump({**SAVED, "weights_only": None}))
    for weights_only in (True, False):
        resumed = yaml.safe_dump({**SAVED, "ckpt_path": "last", "weights_only": weights_only})
        assert config_file_to_write(tmp_path, resumed) is None, f"weights_only {weights_only}"
    changed = yaml.safe_dump({**SAVED, "trainer": {**SAVED["trainer"], "max_epochs": 3}, "weights_only": True})
    assert config_file_to_write(tmp_path, changed) == "config.resumed-1.yaml"
