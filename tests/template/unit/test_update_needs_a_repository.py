"""`.template/update.py` in a project that is no git repository with a commit (generated where git has no identity,
or its `.git` removed) says in one line how to make one, exit 2, before it clones or changes anything."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.runs import ROOT


@pytest.fixture
def project(tmp_path) -> Path:
    """A generated project's update script and record, outside any git repository."""
    project = tmp_path / "my_project"
    (project / ".template").mkdir(parents=True)
    shutil.copy2(ROOT / ".template" / "update.py", project / ".template" / "update.py")
    record = {"template": str(tmp_path / "no-template-here"), "commit": "0" * 40, "answers": {}}
    (project / ".template" / "source.json").write_text(json.dumps(record))
    return project


def update(project: Path) -> subprocess.CompletedProcess:
    # No git repository above tmp_path is searched, wherever pytest keeps its folders.
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(project.parent)}
    command = [sys.executable, ".template/update.py"]
    return subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("repository", ["none", "without a commit"])
def test_update_outside_a_repository_with_a_commit_says_how_to_make_one(project, repository):
    if repository == "without a commit":
        subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    before = sorted(path.relative_to(project) for path in project.rglob("*"))
    result = update(project)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"error: {project} is no git repository with a commit, which the update merges into: run `git init && git add"
        ' -A && git commit -m "Generated from the template"` there, then this again\n'
    )
    assert sorted(path.relative_to(project) for path in project.rglob("*")) == before
