"""templating/parts.py's rules on their own, in this process: markers keep and drop lines and name their mistakes,
a Markdown entry linking a removed file goes with it, a PATHS pattern names every test folder of a part, and no Python
module carries a marker (an example's or part's code and tests sit in its own files)."""

from pathlib import Path

import pytest

from templating.build import project_files
from templating.parts import (
    CHOICES,
    TemplateError,
    drop_entries_linking,
    keep_chosen_lines,
    marker_patterns,
    matching,
    truth_table,
)
from tests.helpers.runs import ROOT


def test_every_marker_in_the_root_is_balanced_and_names_known_choices():
    everything, nothing = truth_table(None), dict.fromkeys(truth_table(None), False)
    for relative in project_files():
        if relative.startswith("templating/"):  # describes the markers, and no generated project has it
            continue
        path = ROOT / relative
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for truth in (everything, nothing):
            trimmed = keep_chosen_lines(text, path, truth, relative)
            if path.suffix == ".py":  # an end-of-line marker on a wrapped line would cut a statement in half
                compile(trimmed, relative, "exec")


# Spelled in pieces so that this file's own markers check does not read them as markers.
ONLY_WITH, END = "# cookiecutter: only with", "# cookiecutter: end"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (f"a\n{ONLY_WITH} dask\nb\n", "example.py:2: 'only with' block never ends"),
        (f"a\n{END}\n", "example.py:2: 'cookiecutter: end' without a matching 'only with'"),
        (f"x = 1  {ONLY_WITH} gpu\n", "example.py:1: unknown name 'gpu'"),
        (f"{ONLY_WITH} dask or\n{END}\n", "example.py:1: cannot read condition 'dask or'"),
    ],
)
def test_marker_mistakes_name_the_file_and_line(text, message):
    with pytest.raises(TemplateError, match=message):
        keep_chosen_lines(text, Path("example.py"), truth_table(None), "example.py")


def test_markers_keep_and_drop_lines_in_python_and_markdown():
    truth = {**dict.fromkeys(CHOICES, False), "cnn": True, "template": False}
    python = f"a\n{ONLY_WITH} cnn\nb\n{END}\nc  {ONLY_WITH} dask\nd  {ONLY_WITH} cnn or dask\n"
    assert keep_chosen_lines(python, Path("x.py"), truth, "x.py") == "a\nb\nd\n"
    markdown = (
        "| a |\n| b | <!-- cookiecutter: only with lstm -->\n"
        "<!-- cookiecutter: only with not template -->\nc\n<!-- cookiecutter: end -->\n"
    )
    assert keep_chosen_lines(markdown, Path("x.md"), truth, "x.md") == "| a |\nc\n"


def test_list_items_and_table_rows_linking_a_removed_file_go_with_it(tmp_path):
    (tmp_path / "kept.md").write_text("kept")
    page = tmp_path / "page.md"
    page.write_text(
        "- [a](gone.md) with\n  its continuation\n  - [a sub-item](kept.md)\n- [b](kept.md)\n"
        "  - [c](folder/x.md#part)\n  - [d](kept.md)\n| [row](gone.md) | 1 |\n| [row](kept.md) | 2 |\n"
        "A sentence naming [gone](gone.md).\n"
    )
    drop_entries_linking(page, {(tmp_path / "gone.md").resolve(), (tmp_path / "folder").resolve()})
    assert page.read_text() == (
        "- [b](kept.md)\n  - [d](kept.md)\n| [row](kept.md) | 2 |\nA sentence naming [gone](gone.md).\n"
    )


def test_a_pattern_names_every_folder_of_that_name_under_tests():
    folders = [path.relative_to(ROOT).as_posix() for path in matching(ROOT, "tests/**/mlp")]
    assert {"tests/examples/mlp", "tests/dask/mlp", "tests/helpers/mlp"} <= set(folders)
    assert matching(ROOT, "docs/dask.md") == [ROOT / "docs" / "dask.md"]


def test_no_python_module_carries_a_part_marker():
    """A part owns whole files and folders of tests: a marker in a module would make a project keep half a file, and
    what a part adds to shared code is found where shared code looks for it (a strategy's `job_check`, ...)."""
    marked = []
    for path in sorted(ROOT / relative for relative in project_files() if relative.endswith(".py")):
        if path.is_relative_to(ROOT / "templating"):  # describes the markers, and no generated project has it
            continue
        start, end, inline = marker_patterns(path)
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if start.match(line) or end.match(line) or inline.match(line):
                marked.append(f"{path.relative_to(ROOT)}:{number}")
    assert not marked, f"part markers in Python modules (move the lines to the part's own files): {marked}"
