"""Check the answers, then trim the full copy of the template to the chosen examples and parts.

Runs inside the generated project, whose own copy of templating/parts.py says what belongs where
(and is removed with the rest of the template machinery). A failure makes cookiecutter delete the
project, so bad answers leave nothing behind.
"""

import json
import os
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
