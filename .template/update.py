"""Merge the template's later changes into this project, keeping your own edits.

    python .template/update.py                 # up to the template's newest commit
    python .template/update.py --to v2.0       # up to a tag, branch or commit
    python .template/update.py --template URL  # from elsewhere than the recorded source

.template/source.json records where the project came from: the template's git URL or path, its
commit, and the answers given. This regenerates the project with those answers at that commit and
at the new one, and applies the difference between the two to this git repository as a three-way
merge (`git apply --3way`): your edits stay, the template's land beside them, and a line both
changed becomes a conflict, marked in the file and listed, never silently overwritten. A file the
template moved arrives as a rename, your edits to it included. Nothing is committed: review with
`git diff --cached`, then commit. Needs cookiecutter 2.4 or newer (dev extra).

Every run, one with nothing to merge included, ends by listing the values in the project's YAML files
that name a module the template moved (trainrig/errors/moved.py), one `file:line: old -> new` each;
it changes none of them. After the update that brought trainrig/, run the script once more: the copy
that ran that update is the older one, which has no such list.

When cli.py became the short file of your choices (its machinery moved into trainrig/cli/), your own edits to the old
cli.py conflict with it: run the script once more too, and it lists each edit, one `HEAD:cli.py:line: edit -> new
place` each, to make again in the template's cli.py or where that part of cli.py went.
"""

import argparse
import ast
import difflib
import json
import os
import re
import runpy
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

PROJECT = Path(__file__).resolve().parent.parent
RECORD = PROJECT / ".template" / "source.json"
# The template's table of the modules it moved; a project generated before the move has none.
MOVED_TABLE = Path("trainrig", "errors", "moved.py")
# A value that can name code; a lone word (`resume`, `errors`) is a setting, whatever module once had the name.
DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")
# Where the parts of the old cli.py went when it became the file of the user's choices: by the name that held them
# there (a TemplateCLI method as TemplateCLI.NAME, the trainer defaults as trainer_defaults), the new name (None: the
# same) and file. Anything else of the old file (imports, your own functions) stays in cli.py.
CLI = "cli.py"
CLI_MOVES = {
    "DATA_TO_MODEL_LINKS": (None, CLI),
    "TemplateCLI.__init__.trainer_defaults": ("TRAINER_DEFAULTS", CLI),
    "TemplateCLI.before_validate": ("TemplateCLI.before_subcommand", "trainrig/cli/template_cli.py"),
    "TemplateCLI.before_test": ("TemplateCLI.before_subcommand", "trainrig/cli/template_cli.py"),
    "TemplateCLI.before_predict": ("TemplateCLI.before_subcommand", "trainrig/cli/template_cli.py"),
    "TemplateCLI": (None, "trainrig/cli/template_cli.py"),
    "LOST_PEER_EXIT_CODE": ("LOST_PEER", "trainrig/errors/exit_status.py"),
    **dict.fromkeys(
        (
            "check_model_arguments_are_linked",
            "check_checkpoint_fits",
            "check_config_files_parse",
            "check_strategy_name",
            "check_no_moved_class_path",
        ),
        (None, "trainrig/cli/checks.py"),
    ),
    **dict.fromkeys(
        ("run", "main", "silence_library_noise", "not_a_litlogger_tip", "release_job_resources"),
        (None, "trainrig/cli/entry.py"),
    ),
}


class UpdateError(Exception):
    """Why the update cannot start; printed as one line."""

    exit_status = 1


class NoRepository(UpdateError):
    """The project is no git repository with a commit to merge into: the user's to make, so bad input."""

    exit_status = 2

    def __init__(self) -> None:
        super().__init__(
            f"{PROJECT} is no git repository with a commit, which the update merges into: run `git init && git add -A"
            ' && git commit -m "Generated from the template"` there, then this again'
        )


def git(*args: str, cwd: Path = PROJECT, env: dict | None = None) -> str:
    result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise UpdateError(f"git {' '.join(args[:2])} failed: {result.stderr.strip()}")
    return result.stdout.strip()


def generate(template: Path, commit: str, answers: dict, output_dir: Path) -> Path:
    """The project these answers give at this template commit, without its record."""
    try:
        from cookiecutter.main import cookiecutter
    except ModuleNotFoundError:
        raise UpdateError('cookiecutter is not installed: pip install -e ".[dev]"') from None

    git("checkout", "-q", commit, cwd=template)
    # No repository of its own: only its files are compared (a template from before the answer ignores it).
    context = {**answers, "_git_repository": False}
    project = Path(cookiecutter(str(template), no_input=True, extra_context=context, output_dir=str(output_dir)))
    (project / ".template" / "source.json").unlink(missing_ok=True)
    return project


