"""A project generated before the machinery moved into trainrig/ follows the template with .template/update.py (issue
26): the copy of the script it has, from before the move, merges the move with the user's edits at the files' new
places; the new copy, run once more, lists the lines of the user's own configs that name old modules.

The template is a clone of this repository: OLD is the commit before the move, and the working tree, committed in the
clone, is the new template, so the tests hold for what is about to be committed.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from cookiecutter.main import cookiecutter

from templating.build import export
from tests.helpers import ROOT
from tests.helpers.examples import shrink_args
from tests.template.history import BEFORE_THE_MOVE, BEFORE_THE_SHORT_CLI, skip_without

# Measured 17 s in pytest (22 s wall) on 2 shared CPU cores; the limit stops a hung git or run.
pytestmark = pytest.mark.timeout(300)

OLD = BEFORE_THE_MOVE
ANSWERS = {"cnn": "no", "lstm": "no", "mlp": "yes", "dask": "no", "wandb": "no", "kubernetes": "no", "sweep": "no"}
# Git without this machine's settings (what the old script does depends on diff.renames), and a committer.
GIT_ENV = {
    **os.environ,
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}
REPORT_LINE = re.compile(r"(?P<file>[^:\s]+):(?P<line>\d+): (?P<old>\S+) -> (?P<new>\S+)")
OWN_OLD_PATHS = ("resume.csv_logger.ContinuingCSVLogger", "resume.checkpoint.ResumableCheckpoint")


def run(command: list[str], cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=240, env=env or GIT_ENV)


def git(*args: str, cwd: Path) -> str:
    result = run(["git", *args], cwd)
    assert result.returncode == 0, f"git {' '.join(args)}: {result.stderr}"
    return result.stdout.strip()


def commit_all(repo: Path, message: str) -> str:
    git("add", "-A", cwd=repo)
    git("commit", "-q", "--allow-empty", "-m", message, cwd=repo)
    return git("rev-parse", "HEAD", cwd=repo)


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path.name} no longer holds {old!r}"
    path.write_text(text.replace(old, new, 1))


def line_of(text: str, part: str) -> int:
    """The number of the first line holding `part`."""
    return next(number for number, line in enumerate(text.splitlines(), 1) if part in line)


class Setup:
    """The template clone, its new commit, and a project generated at OLD with the user's edits committed."""

    def __init__(self, tmp: Path):
        self.clone, self.project = tmp / "template", tmp / "out" / "my_lightning_project"
        git("clone", "-q", "--no-local", str(ROOT), str(self.clone), cwd=tmp)
        git("checkout", "-q", "-b", "working-tree", cwd=self.clone)
        git("rm", "-rq", ".", cwd=self.clone)
        export(self.clone, ROOT)
        self.new = commit_all(self.clone, "the working tree")
        git("checkout", "-q", OLD, cwd=self.clone)
        with pytest.MonkeyPatch.context() as patch:  # cookiecutter's copy of the template, kept on failure
            patch.setattr(tempfile, "tempdir", str(tmp))
            cookiecutter(str(self.clone), no_input=True, extra_context=ANSWERS, output_dir=str(tmp / "out"))
        git("checkout", "-q", "working-tree", cwd=self.clone)
        git("init", "-q", "-b", "main", cwd=self.project)
        commit_all(self.project, "generated before the move")

        # The user's edits: a value in a config, a model's line, a line of a machinery file that moves, an own config.
        self.config = self.project / "configs" / "mlp.yaml"
        edit(self.config, "images_per_class: 1000", "images_per_class: 600")
        self.own_config = self.project / "configs" / "my_run.yaml"
        self.own_config.write_text(self.config.read_text().replace("name: mlp}", "name: my_run}"))
        self.own_config_text = self.own_config.read_text()
        edit(self.project / "models" / "staged_mlp.py", '"""A multilayer perceptron', '"""My multilayer perceptron')
        edit(self.project / "resume" / "checkpoint.py", "kept as `previous.ckpt`.", "kept as `previous.ckpt` (mine).")
        self.edited = commit_all(self.project, "my edits")
        self.update = [sys.executable, ".template/update.py", "--template", str(self.clone), "--to", self.new]
        self.no_renames = tmp / "no-renames.gitconfig"
        self.no_renames.write_text("[diff]\n\trenames = false\n")

    def listed(self) -> list[str]:
        """The lines the new script prints for the user's own config."""
        return [
            f"configs/my_run.yaml:{line_of(self.own_config_text, old)}: {old} -> trainrig.{old}"
            for old in OWN_OLD_PATHS
        ]


