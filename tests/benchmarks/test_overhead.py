"""benchmarks/overhead.py stopped by SIGTERM, as `timeout` stops it at the end of a GPU loan: its temporary folder,
which holds every template run's checkpoints and logs (tens of GB after a while), goes with it."""

import os
import signal
import subprocess
import sys
import time

from tests.helpers import ROOT

START_TIMEOUT_S = 180


def test_sigterm_during_a_run_deletes_the_temporary_folder(tmp_path):
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    command = [sys.executable, "benchmarks/overhead.py", "--quick", "--examples", "mlp"]
    env = {**os.environ, "TMPDIR": str(temporary), "OMP_NUM_THREADS": "1"}
    benchmark = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not list(temporary.glob("*/output/*")) and benchmark.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        (folder,) = [path for path in temporary.iterdir() if (path / "output").is_dir()]
        benchmark.send_signal(signal.SIGTERM)
        output = benchmark.communicate(timeout=60)[0].decode()
    finally:
        benchmark.kill()
    assert benchmark.returncode != 0, output[-3000:]
    assert not folder.exists(), f"left behind: {sorted(path.name for path in folder.iterdir())}\n{output[-3000:]}"
