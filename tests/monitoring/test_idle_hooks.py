"""Lightning calls only the per-batch hooks the run's callbacks override (trainrig/monitoring/idle_hooks.py): a hook
left as `Callback`'s own is passed over, every other one runs as before."""

import json
from pathlib import Path

import pytest
from lightning.pytorch import Callback, Trainer
from lightning.pytorch.demos.boring_classes import BoringModel
from lightning.pytorch.profilers import PassThroughProfiler
from typing_extensions import override

from tests.helpers.runs import EXAMPLE_CONFIGS, run_cli
from tests.monitoring.host_reads import user_run_args
from trainrig.monitoring.idle_hooks import BATCH_HOOKS, skip_idle_batch_hooks


class DispatchRecord(PassThroughProfiler):
    """A profiler the config chooses, as `--trainer.profiler`: Lightning names each callback hook it calls to it."""

    called: set[str] = set()

    @override
    def profile(self, action_name: str):
        DispatchRecord.called.add(action_name)
        return super().profile(action_name)


class OverriddenBatchHooks(Callback):
    """Writes to `record`, at the end of training, the callback hooks Lightning called at batches and those the run's
    callbacks override, each as Lightning names it: `[Callback]<state_key>.<hook>`."""

    def __init__(self, record: str) -> None:
        self.record = Path(record)

    @override
    def on_train_end(self, trainer, pl_module) -> None:
        def name(callback, hook):
            return f"[Callback]{callback.state_key}.{hook}"

        overridden = [
            name(callback, hook)
            for callback in trainer.callbacks
            for hook in BATCH_HOOKS
            if getattr(type(callback), hook) is not getattr(Callback, hook)
        ]
        batch_hooks = {name(callback, hook) for callback in trainer.callbacks for hook in BATCH_HOOKS}
        called = sorted(batch_hooks & DispatchRecord.called)
        self.record.write_text(json.dumps({"called": called, "overridden": sorted(overridden)}))


def test_a_run_calls_only_the_batch_hooks_its_callbacks_override(tmp_path, shapes_root):
    record = tmp_path / "hooks.json"
    callback = {"class_path": f"{__name__}.OverriddenBatchHooks", "init_args": {"record": str(record)}}
    profiler = {"class_path": f"{__name__}.DispatchRecord"}
    args = user_run_args(EXAMPLE_CONFIGS[-1], tmp_path, shapes_root, "--trainer.callbacks+", json.dumps(callback))
    DispatchRecord.called = set()
    run_cli("fit", [*args, "--trainer.profiler", json.dumps(profiler)])
    hooks = json.loads(record.read_text())
    # The run trained and validated, and its callbacks' own batch hooks ran: the progress bar's, the checkpoints'.
    assert "[Callback]EpochProgress.on_train_batch_end" in hooks["called"]
    assert any(".on_validation_batch_end" in name for name in hooks["called"])
    fit_hooks = [name for name in hooks["overridden"] if "on_test_" not in name and "on_predict_" not in name]
    assert hooks["called"] == fit_hooks


class CountsBatchEnds(Callback):
    def __init__(self) -> None:
        self.batch_ends = 0

    @override
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.batch_ends += 1


class InheritsTheCount(CountsBatchEnds):
    """Overrides nothing itself: its base's hook runs."""


class CountsOnItself(Callback):
    """Sets its hook on the instance, not the class."""

    def __init__(self) -> None:
        self.batch_ends = 0
        self.on_train_batch_end = self.count

    def count(self, *args) -> None:
        self.batch_ends += 1


@pytest.mark.parametrize("callback_class", [CountsBatchEnds, InheritsTheCount, CountsOnItself])
def test_a_hook_the_callback_overrides_anywhere_still_runs_at_every_batch(tmp_path, callback_class):
    callback, idle = callback_class(), Callback()
    trainer = Trainer(
        default_root_dir=tmp_path,
        max_steps=3,
        callbacks=[callback, idle],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    skip_idle_batch_hooks(trainer.callbacks)
    assert idle.on_train_batch_end is None and callback.on_train_batch_end is not None
    trainer.fit(BoringModel())
    assert callback.batch_ends == 3