@pytest.fixture(scope="module")
def module_setup(tmp_path_factory) -> Setup:
    skip_without(OLD)
    return Setup(tmp_path_factory.mktemp("update"))


@pytest.fixture
def setup(module_setup) -> Setup:
    """The project as the user left it, before any update."""
    git("reset", "-q", "--hard", module_setup.edited, cwd=module_setup.project)
    git("clean", "-qfd", cwd=module_setup.project)
    return module_setup


def test_the_old_script_merges_the_move_and_the_new_one_lists_the_users_old_paths(setup, tmp_path, shapes_root):
    project = setup.project
    result = run(setup.update, project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"merged template changes {OLD}" in result.stdout
    assert json.loads((project / ".template" / "source.json").read_text())["commit"] == setup.new
    assert (project / "trainrig" / "resume" / "checkpoint.py").is_file()
    assert not (project / "resume").exists() and not (project / "strategy_flag.py").exists()
    assert "images_per_class: 600" in setup.config.read_text()
    assert "class_path: trainrig.resume.checkpoint.ResumableCheckpoint" in setup.config.read_text()
    assert (project / "models" / "staged_mlp.py").read_text().startswith('"""My multilayer perceptron')
    assert "kept as `previous.ckpt` (mine)." in (project / "trainrig" / "resume" / "checkpoint.py").read_text()
    assert setup.own_config.read_text() == setup.own_config_text, "the user's own config is the user's to change"

    # The new update.py, run once more before the commit, merges nothing and lists the user's old module paths.
    result = run(setup.update, project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        f"already at template commit {setup.new[:12]}",
        *setup.listed(),
        "2 value(s) in 1 YAML file(s) name modules the template moved (trainrig/errors/moved.py): change them as shown",
    ]

    # The user changes what the list names; then the configs run.
    for found in map(REPORT_LINE.fullmatch, setup.listed()):
        path, number = project / found["file"], int(found["line"])
        lines = path.read_text().splitlines(keepends=True)
        lines[number - 1] = lines[number - 1].replace(found["old"], found["new"])
        path.write_text("".join(lines))
    assert run(setup.update, project).stdout.splitlines()[-1] == "no YAML file names a module the template moved"
    for name in ("mlp", "my_run"):
        fit = [sys.executable, "cli.py", "fit", "--config", f"configs/{name}.yaml", "--trainer.max_epochs", "1"]
        fit += ["--trainer.limit_train_batches", "2", "--trainer.limit_val_batches", "1"]
        fit += ["--trainer.enable_progress_bar", "false", "--trainer.logger.init_args.save_dir", str(tmp_path)]
        result = run([*fit, *shrink_args("mlp.yaml", shapes_root)], project)
        assert result.returncode == 0, f"{name}: {result.stderr[-3000:]}"


def test_the_old_script_without_rename_detection_stops_and_changes_nothing(setup):
    """Its `git diff` follows the user's diff.renames: when false, the edited moved file's deletion does not apply."""
    result = run(setup.update, setup.project, env={**GIT_ENV, "GIT_CONFIG_GLOBAL": str(setup.no_renames)})
    assert result.returncode == 1
    assert result.stderr.startswith("error: the template changes do not apply: ")
    assert "error: patch failed: resume/checkpoint.py:1" in result.stderr
    assert git("status", "--porcelain", cwd=setup.project) == ""


def test_the_new_script_follows_a_move_into_a_conflict_whatever_the_git_settings(setup):
    """A line both sides changed in a moved file is a conflict at its new place, even with diff.renames = false."""
    project = setup.project
    shutil.copy2(setup.clone / ".template" / "update.py", project / ".template" / "update.py")
    edit(project / "resume" / "checkpoint.py", "from resume.preemption import", "from resume.preemption import (mine)")
    commit_all(project, "the new update.py, and an edit the template also makes")
    result = run(setup.update, project, env={**GIT_ENV, "GIT_CONFIG_GLOBAL": str(setup.no_renames)})
    assert result.returncode == 1, result.stdout + result.stderr
    assert "conflict with this project's edits in trainrig/resume/checkpoint.py" in result.stderr
    merged = (project / "trainrig" / "resume" / "checkpoint.py").read_text()
    assert "<<<<<<<" in merged and "from resume.preemption import (mine)" in merged
    assert "from trainrig.resume.preemption import" in merged and "kept as `previous.ckpt` (mine)." in merged
    assert not (project / "resume").exists()
    assert result.stdout.splitlines()[:2] == setup.listed()


@pytest.fixture
def project_before_the_short_cli(module_setup, tmp_path) -> Path:
    """A project generated when cli.py still held TemplateCLI and the checks, as the user committed it."""
    skip_without(BEFORE_THE_SHORT_CLI)
    clone = module_setup.clone
    git("checkout", "-q", BEFORE_THE_SHORT_CLI, cwd=clone)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(tempfile, "tempdir", str(tmp_path))
            generated = cookiecutter(str(clone), no_input=True, extra_context=ANSWERS, output_dir=str(tmp_path / "out"))
    finally:
        git("checkout", "-q", "working-tree", cwd=clone)
    project = Path(generated)
    git("init", "-q", "-b", "main", cwd=project)
    commit_all(project, "generated before cli.py became short")
    return project


def test_the_users_edits_to_the_old_cli_are_listed_with_where_each_goes_now(module_setup, project_before_the_short_cli):
    """The old cli.py's machinery moved into trainrig/cli/: the old script's merge leaves the user's cli.py in
    conflict, and the new one, run once more, names each edit and its new place."""
    project = project_before_the_short_cli
    cli = project / "cli.py"
    edit(cli, "from datamodules import", "from callbacks.timer import Timer\nfrom datamodules import")
    edit(cli, "DATA_TO_MODEL_LINKS = model_arguments()", 'DATA_TO_MODEL_LINKS = (*model_arguments(), "vocab_size")')
    edit(cli, '"default_root_dir": "logs",', '"default_root_dir": "runs",')
    edit(cli, "ParallelismRecord(),\n", "ParallelismRecord(),\n                    Timer(),\n")
    commit_all(project, "my edits to cli.py")
    yours = cli.read_text()
    update = [sys.executable, ".template/update.py", "--template", str(module_setup.clone), "--to", module_setup.new]

    result = run(update, project)  # the project's own script, from before the change
    assert result.returncode == 1, result.stdout + result.stderr
    assert "conflict with this project's edits in cli.py" in result.stderr

    result = run(update, project)  # the new script it merged, run once more
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-5:] == [
        f"HEAD:cli.py:{line_of(yours, 'import Timer')}: from callbacks.timer import Timer -> cli.py",
        f"HEAD:cli.py:{line_of(yours, 'vocab_size')}: "
        'DATA_TO_MODEL_LINKS = (*model_arguments(), "vocab_size") -> DATA_TO_MODEL_LINKS in cli.py',
        f'HEAD:cli.py:{line_of(yours, "runs")}: "default_root_dir": "runs", -> TRAINER_DEFAULTS in cli.py',
        f"HEAD:cli.py:{line_of(yours, 'Timer(),')}: Timer(), -> TRAINER_DEFAULTS in cli.py",
        "4 edit(s) of your cli.py to make again: cli.py now holds only your choices and its machinery is in "
        "trainrig/cli/; take the template's version (`git checkout --theirs cli.py`), then make each edit where shown",
    ]
    git("checkout", "--theirs", "cli.py", cwd=project)  # the way out it names
    assert "TRAINER_DEFAULTS = {" in cli.read_text() and "class TemplateCLI" not in cli.read_text()