def check_repository() -> None:
    """The project is a git repository with a first commit: the generation makes one where git can commit."""
    try:
        head = subprocess.run(["git", "rev-parse", "--verify", "-q", "HEAD"], cwd=PROJECT, capture_output=True)
    except FileNotFoundError:
        raise UpdateError("git is not installed, and the update merges with it") from None
    if head.returncode != 0:
        raise NoRepository


def tree_of(folder: Path, scratch: Path) -> str:
    """Store the folder's files in this repository's object database, as git would see them; return the tree."""
    env = {**os.environ, "GIT_INDEX_FILE": str(scratch / f"{folder.parent.name}.index")}
    git("--work-tree", str(folder), "add", "-A", ".", env=env)
    return git("write-tree", env=env)


def update(template: str, target: str | None) -> None:
    record = json.loads(RECORD.read_text())
    if not record.get("commit"):
        raise UpdateError(
            "the project was generated from a folder that is no git repository, so no template commit was recorded"
        )
    check_repository()
    with tempfile.TemporaryDirectory(prefix="template-update-") as scratch_name:
        scratch = Path(scratch_name)
        clone = scratch / "template"
        git("clone", "-q", template.removeprefix("git+"), str(clone), cwd=scratch)
        new = git("rev-parse", f"{target or 'HEAD'}^{{commit}}", cwd=clone)
        if new == record["commit"]:  # a second run right after an update, still uncommitted, only checks the configs
            print(f"already at template commit {new[:12]}")
            report_moved_modules()
            report_cli_edits()
            return
        if git("status", "--porcelain"):
            raise UpdateError("the work tree has uncommitted changes: commit or stash them first")
        old_tree = tree_of(generate(clone, record["commit"], record["answers"], scratch / "old"), scratch)
        new_tree = tree_of(generate(clone, new, record["answers"], scratch / "new"), scratch)
        # -M: a file the template moved is a rename, so the three-way merge carries this project's edits to its new
        # place; as a deletion of a file the project edited it would not apply. diff-tree, unlike `git diff`, reads
        # none of the user's diff settings (diff.renames, diff.noprefix, an external diff).
        patch = subprocess.run(
            ["git", "diff-tree", "-p", "-M", "--binary", old_tree, new_tree],
            cwd=PROJECT,
            capture_output=True,
            check=True,
        ).stdout
        applied = subprocess.run(["git", "apply", "--3way", "--index"], cwd=PROJECT, input=patch, capture_output=True)
    conflicts = git("diff", "--name-only", "--diff-filter=U").split()
    if applied.returncode != 0 and not conflicts:
        problems = [
            line.removeprefix("error: ") for line in applied.stderr.decode().splitlines() if line.startswith("error:")
        ]
        raise UpdateError(f"the template changes do not apply: {'; '.join(problems)}")
    RECORD.write_text(json.dumps({**record, "commit": new}, indent=2) + "\n")
    git("add", str(RECORD.relative_to(PROJECT)))
    if conflicts:
        report_moved_modules()
        report_cli_edits()
        sys.exit(
            f"error: template changes {record['commit'][:12]}..{new[:12]} conflict with this project's edits in "
            f"{', '.join(conflicts)}: resolve the marked lines, `git add` the files, then commit"
        )
    print(f"merged template changes {record['commit'][:12]}..{new[:12]}; review with `git diff --cached`, then commit")
    report_moved_modules()


