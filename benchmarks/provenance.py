"""Which code a benchmark's figures come from, recorded with them."""

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def git_commit() -> str:
    """`$COMMIT` where set (a checkout copied without its history, as to the GPU machine); otherwise the checked-out
    commit, marked when the working tree differs from it; "unknown" without either."""
    if os.environ.get("COMMIT"):
        return os.environ["COMMIT"]

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)

    try:
        head, status = git("rev-parse", "HEAD"), git("status", "--porcelain")
    except OSError:  # no git installed
        return "unknown"
    if head.returncode != 0:
        return "unknown"
    return head.stdout.strip() + (" (with uncommitted changes)" if status.stdout.strip() else "")
