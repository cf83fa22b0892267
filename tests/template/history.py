"""The template's own history, for the tests that hold a project from before a change against today's code."""

import subprocess

from tests.helpers import ROOT
from tests.helpers.run_if import missing

__all__ = ["BEFORE_THE_MOVE", "BEFORE_THE_SHORT_CLI", "skip_without"]

BEFORE_THE_MOVE = "0ee2da9"  # the template before its machinery moved into trainrig/ (issue 26)
BEFORE_THE_SHORT_CLI = "dee827d"  # the template before cli.py's machinery moved into trainrig/cli/ (issue 37)


def skip_without(commit: str) -> None:
    """Skip (fail in CI), naming what is missing, where the history does not reach `commit` (a shallow clone)."""
    found = subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=ROOT, capture_output=True)
    if found.returncode != 0:
        missing(f"needs the git history down to template commit {commit} (CI checks out with fetch-depth: 0)")