def report_moved_modules() -> None:
    """Print each value in the project's YAML files that names a module the template moved, with its new name.

    The merge has changed the template's own configs; the project's own are listed, not rewritten behind the user's
    back. Prints nothing in a project from before the move, which has no table.
    """
    table = PROJECT / MOVED_TABLE
    if not table.is_file():
        return
    new_path = runpy.run_path(str(table))["new_path"]
    found, files = 0, set()
    # Tracked and new files, each once: git lists a conflicted file several times.
    listed = git("ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "*.yaml", "*.yml")
    for relative in dict.fromkeys(listed.split("\0")):
        if not relative or not (PROJECT / relative).is_file():
            continue
        try:
            documents = list(yaml.compose_all((PROJECT / relative).read_text(), Loader=yaml.SafeLoader))
        except yaml.MarkedYAMLError as error:
            print(f"{relative}:{error.problem_mark.line + 1}: not checked, not valid YAML: {error.problem}")
            continue
        except (yaml.YAMLError, UnicodeDecodeError):
            print(f"{relative}: not checked, not valid YAML")
            continue
        for node in (value for document in documents for value in string_values(document)):
            if DOTTED_NAME.fullmatch(node.value) and (moved := new_path(node.value)) is not None:
                print(f"{relative}:{node.start_mark.line + 1}: {node.value} -> {moved}")
                found, files = found + 1, files | {relative}
    if found:
        print(
            f"{found} value(s) in {len(files)} YAML file(s) name modules the template moved ({MOVED_TABLE.as_posix()}):"
            " change them as shown"
        )
    else:
        print("no YAML file names a module the template moved")


def report_cli_edits() -> None:
    """Print each of the user's edits to the old cli.py, where the update left it in conflict with the new one, and
    where that edit goes now.

    Git keeps the three versions of a conflicted file: the template's old cli.py (stage 1), the user's (2) and the
    template's new one (3). Prints nothing unless cli.py is in conflict and the old one is the long one.
    """
    if not git("ls-files", "--unmerged", "--", CLI):
        return
    old, yours = git("show", f":1:{CLI}"), git("show", f":2:{CLI}")
    if "class TemplateCLI(" not in old:
        return
    old_lines, your_lines = old.splitlines(), yours.splitlines()
    places = cli_places(old)
    edits = difflib.SequenceMatcher(None, old_lines, your_lines, autojunk=False).get_opcodes()
    edits = [edit for edit in edits if edit[0] != "equal"]
    for _, old_start, old_end, start, end in edits:
        if old_start < old_end:  # changed or deleted lines: where the first of them was
            place = places[old_start]
        else:  # added lines: what holds both of their neighbours
            place = common_place(places[old_start - 1] if old_start else None, places[min(old_start, len(places) - 1)])
        changed = [line.strip() for line in your_lines[start:end] if line.strip()]
        shown = changed[0] if changed else f"(deleted) {old_lines[old_start].strip()}"
        more = f" (+{len(changed) - 1} lines)" if len(changed) > 1 else ""
        print(f"HEAD:{CLI}:{start + 1}: {shown}{more} -> {new_place(place)}")
    print(
        f"{len(edits)} edit(s) of your {CLI} to make again: cli.py now holds only your choices and its machinery is in "
        f"trainrig/cli/; take the template's version (`git checkout --theirs {CLI}`), then make each edit where shown"
    )


def cli_places(text: str) -> list[str | None]:
    """For each line of the old cli.py, the name of what holds it (CLI_MOVES' keys and what lies below them), or None
    for the file's own lines (its docstring, imports, blank lines between definitions)."""
    places: list[str | None] = [None] * len(text.splitlines())

    def mark(node: ast.AST, name: str) -> None:
        places[node.lineno - 1 : node.end_lineno] = [name] * (node.end_lineno - node.lineno + 1)

    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            mark(node, node.name)
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            mark(node, node.targets[0].id)
        for method in node.body if isinstance(node, ast.ClassDef) else []:
            if isinstance(method, ast.FunctionDef):
                mark(method, f"{node.name}.{method.name}")
                for keyword in (n for n in ast.walk(method) if isinstance(n, ast.keyword) and n.arg):
                    if f"{node.name}.{method.name}.{keyword.arg}" in CLI_MOVES:
                        mark(keyword, f"{node.name}.{method.name}.{keyword.arg}")
    return places


def common_place(before: str | None, after: str | None) -> str | None:
    """What holds both places: TemplateCLI for two of its methods, None for two top-level definitions."""
    if before is None or after is None:
        return None
    return ".".join(os.path.commonprefix([before.split("."), after.split(".")])) or None


def new_place(place: str | None) -> str:
    """Where an edit at `place` of the old cli.py goes now."""
    if place is None:
        return CLI
    key = max((name for name in CLI_MOVES if place == name or place.startswith(f"{name}.")), key=len, default=None)
    if key is None:
        return CLI
    name, file = CLI_MOVES[key]
    return f"{name or '.'.join(place.split('.')[:2])} in {file}"


def string_values(node: yaml.Node | None):
    """The scalar values under a composed YAML node, in document order; mapping keys are no values."""
    if isinstance(node, yaml.ScalarNode):
        yield node
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            yield from string_values(item)
    elif isinstance(node, yaml.MappingNode):
        for _, value in node.value:
            yield from string_values(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--to", help="template tag, branch or commit to update to (default: its newest commit)")
    parser.add_argument("--template", help="the template's git URL or path (default: the recorded one)")
    args = parser.parse_args()
    try:
        update(args.template or json.loads(RECORD.read_text())["template"], args.to)
    except (UpdateError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(getattr(error, "exit_status", 1))


if __name__ == "__main__":
    main()
