"""What reaches a generated batch script stays data: the script runs under real bash with a stand-in `srun` on PATH
that records its arguments, and every hostile value arrives as one literal argument while its payload never runs."""

import json
import os
import stat
import subprocess
import sys

from tests.helpers.runs import ROOT
from trainrig.slurm import sbatch

PAYLOAD = "touch pwned"  # relative: it would create `pwned` in the folder the script runs in
# Shell syntax that would run PAYLOAD if bash read the value as code; none holds a control character.
HOSTILE = (
    f"$({PAYLOAD})",
    f"`{PAYLOAD}`",
    f"'; {PAYLOAD}; '",
    f'"; {PAYLOAD}; "',
    f"x # && {PAYLOAD}",
    f"\\'$({PAYLOAD})\\'",
    "${HOME} * ?",
)
CONFIG = f"conf $({PAYLOAD}) `{PAYLOAD}` ;{PAYLOAD};'\"#.yaml"  # a file name may hold all of these
LOG = "log-$(id)-`id`-;|&<>.out"  # no space, quote, backslash or '#': accepted, and a comment to bash
STAND_IN = """#!{python}
import json, os, sys
with open(os.environ["RECORD"], "a") as record:
    record.write(json.dumps([os.path.basename(sys.argv[0]), *sys.argv[1:]]) + "\\n")
"""


def test_hostile_values_reach_srun_as_literal_arguments_and_run_nothing(tmp_path, monkeypatch):
    (tmp_path / CONFIG).write_text("{}\n")
    monkeypatch.chdir(tmp_path)  # the config is given relative to the folder the script is generated in
    # An option cli.py fit takes any string for: the generator parses what follows `--` before it writes.
    passed_on = [word for value in HOSTILE for word in ("--trainer.default_root_dir", value)]
    request = ["--nodes", "1", "--config", CONFIG, "--job-name", "job", "--log", LOG]
    sbatch.main([*request, "--output", "job.sbatch", "--", *passed_on])
    script = (tmp_path / "job.sbatch").read_text()
    assert f"#SBATCH --output={LOG}\n" in script

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for command in ("srun", "scancel", "scontrol"):
        stand_in = bin_dir / command
        stand_in.write_text(STAND_IN.format(python=sys.executable))
        stand_in.chmod(stand_in.stat().st_mode | stat.S_IXUSR)
    record = tmp_path / "called.jsonl"
    environment = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "RECORD": str(record),
        "SLURM_JOB_ID": "4242",
        "SLURM_RESTART_COUNT": "1",  # a requeued run: `--ckpt_path last` follows the arguments
    }
    result = subprocess.run(["bash", "job.sbatch"], cwd=tmp_path, env=environment, capture_output=True, text=True)
    assert not (tmp_path / "pwned").exists() and not (ROOT / "pwned").exists()
    assert result.returncode == 0, result.stderr
    (called,) = [json.loads(line) for line in record.read_text().splitlines()]  # srun only, once
    assert called[:6] == ["srun", "python", "cli.py", "fit", "--config", CONFIG]
    assert called[-len(passed_on) - 2 :] == [*passed_on, "--ckpt_path", "last"]
