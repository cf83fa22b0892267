"""Build the template directory before cookiecutter looks for it: the repository commits one copy of the code.

Cookiecutter 2.4 or newer runs this in a temporary copy of the repository (a local path copied as
it is, a git URL cloned first), before it prompts and before it looks for the template directory.
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path.cwd()))
from templating.build import OLD_COOKIECUTTER_DIR_NAME, build  # noqa: E402

shutil.rmtree(OLD_COOKIECUTTER_DIR_NAME, ignore_errors=True)
template_dir = build(Path.cwd())

# The template version the project comes from, for .template/update.py; none from a plain folder.
head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True)
(template_dir / ".template").mkdir(exist_ok=True)
(template_dir / ".template" / "source.json").write_text(
    json.dumps({"commit": head.stdout.strip() if head.returncode == 0 else None})
)
