"""benchmarks/host_time.py's cases leave out what their names say: the template as shipped skips its callbacks' idle
batch hooks and trains on the resumable loader; "without idle-hook skip" calls every hook, "without resumable loader"
trains on the loader the datamodule returns."""

import json
from pathlib import Path

import pytest
from lightning.pytorch import Callback
from typing_extensions import override

from benchmarks.host_time import template_config
from tests.helpers.runs import run_cli
from trainrig.monitoring.idle_hooks import BATCH_HOOKS


class RunRecord(Callback):
    """Writes to `record`, as training starts, the training loader's class and how many batch hooks are set aside."""

    def __init__(self, record: str) -> None:
        self.record = Path(record)

    @override
    def on_train_start(self, trainer, pl_module) -> None:
        skipped = sum(vars(callback).get(name, ...) is None for callback in trainer.callbacks for name in BATCH_HOOKS)
        loader = type(trainer.train_dataloader).__name__
        self.record.write_text(json.dumps({"loader": loader, "skipped_hooks": skipped}))


def recorded_case(tmp_path, leave_out: str | None) -> dict:
    record = tmp_path / "record.json"
    callback = {"class_path": f"{__name__}.RunRecord", "init_args": {"record": str(record)}}
    config = template_config(tmp_path, leave_out)
    run_cli("fit", ["--config", str(config), "--trainer.max_steps", "2", "--trainer.callbacks+", json.dumps(callback)])
    return json.loads(record.read_text())


@pytest.mark.parametrize(
    ("leave_out", "loader", "hooks_skipped"),
    [
        (None, "ResumableDataLoader", True),
        ("idle-hook skip", "ResumableDataLoader", False),
        ("resumable loader", "PositionKeepingLoader", True),
    ],
    ids=["template", "without idle-hook skip", "without resumable loader"],
)
def test_each_case_trains_with_what_its_name_says(tmp_path, leave_out, loader, hooks_skipped):
    record = recorded_case(tmp_path, leave_out)
    assert record["loader"] == loader
    assert (record["skipped_hooks"] > 0) == hooks_skipped
