"""The template replaces Lightning's default profiler, which records nothing at a cost per hook, by one that records
nothing for free (trainrig/monitoring/hook_profiler.py); a profiler the config chooses stays and profiles."""

import json
from pathlib import Path

from lightning.pytorch import Callback
from typing_extensions import override

from tests.helpers.runs import EXAMPLE_CONFIGS, run_cli
from tests.monitoring.host_reads import user_run_args


class ProfilerRecord(Callback):
    """Writes the class of the profiler the run trains with to `record`."""

    def __init__(self, record: str) -> None:
        self.record = Path(record)

    @override
    def on_train_start(self, trainer, pl_module) -> None:
        self.record.write_text(type(trainer.profiler).__name__)


def profiled_run(tmp_path, shapes_root, *extra: str) -> str:
    record = tmp_path / "profiler.txt"
    callback = {"class_path": f"{__name__}.ProfilerRecord", "init_args": {"record": str(record)}}
    args = user_run_args(EXAMPLE_CONFIGS[-1], tmp_path, shapes_root, "--trainer.callbacks+", json.dumps(callback))
    run_cli("fit", [*args, *extra])
    return record.read_text()


def test_a_run_as_shipped_pays_nothing_for_the_default_profiler(tmp_path, shapes_root):
    assert profiled_run(tmp_path, shapes_root) == "NoProfiler"


def test_a_profiler_the_config_chooses_stays_and_times_the_callbacks_hooks(tmp_path, shapes_root):
    profiler = {
        "class_path": "lightning.pytorch.profilers.SimpleProfiler",
        "init_args": {"dirpath": str(tmp_path), "filename": "report"},
    }
    assert profiled_run(tmp_path, shapes_root, "--trainer.profiler", json.dumps(profiler)) == "SimpleProfiler"
    assert "[Callback]EpochProgress.on_train_batch_end" in (tmp_path / "fit-report.txt").read_text()
