"""Build cookiecutter's template directory from the repository's own files, at generation time.

hooks/pre_prompt.py runs this in the temporary copy of the repository that cookiecutter (2.4 or
newer) makes before it looks for the template directory, so the repository holds one copy of the
code and `{{cookiecutter.project_slug}}/` never enters git. By hand, to look at what a generation
starts from:

    python -m templating.build            # write {{cookiecutter.project_slug}}/ (git-ignored) from the root
    python -m templating.build --export DIR   # copy what a clone holds to DIR, to generate from it

Cookiecutter copies the whole folder it generates from before the hook runs, an in-tree `.venv/`
(gigabytes with torch) and `logs/` included; `--export` gives it only the repository's files.

The copy keeps every example, part and marker; the post-generation hook (hooks/post_gen_project.py)
trims it to the answers with templating.parts.
"""

import fnmatch
import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE_DIR_NAME = "{{cookiecutter.project_slug}}"
# Stands in for the template directory so that a cookiecutter older than 2.4, which skips
# hooks/pre_prompt.py, still finds one and runs hooks/pre_gen_project.py, which names the problem.
OLD_COOKIECUTTER_DIR_NAME = "{{cookiecutter.project_slug}}-needs-cookiecutter-2.4"
# Cookiecutter's own files: they make the repository a template and are not part of a project.
MACHINERY = ("cookiecutter.json", "hooks/", f"{TEMPLATE_DIR_NAME}/", f"{OLD_COOKIECUTTER_DIR_NAME}/")


def project_files(root: Path = ROOT) -> list[str]:
    """The root's files that git tracks or would track (new, not ignored), without cookiecutter's machinery."""
    listed = _git_files(root)
    if listed is None:
        listed = _files_not_ignored(root)
    return sorted(path for path in listed if path and not path.startswith(MACHINERY) and (root / path).is_file())


def _git_files(root: Path) -> list[str] | None:
    """Git's view when root is the top of a work tree: a clone (cookiecutter's git URLs) or a copy of one.

    None when git is missing or root is no work tree (an unpacked archive, a copied folder).
    """
    try:
        top = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"], cwd=root, capture_output=True, check=True, text=True
        )
        if Path(top.stdout.strip()).resolve() != root.resolve():
            return None
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=root,
            capture_output=True,
            check=True,
            text=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return listed.stdout.split("\0")


def _files_not_ignored(root: Path) -> list[str]:
    """Every file under root but .git/ and what the root .gitignore names (its patterns here: no `!`, no `**`)."""
    ignore = [".git/"] + [
        line.strip()
        for line in (root / ".gitignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    found = []
    for folder, subfolders, files in os.walk(root):
        relative = Path(folder).relative_to(root)
        subfolders[:] = sorted(name for name in subfolders if not _ignored(relative / name, True, ignore))
        found += [(relative / name).as_posix() for name in files if not _ignored(relative / name, False, ignore)]
    return found


def _ignored(path: Path, is_dir: bool, patterns: list[str]) -> bool:
    for pattern in patterns:
        if pattern.endswith("/"):
            if not is_dir:
                continue
            pattern = pattern[:-1]
        if pattern.startswith("/") or "/" in pattern:
            if fnmatch.fnmatchcase(path.as_posix(), pattern.lstrip("/")):
                return True
        elif fnmatch.fnmatchcase(path.name, pattern):
            return True
    return False


def export(destination: Path, root: Path = ROOT) -> Path:
    """Copy what a clone of root holds (its files and cookiecutter's machinery, no built directory) to destination."""
    for path in _git_files(root) or _files_not_ignored(root):
        if path and not path.startswith(f"{TEMPLATE_DIR_NAME}/") and (root / path).is_file():
            (destination / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / path, destination / path)
    return destination


def build(root: Path = ROOT) -> Path:
    """Write root/{{cookiecutter.project_slug}}/ from the root's project files; return it."""
    template_dir = root / TEMPLATE_DIR_NAME
    staging = template_dir.with_name(TEMPLATE_DIR_NAME + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    for path in project_files(root):
        target = staging / path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / path, target)
    shutil.rmtree(template_dir, ignore_errors=True)
    staging.rename(template_dir)
    return template_dir


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="Build the template directory, or export the repository's files.")
    parser.add_argument("--export", type=Path, metavar="DIR", help="copy what a clone holds to DIR instead")
    destination = parser.parse_args().export
    written = export(destination) if destination else build()
    print(f"wrote {sum(1 for path in written.rglob('*') if path.is_file())} files to {written}")
