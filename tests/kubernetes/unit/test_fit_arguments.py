"""The flags after `--` are parsed by cli.py fit's own parser before a manifest is written
(trainrig/launch/fit_arguments.py): one line, exit 2, nothing written."""

import pytest

from tests.helpers.runs import EXAMPLE_CONFIGS, ROOT
from trainrig.kubernetes import jobs

REQUEST = ("--name", "shapes", "--image", "template:0.1", "--nodes", "2", "--config", f"configs/{EXAMPLE_CONFIGS[0]}")


@pytest.mark.parametrize("kind", ["TrainJob", "PyTorchJob"])
@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (
            ("--trainer.max_epohcs", "3"),
            "error: unknown option --trainer.max_epohcs; did you mean --trainer.max_epochs",
        ),
        (("--trainer.max_epochs", "three"), "error: --trainer.max_epochs expects int or None, got 'three'"),
    ],
)
def test_a_misspelt_or_wrong_typed_flag_after_the_separator_writes_no_manifest(
    monkeypatch, capsys, tmp_path, kind, flags, line
):
    monkeypatch.chdir(ROOT)
    manifest = tmp_path / "job.yaml"
    with pytest.raises(SystemExit) as exit_info:
        jobs.main(["--kind", kind, "--output", str(manifest), *REQUEST, "--", *flags])
    error = capsys.readouterr().err
    assert (exit_info.value.code, error.count("\n")) == (2, 1)
    assert error.startswith(line), error
    assert not manifest.exists()
