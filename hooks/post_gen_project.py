"""Check the answers, then trim the full copy of the template to the chosen examples and parts.

Runs inside the generated project, whose own copy of templating/parts.py says what belongs where
(and is removed with the rest of the template machinery). A failure makes cookiecutter delete the
project, so bad answers leave nothing behind.
"""

import json
import sys
from pathlib import Path

answers = json.loads(r"""{{ cookiecutter | jsonify }}""")
sys.path.insert(0, str(Path.cwd()))
from templating.parts import TemplateError, apply_answers  # noqa: E402

try:
    apply_answers(Path.cwd(), answers)
except TemplateError as error:
    print(f"error: {error}", file=sys.stderr)
    sys.exit(1)
