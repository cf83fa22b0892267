"""The flags after `--` are parsed by cli.py fit's own parser before the batch script is written
(trainrig/launch/fit_arguments.py): a flag that would fail on the cluster fails here, in one line, exit 2, nothing
written."""

import pytest

from tests.helpers.runs import EXAMPLE_CONFIGS, ROOT
from trainrig.slurm import sbatch

REQUEST = ("--nodes", "2", "--config", f"configs/{EXAMPLE_CONFIGS[0]}")
DID_YOU_MEAN = "; did you mean --trainer.max_epochs"


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (("--trainer.max_epohcs", "3"), f"error: unknown option --trainer.max_epohcs{DID_YOU_MEAN}"),
        (("--trainer.max_epoch", "3"), f"error: unknown option --trainer.max_epoch{DID_YOU_MEAN}"),
        (("--trainer.max_epochs", "three"), "error: --trainer.max_epochs expects int or None, got 'three'"),
    ],
)
def test_a_misspelt_abbreviated_or_wrong_typed_flag_after_the_separator_writes_no_script(
    monkeypatch, capsys, tmp_path, flags, line
):
    monkeypatch.chdir(ROOT)
    script = tmp_path / "job.sbatch"
    with pytest.raises(SystemExit) as exit_info:
        sbatch.main(["--output", str(script), *REQUEST, "--", *flags])
    error = capsys.readouterr().err
    assert (exit_info.value.code, error.count("\n")) == (2, 1)
    assert error.startswith(line), error
    assert not script.exists()


def test_flags_that_parse_are_written(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(ROOT)
    script = tmp_path / "job.sbatch"
    sbatch.main(["--output", str(script), *REQUEST, "--", "--trainer.max_epochs", "3"])
    assert "--trainer.max_epochs 3" in script.read_text()
