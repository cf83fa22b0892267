"""Optimizer and LR scheduler come from YAML: per-step OneCycleLR and ReduceLROnPlateau on val/loss."""

from tests.helpers.runs import read_metrics, run_cli, small_run_args


def logged_learning_rates(log_dir) -> list[float]:
    return [float(row["lr-AdamW"]) for row in read_metrics(log_dir) if row.get("lr-AdamW")]


def test_one_cycle_steps_every_batch_without_knowing_the_dataset_size(tmp_path, shapes_root):
    args = small_run_args("cnn.yaml", tmp_path, shapes_root, "--trainer.limit_train_batches", "4")
    args += [
        "--model.init_args.scheduler",
        "torch.optim.lr_scheduler.OneCycleLR",
        "--model.init_args.scheduler.max_lr",
        "0.01",
    ]
    run_cli("fit", args)
    rates = logged_learning_rates(tmp_path)
    assert len(rates) == 4 and len(set(rates)) == 4
    assert max(rates) <= 0.01


def test_reduce_on_plateau_watches_validation_loss_each_epoch(tmp_path, shapes_root):
    args = small_run_args("cnn.yaml", tmp_path, shapes_root, "--trainer.max_epochs", "3")
    args += [
        "--model.init_args.scheduler",
        "torch.optim.lr_scheduler.ReduceLROnPlateau",
        "--model.init_args.scheduler.factor",
        "0.5",
        "--model.init_args.scheduler.patience",
        "0",
        "--model.init_args.scheduler.threshold",
        "100",
        "--model.init_args.scheduler.threshold_mode",
        "abs",
    ]
    run_cli("fit", args)
    # Logged every step (3 a epoch). The first validation sets the best loss; no later one beats it
    # by 100, so the second halves the rate for the third epoch.
    assert logged_learning_rates(tmp_path) == [0.003] * 6 + [0.0015] * 3
