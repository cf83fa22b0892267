"""Stop before anything is generated when the answers cannot make a working project."""

import json
import sys

answers = json.loads(r"""{{ cookiecutter | jsonify }}""")
sys.path.insert(0, answers["_repo_dir"])
from templating.parts import TemplateError, validate_answers  # noqa: E402  (the template repository's own)

try:
    validate_answers(answers)
except TemplateError as error:
    print(f"error: {error}", file=sys.stderr)
    sys.exit(1)
