"""What the project-wide tests need to know of the template machinery (tests/helpers/parts.py reads it)."""

DEVELOPMENT_ONLY = ["templating"]
