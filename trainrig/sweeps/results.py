"""What a sweep leaves for people: the table of trials (printed and `trials.csv`), the best trial's `best.yaml`,
and Optuna's plots as PNG (matplotlib: in the `sweep` extra)."""

import copy
import csv
import sys
import warnings
from pathlib import Path

import optuna
import yaml

from trainrig.sweeps.driver import SECONDS
from trainrig.sweeps.space import set_key

COLUMNS = ("trial", "state", "value", "seconds")


def write_results(study: optuna.Study, base_config: dict, sweep_dir: Path, metric: str) -> None:
    rows = table(study)
    print_table(rows)
    with (sweep_dir / "trials.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]) if rows else COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    written = [sweep_dir / "trials.csv"]
    if any(trial.state == optuna.trial.TrialState.COMPLETE for trial in study.trials):
        written.append(write_best_config(study, base_config, sweep_dir, metric))
    written += write_plots(study, sweep_dir)
    print(f"sweep: wrote {', '.join(str(path) for path in written)}", file=sys.stderr)


def table(study: optuna.Study) -> list[dict]:
    keys = sorted({key for trial in study.trials for key in trial.params})
    rows = []
    for trial in study.trials:
        # How long the trial's processes ran: not the time a stopped driver left it waiting to be resumed.
        duration = trial.user_attrs.get(SECONDS)
        row = {
            "trial": trial.number,
            "state": trial.state.name,
            "value": "" if trial.value is None else f"{trial.value:.6g}",
            "seconds": "" if duration is None else f"{duration:.1f}",
        }
        row.update({key: trial.params.get(key, "") for key in keys})
        row["note"] = trial.user_attrs.get("fail_reason", "")
        rows.append(row)
    return rows


def print_table(rows: list[dict]) -> None:
    if not rows:
        return
    headers = [column.rsplit(".", 1)[-1] for column in rows[0]]
    cells = [[str(value) for value in row.values()] for row in rows]
    widths = [max(len(text) for text in column) for column in zip(headers, *cells)]
    for line in (headers, *cells):
        print("  ".join(text.ljust(width) for text, width in zip(line, widths)).rstrip())


def write_best_config(study: optuna.Study, base_config: dict, sweep_dir: Path, metric: str) -> Path:
    """The training config with the best trial's values: `python cli.py fit --config best.yaml` trains it again."""
    best = study.best_trial
    config = copy.deepcopy(base_config)
    for key, value in best.params.items():
        set_key(config, key, value)
    path = sweep_dir / "best.yaml"
    header = f"# Best trial {best.number} of sweep {study.study_name}: {metric} {best.value:.6g}\n"
    path.write_text(header + yaml.safe_dump(config, sort_keys=False))
    return path


def write_plots(study: optuna.Study, sweep_dir: Path) -> list[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        from optuna.visualization import matplotlib as plots
    except ImportError:
        print("sweep: no plots: matplotlib is not installed (pip install matplotlib)", file=sys.stderr)
        return []
    written = []
    for name, plot in (("history", plots.plot_optimization_history), ("importances", plots.plot_param_importances)):
        path = sweep_dir / f"{name}.png"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                plot(study).figure.savefig(path, bbox_inches="tight")
        except (ValueError, RuntimeError) as error:  # e.g. importances need two completed trials
            print(f"sweep: no {name} plot: {error}", file=sys.stderr)
            continue
        written.append(path)
    return written
