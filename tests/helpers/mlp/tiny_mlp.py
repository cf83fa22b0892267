"""The staged MLP (configs/mlp.yaml) shrunk to seconds on CPU for the strategy, schedule, resume and sharding tests:
a settings file over the example config, and the command-line arguments of a run with it.

Small generated images (32 x 32 canvas), no workers, a log row every step, no sanity validation and no progress
bar; each test picks the epochs, the batch (one global batch of 32 an epoch makes every world size see the same
samples per step), its callbacks and the model's init arguments. SGD with momentum for the tests that compare
strategies: Adam's first steps divide a gradient by its own magnitude, which turns a 1e-9 rounding difference of a
near-zero gradient into a whole step (tests/strategies/mlp/test_ddp_layer_split_pipeline.py).
"""

from pathlib import Path

import yaml

from tests.helpers.runs import ROOT

__all__ = ["SGD", "mlp_args", "write_mlp_settings", "write_settings"]

SGD = {"class_path": "torch.optim.SGD", "init_args": {"lr": 0.1, "momentum": 0.9}}
# The template's checkpoint callback, on no timer: it writes the sharded `last.ckpt` directories the tests read.
RESUMABLE = {"class_path": "trainrig.resume.checkpoint.ResumableCheckpoint", "init_args": {"train_time_interval": None}}


def write_settings(
    path: Path,
    shapes_root: Path,
    *,
    epochs: int,
    batch_size: int = 32,
    images_per_class: int = 8,
    model: dict | None = None,
    callbacks: list[dict] | None = None,
    **trainer,
) -> Path:
    """Writes the settings to `path`: `model` the MLP's init arguments, `trainer` further trainer settings."""
    settings = {
        "trainer": {
            "max_epochs": epochs,
            **trainer,
            "log_every_n_steps": 1,
            "num_sanity_val_steps": 0,
            "enable_progress_bar": False,
            "enable_model_summary": False,
            **({"callbacks": callbacks} if callbacks else {}),
        },
        "model": {"init_args": model or {}},
        "data": {
            "init_args": {
                "root": str(shapes_root),
                "images_per_class": images_per_class,
                "canvas_size": 32,
                "batch_size": batch_size,
                "num_workers": 0,
            }
        },
    }
    path.write_text(yaml.safe_dump(settings, sort_keys=False))
    return path


def mlp_args(settings: Path, log_dir: Path, *extra: str) -> list[str]:
    """A run of configs/mlp.yaml with `settings` over it, logging under `log_dir`; `extra` comes last."""
    return [
        *("--config", str(ROOT / "configs" / "mlp.yaml"), "--config", str(settings)),
        *("--trainer.logger.init_args.save_dir", str(log_dir)),
        *extra,
    ]


def write_mlp_settings(directory: Path, shapes_root: Path, epochs: int, batch_size: int) -> Path:
    """The fsdp2 tests' settings (tests/helpers/sharded_runs.py): the MLP with SGD and resumable checkpoints."""
    return write_settings(
        directory / f"fsdp2_mlp_{epochs}x{batch_size}.yaml",
        shapes_root,
        epochs=epochs,
        batch_size=batch_size,
        model={"hidden_sizes": [32], "optimizer": SGD},
        callbacks=[RESUMABLE],
    )
