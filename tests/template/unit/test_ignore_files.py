"""A generated project's ignore files (.gitignore, .dockerignore) name only what that project has: each line about a
part's folder or file, comments included, sits between that part's markers, for every combination of answers."""

import itertools
import re
from pathlib import Path

import pytest

from templating.parts import CHOICES, EXAMPLES, PATHS, evaluate, keep_chosen_lines, matching
from tests.helpers.runs import ROOT

IGNORE_FILES = [".gitignore", ".dockerignore"]


def every_truth_table():
    """The condition values of every project the template can generate: any choices, at least one example."""
    for values in itertools.product((True, False), repeat=len(CHOICES)):
        truth = {**dict(zip(CHOICES, values, strict=True)), "template": False}
        if any(truth[example] for example in EXAMPLES):
            yield truth


@pytest.mark.parametrize("name", IGNORE_FILES)
def test_ignore_files_name_only_what_the_project_has(name):
    text = (ROOT / name).read_text()
    entries = [
        (condition, path.relative_to(ROOT).as_posix())
        for condition, paths in PATHS.items()
        for relative in paths
        for path in matching(ROOT, relative)
    ]
    wrong = []
    for truth in every_truth_table():
        removed = [relative for condition, relative in entries if not evaluate(condition, truth, "PATHS")]
        if name in removed:
            continue
        kept = keep_chosen_lines(text, Path(name), truth, name)
        if named := [path for path in removed if re.search(rf"(?<![\w.-]){re.escape(path)}(?![\w.-])", kept)]:
            wrong.append(f"with {', '.join(choice for choice in CHOICES if truth[choice])}: {', '.join(named)}")
    if wrong:
        pytest.fail(f"{name} names what the project does not have, in {len(wrong)} projects, e.g. {wrong[0]}")
