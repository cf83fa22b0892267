"""docs/template.md's table of answers names every question of cookiecutter.json, and nothing else: a question added
without its row (as `slurm` and `sweep` were, issue 51) fails here."""

import itertools
import json
import re

from tests.helpers.runs import ROOT

TABLE_HEADER = "| answer | default | meaning |"


def documented_answers() -> list[str]:
    """The names in the first column of the table of answers (a row may name several: `cnn`, `lstm`, `mlp`)."""
    lines = (ROOT / "docs" / "template.md").read_text().splitlines()
    start = lines.index(TABLE_HEADER) + 2  # past the header and its |---| line
    table = itertools.takewhile(lambda line: line.startswith("|"), lines[start:])
    return [name for row in table for name in re.findall(r"`(\w+)`", row.split("|")[1])]


def test_the_table_of_answers_names_every_question_once():
    questions = [name for name in json.loads((ROOT / "cookiecutter.json").read_text()) if not name.startswith("_")]
    documented = documented_answers()
    assert sorted(documented) == sorted(questions), "docs/template.md's table of answers and cookiecutter.json differ"
