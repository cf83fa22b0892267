"""A new user's first hour, replayed on a generated project (issue 51): the template's promises hold for a task the
template has never seen.

    path/to/project/.venv/bin/python templating/new_user_check.py path/to/project

Run with the project's own environment (`.ci/run` uses the "everything" project's, after its smoke tests: no second
install). It copies a small own task into the project the way the README's "Your own data" and "Your own model" tell
a user to (templating/new_user_task/: a CSV, a `LightningDataModule` whose training `DataLoader` is a plain
`shuffle=True` one, a `LightningModule`, a config; no template helper), and then checks, each by the commands a user
types, that it

- trains;
- stopped by SIGTERM mid-epoch and continued with `--ckpt_path last`, ends with the uninterrupted run's whole run
  directory (the project's own comparison, tests/helpers/run_dirs.py);
- trains through the Dask launcher, where the project has it, and becomes a SLURM batch script, where it has that;
- meets the user's mistakes with their line: a misspelt class path names the module and the near class, an
  ImportError in the user's module shows itself and the file and line (exit 1), a misspelt flag after `--` to the
  batch-script generator is refused with nothing written, an abbreviated flag gets "did you mean" (exit 2).

The project is changed (its files, a data/ CSV, logs under a temporary folder): run it on a throwaway generation. It
prints one line per check and exits 1 at the first broken promise, with the command and its output.
"""

import csv
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

TASK = Path(__file__).parent / "new_user_task"
CONFIG = "configs/tabular.yaml"
# 320 rows: 256 for training, 8 steps of 32 an epoch; the run stops at step 12, in the middle of its second epoch.
ROWS, FEATURES, STOP_STEP = 320, 8, 12
PREEMPTED = 143  # 128 + SIGTERM: the run saved last.ckpt and ended as preempted
BAD_INPUT, BUG = 2, 1


class BrokenPromise(AssertionError):
    """A check that failed; the message says which, with the command and what it printed."""


def main(project: Path) -> None:
    project = project.resolve()
    sys.path.insert(0, str(project))  # the project's own run-directory comparison
    from tests.helpers.faults import fault
    from tests.helpers.run_dirs import RunDirectory, assert_same_run_directory

    add_the_task(project)
    with tempfile.TemporaryDirectory(prefix="new_user_check-") as scratch:
        logs = Path(scratch)
        fit = ["cli.py", "fit", "--config", CONFIG, "--trainer.enable_progress_bar", "false"]
        # Each mistake's command writes under the scratch folder too, should a broken check let it train.
        mistake = [*fit, "--trainer.logger.init_args.save_dir", str(logs / "mistakes")]
        run(project, [*fit, "--trainer.logger.init_args.save_dir", str(logs / "uninterrupted")], expect=0)
        print("ok: the own task trains")

        stop = fault(STOP_STEP, "SIGTERM", once=logs / "stopped-once")
        stopped = [*fit, "--trainer.logger.init_args.save_dir", str(logs / "stopped"), *stop]
        run(project, stopped, expect=PREEMPTED)
        run(project, [*stopped, "--ckpt_path", "last"], expect=0)
        resumed, uninterrupted = (RunDirectory.only_one_under(logs / name) for name in ("stopped", "uninterrupted"))
        try:
            assert_same_run_directory(resumed, uninterrupted, f"stopped at step {STOP_STEP}")
        except AssertionError as difference:
            raise BrokenPromise(f"the resumed run is not the uninterrupted one: {difference}") from None
        print(f"ok: stopped by SIGTERM at step {STOP_STEP} (mid-epoch) and resumed, the run directory is the same")

        if (project / "trainrig" / "dask").is_dir():
            dask = [*fit, "--trainer.logger.init_args.save_dir", str(logs / "dask"), "--dask.n_workers", "2"]
            run(project, [*dask, "--trainer.max_epochs", "1"], expect=0)
            if not list((logs / "dask").rglob("last.ckpt")):
                raise BrokenPromise("the Dask run wrote no last.ckpt")
            print("ok: trains through the Dask launcher")

        if (project / "trainrig" / "slurm").is_dir():
            script = logs / "train.sbatch"
            sbatch = ["-m", "trainrig.slurm.sbatch", "--nodes", "2", "--config", CONFIG, "--output", str(script)]
            run(project, [*sbatch, "--", "--trainer.max_epochs", "3"], expect=0)
            if "--trainer.max_epochs 3" not in script.read_text():
                raise BrokenPromise(f"{script.name} does not pass the flag after -- to cli.py fit")
            print("ok: becomes a SLURM batch script")
            script.unlink()
            output = run(project, [*sbatch, "--", "--trainer.max_epohcs", "3"], expect=BAD_INPUT)
            expect_one_line(output, "--trainer.max_epohcs", "did you mean", "--trainer.max_epochs")
            if script.exists():
                raise BrokenPromise("the refused batch script was written")
            print("ok: a misspelt flag after -- is refused before the script is written")

        misspelt = "lightning_modules.regressor.Regresor"
        output = run(project, [*mistake, "--model.class_path", misspelt], expect=BAD_INPUT)
        expect_one_line(output, "lightning_modules.regressor", "Regresor", "Regressor")
        print("ok: a misspelt class path names the module and the near name")

        output = run(project, [*mistake, "--model.class_path", "lightning_modules.broken.Broken"], expect=BUG)
        for shown in ("ModuleNotFoundError", "a_package_nobody_installed", "lightning_modules/broken.py"):
            if shown not in output:
                raise BrokenPromise(f"an ImportError in the user's module does not show {shown!r}:\n{output[-3000:]}")
        print("ok: an ImportError in the user's module shows itself, its file and line, exit 1")

        output = run(project, [*mistake, "--trainer.max_epoch", "1"], expect=BAD_INPUT)
        expect_one_line(output, "--trainer.max_epoch", "did you mean", "--trainer.max_epochs")
        print("ok: an abbreviated flag is refused with did you mean")


