"""Check the answers, then trim the full copy of the template to the chosen examples and parts.

Runs inside the generated project, whose own copy of templating/parts.py says what belongs where
(and is removed with the rest of the template machinery). A failure makes cookiecutter delete the
project, so bad answers leave nothing behind.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

answers = json.loads(r"""{{ cookiecutter | jsonify }}""")
sys.path.insert(0, str(Path.cwd()))
from templating.parts import BadAnswer, TemplateError, apply_answers  # noqa: E402

# One line on stderr, exit 2 for a bad answer and 1 for a fault of the template itself. Cookiecutter then deletes the
# project, logs "Hook script failed (exit status: N)" with its own traceback to stdout and exits 1 whatever N is: no
# hook can change that (docs/template.md).
try:
    apply_answers(Path.cwd(), answers)
except TemplateError as error:
    print(f"error: {error}", file=sys.stderr)
    sys.exit(2 if isinstance(error, BadAnswer) else 1)

# Where the project came from, for .template/update.py (the commit is hooks/pre_prompt.py's).
record = Path(".template", "source.json")
template = answers["_template"]
# A relative template path is relative to where cookiecutter ran.
invoked_in = Path(os.environ.get("PWD", "/nonexistent"))
if (
    "://" not in template
    and not Path(template).is_absolute()
    and (invoked_in / template / "cookiecutter.json").is_file()
):
    template = str((invoked_in / template).resolve())
source = {
    "template": template,
    **json.loads(record.read_text()),
    "answers": {name: value for name, value in answers.items() if not name.startswith("_")},
}
record.write_text(json.dumps(source, indent=2) + "\n")

# The project as a git repository with its first commit: `.template/update.py` merges the template's later changes
# into it. Not where git is missing or has no identity to commit with (the project stays a plain folder, and
# `.template/update.py` says how to make the repository), nor in the projects update.py generates to compare.
FIRST_COMMIT = [
    ["git", "init", "-q"],
    ["git", "add", "-A"],
    # The user's commit hooks and signing are for their own commits; this one is the template's.
    ["git", "-c", "commit.gpgsign=false", "commit", "-q", "--no-verify", "-m", "Generated from the template"],
]
for command in FIRST_COMMIT if answers["_git_repository"] else []:
    try:
        result = subprocess.run(command, capture_output=True, text=True)
    except FileNotFoundError:
        result = subprocess.CompletedProcess(command, 1, "", "git is not installed")
    if result.returncode != 0:
        shutil.rmtree(".git", ignore_errors=True)
        reason = (result.stderr.strip().splitlines() or ["no reason given"])[-1]
        print(f"note: the project is no git repository ({reason}); `python .template/update.py` says how to make one")
        break
