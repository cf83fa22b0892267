"""Test helpers, one module per concern; `ROOT` is the checkout the tests run from."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
