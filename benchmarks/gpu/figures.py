"""Gathers what benchmarks/gpu/check.sh left in its output folder into one `figures.json`: the machine, each step's
exit status and seconds, every GPU test's outcome and time, each benchmark's own JSON and each profiled run's report
(Lightning's SimpleProfiler, as text).

    python -m benchmarks.gpu.figures OUTPUT_DIR

The commit is `$COMMIT` where the checkout travelled without its history (the GPU machine), else the checked-out one
(benchmarks/provenance.py).
"""

import datetime
import json
import subprocess
import sys
from pathlib import Path

import torch

from benchmarks.provenance import git_commit

BENCHMARKS = ("overhead", "gpu_defaults")


def machine() -> dict:
    cuda = torch.cuda.is_available()
    driver = None
    if cuda:
        query = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
        driver = subprocess.run(query, capture_output=True, text=True, check=False).stdout.strip() or None
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "commit": git_commit(),
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "driver": driver,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
    }


def steps(folder: Path) -> dict:
    rows = (line.split("\t") for line in (folder / "steps.tsv").read_text().splitlines() if line)
    return {name: {"exit": int(status), "seconds": int(seconds)} for name, status, seconds in rows}


def tests(report: Path) -> list[dict]:
    """Each test's outcome as benchmarks/gpu/live_report.py wrote it (a skip or failure with the first line why)."""
    if not report.is_file():
        return []
    cases = [json.loads(line) for line in report.read_text().splitlines() if line]
    for case in cases:
        if "why" in case:
            case["why"] = case["why"].strip().splitlines()[-1][:300] if case["outcome"] == "skipped" else case["why"]
    return cases


def main(folder: Path) -> None:
    figures = {"machine": machine(), "steps": steps(folder), "gpu_tests": tests(folder / "gpu_tests.jsonl")}
    figures["profiles"] = {path.stem: path.read_text() for path in sorted(folder.glob("fit-profile_*.txt"))}
    for name in BENCHMARKS:
        path = folder / f"{name}.json"
        figures[name] = json.loads(path.read_text()) if path.is_file() else None
    (folder / "figures.json").write_text(json.dumps(figures, indent=2) + "\n")
    outcomes = [case["outcome"] for case in figures["gpu_tests"]]
    print(f"figures.json: {', '.join(f'{outcomes.count(o)} {o}' for o in sorted(set(outcomes))) or 'no tests'}")


if __name__ == "__main__":
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_dir():
        print("usage: python -m benchmarks.gpu.figures OUTPUT_DIR (the folder benchmarks/gpu/check.sh wrote)")
        sys.exit(2)
    main(Path(sys.argv[1]))
