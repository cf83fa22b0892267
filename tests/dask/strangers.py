"""A test helper the Dask workers import by class path: while the run trains, another process on this machine tries to
run code in the workers through the launcher's own cluster, as any local user could, once without the cluster's
credentials and once with them."""

import json
import subprocess
import sys
from pathlib import Path

from lightning.pytorch import Callback

# Each attempt connects a client to the scheduler and, once connected, has every worker touch its own marker file.
STRANGER = """
import json, sys
from pathlib import Path
from distributed import Client
from distributed.security import Security

scheduler, marker = sys.argv[1:]
attempts = {
    "plain tcp": (scheduler.replace("tls://", "tcp://", 1), None),
    "credentials of its own": (scheduler, Security.temporary()),
    "the cluster's credentials": (scheduler, Security(**json.loads(sys.stdin.read()))),
}
outcomes = {}
for index, (name, (address, security)) in enumerate(attempts.items()):
    try:
        with Client(address, security=security, timeout=30) as client:
            client.run(Path(f"{marker}-{index}").touch)
        outcomes[name] = "ran"
    except Exception as error:
        outcomes[name] = f"{type(error).__name__}: {error}"
print(json.dumps(outcomes))
"""
STRANGER_TIMEOUT_S = 120


class Strangers(Callback):
    """Before training, rank 0 starts the stranger (a fresh interpreter, outside the cluster) on its own scheduler,
    handing it the cluster's credentials only for the last attempt, and writes its outcomes and the scheduler's
    address to `report`; each attempt that ran code left `<marker>-<attempt number>`."""

    def __init__(self, report: str, marker: str):
        self.report = report
        self.marker = marker

    def on_train_start(self, trainer, pl_module) -> None:
        if trainer.global_rank != 0:
            return
        from distributed import get_worker

        worker = get_worker()
        credentials = {
            field: getattr(worker.security, field)
            for field in ("tls_ca_file", "tls_client_cert", "tls_client_key", "require_encryption")
        }
        scheduler = worker.scheduler.address
        stranger = subprocess.run(
            [sys.executable, "-c", STRANGER, scheduler, self.marker],
            input=json.dumps(credentials),
            capture_output=True,
            text=True,
            timeout=STRANGER_TIMEOUT_S,
        )
        outcomes = json.loads(stranger.stdout) if stranger.returncode == 0 else {"failed": stranger.stderr[-2000:]}
        Path(self.report).write_text(json.dumps({"scheduler": scheduler, "outcomes": outcomes}))
