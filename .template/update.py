"""Merge the template's later changes into this project, keeping your own edits.

    python .template/update.py                 # up to the template's newest commit
    python .template/update.py --to v2.0       # up to a tag, branch or commit
    python .template/update.py --template URL  # from elsewhere than the recorded source

.template/source.json records where the project came from: the template's git URL or path, its
commit, and the answers given. This regenerates the project with those answers at that commit and
at the new one, and applies the difference between the two to this git repository as a three-way
merge (`git apply --3way`): your edits stay, the template's land beside them, and a line both
changed becomes a conflict, marked in the file and listed, never silently overwritten. Nothing is
committed: review with `git diff --cached`, then commit. Needs cookiecutter 2.4 or newer (dev extra).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
RECORD = PROJECT / ".template" / "source.json"


class UpdateError(Exception):
    """Why the update cannot start; printed as one line."""


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
    project = Path(cookiecutter(str(template), no_input=True, extra_context=answers, output_dir=str(output_dir)))
    (project / ".template" / "source.json").unlink(missing_ok=True)
    return project


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
    git("rev-parse", "--git-dir")
    if git("status", "--porcelain"):
        raise UpdateError("the work tree has uncommitted changes: commit or stash them first")
    with tempfile.TemporaryDirectory(prefix="template-update-") as scratch_name:
        scratch = Path(scratch_name)
        clone = scratch / "template"
        git("clone", "-q", template.removeprefix("git+"), str(clone), cwd=scratch)
        new = git("rev-parse", f"{target or 'HEAD'}^{{commit}}", cwd=clone)
        if new == record["commit"]:
            print(f"already at template commit {new[:12]}")
            return
        old_tree = tree_of(generate(clone, record["commit"], record["answers"], scratch / "old"), scratch)
        new_tree = tree_of(generate(clone, new, record["answers"], scratch / "new"), scratch)
        patch = subprocess.run(
            ["git", "diff", "--binary", old_tree, new_tree], cwd=PROJECT, capture_output=True, check=True
        ).stdout
        applied = subprocess.run(["git", "apply", "--3way", "--index"], cwd=PROJECT, input=patch, capture_output=True)
    conflicts = git("diff", "--name-only", "--diff-filter=U").split()
    if applied.returncode != 0 and not conflicts:
        raise UpdateError(f"the template changes do not apply: {applied.stderr.decode().strip()}")
    RECORD.write_text(json.dumps({**record, "commit": new}, indent=2) + "\n")
    git("add", str(RECORD.relative_to(PROJECT)))
    if conflicts:
        sys.exit(
            f"error: template changes {record['commit'][:12]}..{new[:12]} conflict with this project's edits in "
            f"{', '.join(conflicts)}: resolve the marked lines, `git add` the files, then commit"
        )
    print(f"merged template changes {record['commit'][:12]}..{new[:12]}; review with `git diff --cached`, then commit")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--to", help="template tag, branch or commit to update to (default: its newest commit)")
    parser.add_argument("--template", help="the template's git URL or path (default: the recorded one)")
    args = parser.parse_args()
    try:
        update(args.template or json.loads(RECORD.read_text())["template"], args.to)
    except (UpdateError, FileNotFoundError) as error:
        sys.exit(f"error: {error}")


if __name__ == "__main__":
    main()
