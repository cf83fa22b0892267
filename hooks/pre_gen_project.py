"""Stop with one clear line on a cookiecutter too old to run hooks/pre_prompt.py, which builds the template."""

import sys

import cookiecutter

version = tuple(int(part) for part in cookiecutter.__version__.split(".")[:2] if part.isdigit())
if version < (2, 4):
    sys.exit(
        f"error: this template needs cookiecutter 2.4 or newer (found {cookiecutter.__version__}): "
        "pip install 'cookiecutter>=2.4'"
    )
