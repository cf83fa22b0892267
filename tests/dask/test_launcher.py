"""The Dask launcher on real LocalClusters with two worker processes: same losses as DDP, results on the client,
bad options refused before any cluster starts."""

import copy
import dataclasses
import logging
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.dask.runs import SUBPROCESS_ENV, losses, start_lightning_launched, wait_for_success
from tests.helpers.examples import heavy
from tests.helpers.runs import EXAMPLE_CONFIGS, ROOT, run_cli, small_run_args
from trainrig.dask.description import Attempt, describe_run

PROBE_IMPORTS = """
import sys
sys.path.insert(0, {root!r})
import cli
for args in (["fit", "--help"], {fit_args!r}):
    try:
        cli.main(args)
    except SystemExit as exit:
        assert exit.code == 0, exit.code
print(sorted({{name.split(".")[0] for name in sys.modules}} & {{"dask", "distributed"}}))
"""


def test_plain_run_and_help_never_import_dask(tmp_path, shapes_root):
    fit_args = ["fit", *small_run_args(EXAMPLE_CONFIGS[-1], tmp_path, shapes_root)]
    probe = PROBE_IMPORTS.format(root=str(ROOT), fit_args=fit_args)
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=SUBPROCESS_ENV, capture_output=True, text=True, timeout=180
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_options_that_cannot_work_fail_before_any_cluster_starts(tmp_path, shapes_root, capsys):
    args = small_run_args(EXAMPLE_CONFIGS[0], tmp_path, shapes_root, "--dask.n_workers", "2")
    for extra, message in (
        (["--trainer.devices", "2"], "one rank on one device"),
        (["--dask.n_workers", "0"], "at least 1"),
        (["--dask.address", "tls://127.0.0.1:8786"], "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            run_cli("fit", [*args, *extra])
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err


def test_a_run_is_described_once_frozen_with_its_run_named_and_the_parsed_config_left_as_it_was(
    tmp_path, shapes_root, monkeypatch
):
    launched = []
    monkeypatch.setattr("trainrig.dask.launch.launch", lambda *arguments: launched.append(arguments))
    args = small_run_args(EXAMPLE_CONFIGS[0], tmp_path, shapes_root, "--dask.n_workers", "2")
    run_cli("fit", [*args, "--dask.checkpoint_dir", str(tmp_path / "shared")])
    ((job, subcommand, resolved),) = launched
    experiment = tmp_path / resolved["trainer"]["logger"]["init_args"]["name"]
    (experiment / "version_0").mkdir(parents=True)  # an earlier run: this one is the next version
    parsed = copy.deepcopy(resolved)

    description = describe_run(job, subcommand, resolved)

    assert resolved == parsed, "describing the run changed the parsed config"
    assert description.config["trainer"]["logger"]["init_args"]["version"] == 1
    assert "dask" not in description.config, "a rank launches nothing"
    assert description.shared_dir == tmp_path / "shared" / experiment.name / "version_1" / "checkpoints"
    with pytest.raises(dataclasses.FrozenInstanceError):
        description.subcommand = "test"
    with pytest.raises(TypeError):
        description.config["trainer"]["logger"]["init_args"]["version"] = 2
    attempt = Attempt(0, world_size=2, main_address="127.0.0.1", main_port=1, topic="run", checkpoint_queue="files")
    sent = pickle.loads(pickle.dumps(dataclasses.replace(description, attempt=attempt)))  # as a worker gets it
    assert sent.config == description.config and sent.attempt == attempt and description.attempt is None
    config = sent.rank_config(tmp_path / "rank", plugins=[], callbacks=[], checkpoint_file=None)
    assert config["trainer"]["num_nodes"] == 2 and config["trainer"]["logger"]["init_args"]["version"] == 1
    config["trainer"]["logger"]["init_args"]["version"] = 2  # the rank's own copy
    assert sent.config["trainer"]["logger"]["init_args"]["version"] == 1


def fit_through_dask_matches_ddp(config: str, tmp_path: Path, shapes_root: Path, caplog) -> None:
    args = small_run_args(config, tmp_path / "ddp", shapes_root, "--trainer.max_epochs", "2")
    baseline = start_lightning_launched([*args, "--trainer.strategy", "ddp", "--trainer.devices", "2"])
    caplog.set_level(logging.INFO, logger="trainrig.dask")
    run_cli(
        "fit",
        small_run_args(config, tmp_path / "dask", shapes_root, "--trainer.max_epochs", "2", "--dask.n_workers", "2"),
    )
    wait_for_success(baseline)

    assert losses(tmp_path / "dask") == pytest.approx(losses(tmp_path / "ddp"), rel=1e-5)
    assert len(losses(tmp_path / "dask")) == 2 * 3, "rank 0 logged every step of both epochs"

    (run_dir,) = (tmp_path / "dask").glob("*/version_0")
    assert {"last.ckpt"} < {path.name for path in (run_dir / "checkpoints").iterdir()}
    assert any(path.name.startswith("best-") for path in (run_dir / "checkpoints").iterdir())
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert saved["dask"]["n_workers"] == 2, "the saved config reproduces the Dask run"
    assert saved["trainer"]["logger"]["init_args"]["save_dir"] == str(tmp_path / "dask")
    streamed = [record.getMessage() for record in caplog.records if "epoch " in record.getMessage()]
    assert [line.split(":")[1].strip() for line in streamed] == ["epoch 0 step 3", "epoch 1 step 6"]
    assert all("val/loss" in line and "train/loss" in line for line in streamed)


@pytest.mark.parametrize(
    "config", [pytest.param(config, marks=pytest.mark.slow) if heavy(config) else config for config in EXAMPLE_CONFIGS]
)
def test_fit_through_dask_matches_ddp_and_returns_results(config, tmp_path, shapes_root, caplog):
    fit_through_dask_matches_ddp(config, tmp_path, shapes_root, caplog)
