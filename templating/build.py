"""Copy this repository's tracked files into the cookiecutter template directory, or check that they agree.

    python -m templating.build            # rewrite {{cookiecutter.project_slug}}/ from the root
    python -m templating.build --check    # exit 1 and list the differences when it is out of date

The template directory is generated, never edited by hand: change the root, then rebuild. The
copy keeps every example, part and marker; the post-generation hook (hooks/post_gen_project.py)
trims it to the answers with templating.parts.
"""

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE_DIR_NAME = "{{cookiecutter.project_slug}}"
TEMPLATE_DIR = ROOT / TEMPLATE_DIR_NAME
# Cookiecutter's own files: they make the repository a template and are not part of a project.
MACHINERY = ("cookiecutter.json", "hooks/", f"{TEMPLATE_DIR_NAME}/")


def project_files() -> list[str]:
    """The root's files that git tracks or would track (new, not ignored), without cookiecutter's machinery."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=ROOT, capture_output=True, check=True, text=True,
        ).stdout.split("\0")
    except (OSError, subprocess.CalledProcessError) as error:
        sys.exit(f"error: the template is built from the git work tree of {ROOT}, and git could not list it: {error}")
    return sorted(path for path in listed if path and not path.startswith(MACHINERY) and (ROOT / path).is_file())


def template_files() -> list[str]:
    if not TEMPLATE_DIR.is_dir():
        return []
    return sorted(str(path.relative_to(TEMPLATE_DIR)) for path in TEMPLATE_DIR.rglob("*") if path.is_file() and "__pycache__" not in path.parts)


def differences() -> list[str]:
    """What the template directory lacks, has in excess, or holds with other content or permissions."""
    source, copy = project_files(), template_files()
    found = [f"missing in the template: {path}" for path in sorted(set(source) - set(copy))]
    found += [f"not in the root: {TEMPLATE_DIR_NAME}/{path}" for path in sorted(set(copy) - set(source))]
    for path in sorted(set(source) & set(copy)):
        original, copied = ROOT / path, TEMPLATE_DIR / path
        if original.read_bytes() != copied.read_bytes():
            found.append(f"differs: {path}")
        elif original.stat().st_mode & 0o111 != copied.stat().st_mode & 0o111:
            found.append(f"executable bit differs: {path}")
    return found


def build() -> None:
    staging = TEMPLATE_DIR.with_name(TEMPLATE_DIR_NAME + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    for path in project_files():
        target = staging / path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, target)
    shutil.rmtree(TEMPLATE_DIR, ignore_errors=True)
    staging.rename(TEMPLATE_DIR)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when the template is out of date")
    if parser.parse_args().check:
        found = differences()
        if found:
            print("\n".join(found), file=sys.stderr)
            sys.exit(f"error: {TEMPLATE_DIR_NAME}/ is out of date with the root ({len(found)} files); run: python -m templating.build")
        print(f"{TEMPLATE_DIR_NAME}/ matches the root")
        return
    build()
    print(f"wrote {len(template_files())} files to {TEMPLATE_DIR_NAME}/")


if __name__ == "__main__":
    main()
