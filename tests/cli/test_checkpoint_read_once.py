"""The checks before a run (readable, parameter names, shapes) share one read of a `--ckpt_path` file: a large
checkpoint costs its index once before the run restores it, not once per check."""

import traceback
from pathlib import Path

import torch

from tests.helpers.runs import EXAMPLE_CONFIGS, ROOT, run_cli, small_run_args


def test_the_checks_before_a_run_read_the_checkpoint_file_once(tmp_path, shapes_root, monkeypatch):
    run_cli("fit", small_run_args(EXAMPLE_CONFIGS[0], tmp_path / "trained", shapes_root))
    (checkpoint,) = (tmp_path / "trained").rglob("last.ckpt")
    machinery = ROOT / "trainrig"
    reads_by_the_machinery = []
    load = torch.load

    def counted_load(source, *args, **kwargs):
        caller = Path(traceback.extract_stack()[-2].filename)
        if machinery in caller.parents and Path(source).resolve() == checkpoint.resolve():
            reads_by_the_machinery.append(caller.name)
        return load(source, *args, **kwargs)

    monkeypatch.setattr(torch, "load", counted_load)
    run_cli(
        "validate",
        [*small_run_args(EXAMPLE_CONFIGS[0], tmp_path / "validated", shapes_root), "--ckpt_path", str(checkpoint)],
    )
    # LightningCLI reads the file's hyper-parameters, and the trainer restores it, each on its own.
    assert reads_by_the_machinery == ["loading.py"]