def add_the_task(project: Path) -> None:
    """The task's files where the README puts them, and its CSV: a noisy linear target of uniform features."""
    for source in TASK.rglob("*"):
        if source.is_file() and "__pycache__" not in source.parts:
            target = project / source.relative_to(TASK)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
    draw = random.Random(0)
    weights = [draw.uniform(-1, 1) for _ in range(FEATURES)]
    (project / "data").mkdir(exist_ok=True)
    with (project / "data" / "tabular.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([*(f"x{index}" for index in range(FEATURES)), "y"])
        for _ in range(ROWS):
            features = [round(draw.uniform(-1, 1), 4) for _ in range(FEATURES)]
            target = sum(w * x for w, x in zip(weights, features)) + draw.gauss(0, 0.1)
            writer.writerow([*features, round(target, 4)])


def run(project: Path, args: list[str], expect: int) -> str:
    """Run the project's python with `args` in the project; its output, if it exits with `expect`."""
    command = [sys.executable, *args]
    environment = {**os.environ, "PYTHONUNBUFFERED": "1"}
    result = subprocess.run(command, cwd=project, capture_output=True, text=True, timeout=300, env=environment)
    output = result.stdout + result.stderr
    if result.returncode != expect:
        raise BrokenPromise(f"exit {result.returncode}, expected {expect}: {' '.join(command)}\n{output[-3000:]}")
    return output


def expect_one_line(output: str, *words: str) -> None:
    """The last line of what a refused command printed is its error, naming every one of `words`, without a
    traceback."""
    last = output.strip().splitlines()[-1] if output.strip() else ""
    if "Traceback" in output or not last.startswith("error:") or not all(word in last for word in words):
        raise BrokenPromise(f"expected one error line naming {words}, got:\n{output[-3000:]}")


if __name__ == "__main__":
    if len(sys.argv) != 2 or not (Path(sys.argv[1]) / "cli.py").is_file():
        print("usage: PROJECT/.venv/bin/python templating/new_user_check.py PROJECT (a generated one)", file=sys.stderr)
        sys.exit(2)
    try:
        main(Path(sys.argv[1]))
    except BrokenPromise as broken:
        print(f"FAILED: {broken}", file=sys.stderr)
        sys.exit(1)
    print("new-user check passed")
