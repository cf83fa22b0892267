"""A LightningModule whose import fails, as one does when the package it needs is not installed."""

import a_package_nobody_installed  # noqa: F401
