"""Builds the cookiecutter template from this repository and trims generated projects to the chosen parts."""
