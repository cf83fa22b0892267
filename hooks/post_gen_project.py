"""Trim the full copy of the template to the chosen examples and parts (templating/parts.py says what belongs where)."""

import json
import sys
from pathlib import Path

answers = json.loads(r"""{{ cookiecutter | jsonify }}""")
sys.path.insert(0, answers["_repo_dir"])
from templating.parts import TemplateError, apply_answers  # noqa: E402  (the template repository's own)

try:
    apply_answers(Path.cwd(), answers)
except TemplateError as error:
    print(f"error: {error}", file=sys.stderr)
    sys.exit(1)
