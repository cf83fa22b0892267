"""A sweep's shared training flags and its own are taken only as spelled, and its search space gives every trial
values cli.py fit's parser takes: a misspelt, abbreviated or wrong-typed flag or value stops the sweep in one line,
exit 2, before its folder is written."""

import optuna
import pytest

import sweep
from tests.helpers.runs import EXAMPLE_CONFIGS, ROOT
from trainrig.errors import UserInputError
from trainrig.sweeps.space import check_values_parse

CONFIG = str(ROOT / "configs" / EXAMPLE_CONFIGS[0])


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (("--sweep.trial", "3"), "error: unknown option --sweep.trial; did you mean --sweep.trials?"),
        pytest.param(  # cli.py's own parser, in the process that resolves the shared config: seconds
            ("--trainer.max_epoch", "3"),
            "error: unknown option --trainer.max_epoch; did you mean --trainer.max_epochs",
            marks=pytest.mark.slow,
        ),
    ],
)
def test_a_misspelt_flag_stops_the_sweep_before_it_writes(monkeypatch, capsys, tmp_path, flags, line):
    monkeypatch.chdir(tmp_path)  # where the config's logs, and the sweep's folder, would be written
    with pytest.raises(SystemExit) as exit_info:
        sweep.main(
            [
                "--config",
                CONFIG,
                "--sweep.space",
                '{"trainer.max_epochs": {"type": "int", "low": 1, "high": 2}}',
                *flags,
            ]
        )
    error = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert error.startswith(line) and error.count("\n") == 1, error
    assert list(tmp_path.iterdir()) == []


def test_a_search_space_value_the_training_parser_refuses_stops_the_sweep(monkeypatch):
    monkeypatch.chdir(ROOT)
    float_epochs = {"trainer.max_epochs": optuna.distributions.FloatDistribution(1, 2)}
    with pytest.raises(UserInputError) as refused:
        check_values_parse(float_epochs, ["--config", CONFIG])
    assert str(refused.value) == (
        "the search space gives a trial a value cli.py fit refuses: --trainer.max_epochs expects int or None, got '1.0'"
    )
    check_values_parse(
        {
            "trainer.max_epochs": optuna.distributions.IntDistribution(1, 2),
            "seed_everything": optuna.distributions.CategoricalDistribution([1, 2, 3]),
        },
        ["--config", CONFIG],
    )
