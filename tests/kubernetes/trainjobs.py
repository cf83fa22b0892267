"""Generated TrainJobs for the tests: the generator, Trainer v2's CRD schemas, and the environment and restarts that
Kubeflow Trainer v2 and JobSet give the pods.

What the trainer gives a pod is read from kubeflow/trainer v2.3.0, pkg/runtime/framework/plugins/torch/torch.go:
PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK (the Job's completion index), PET_MASTER_ADDR =
`<trainjob>-node-0-0.<trainjob>` and PET_MASTER_PORT = 29500 (pkg/constants).
"""

import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from tests.helpers.runs import ROOT
from tests.kubernetes.pytorchjobs import PROCESS_TIMEOUT_S, exit_status, schema_errors
from tests.kubernetes.pytorchjobs import run_generator as generate

SCHEMAS = ROOT / "tests" / "kubernetes" / "schemas"
CRDS = {
    "TrainJob": SCHEMAS / "trainer.kubeflow.org_trainjobs.yaml",
    "TrainingRuntime": SCHEMAS / "trainer.kubeflow.org_trainingruntimes.yaml",
}
MASTER_PORT = 29500  # the trainer's ContainerTrainerPort
GRACE_PERIOD_S = 3  # SIGTERM, then SIGKILL: a pod's terminationGracePeriodSeconds, shortened


def generated_documents(tmp_path: Path, *args: str) -> tuple[dict[str, dict], str]:
    """The written manifests by kind (TrainJob, and TrainingRuntime when one is written) and the generator's
    output."""
    job_file = tmp_path / "job.yaml"
    result = generate(*args, output=job_file)
    assert result.returncode == 0, result.stderr
    documents = list(yaml.safe_load_all(job_file.read_text()))
    by_kind = {document["kind"]: document for document in documents}
    assert len(by_kind) == len(documents), "one document of each kind"
    return by_kind, result.stdout


def trainer_schema_errors(manifest: dict) -> list[str]:
    return schema_errors(manifest, CRDS[manifest["kind"]], "v1alpha1")


def master_address(trainjob: dict) -> str:
    name = trainjob["metadata"]["name"]
    return f"{name}-node-0-0.{name}"


def trainer_env(trainjob: dict, node: int, master: str | None = None) -> dict[str, str]:
    """What the trainer's torch plugin and the Job controller add to node `node`'s container (master: the address
    PET_MASTER_ADDR names; default the JobSet's DNS name of node 0)."""
    trainer = trainjob["spec"]["trainer"]
    env = {variable["name"]: variable["value"] for variable in trainer.get("env", [])}
    return env | {
        "PYTHONUNBUFFERED": "1",
        "PET_NNODES": str(trainer["numNodes"]),
        "PET_NPROC_PER_NODE": str(trainer["numProcPerNode"]),
        "PET_NODE_RANK": str(node),
        "JOB_COMPLETION_INDEX": str(node),
        "PET_MASTER_ADDR": master or master_address(trainjob),
        "PET_MASTER_PORT": str(MASTER_PORT),
    }


def run_like_jobset(
    nodes: int,
    launch: Callable[[int, object], subprocess.Popen],
    kill: tuple[int, Callable[[], bool]],
    max_restarts: int,
    stop: Callable[[int], None],
) -> tuple[list[int], str]:
    """Run the job's pods (`launch(node, log)`), kill pod `kill[0]` once `kill[1]()` holds, and restart as the
    runtime's JobSet failurePolicy does: a pod that fails with 128+n fails its Job (backoffLimit 0), and JobSet
    deletes every pod (SIGTERM, SIGKILL after the grace period: `stop(node)`) and creates them all again; an exit
    1-127 fails the job (podFailurePolicy). Returns the exit status that ended each failed attempt, and every pod's
    output."""
    victim, kill_now = kill
    log = tempfile.TemporaryFile("w+")
    attempt_statuses = []
    killed = False
    deadline = time.monotonic() + 3 * PROCESS_TIMEOUT_S
    pods = [launch(node, log) for node in range(nodes)]
    try:
        while time.monotonic() < deadline:
            if not killed and kill_now():
                stop(victim)  # the container is killed: every process in it, torchrun's workers too
                killed = True
            statuses = [None if pod.poll() is None else exit_status(pod.returncode) for pod in pods]
            if all(status == 0 for status in statuses):
                break
            failed = [status for status in statuses if status not in (None, 0)]
            if failed:
                log.seek(0)
                assert all(128 <= status <= 255 for status in failed), (
                    f"exit {failed}: the Job's podFailurePolicy would fail the TrainJob\n{log.read()[-4000:]}"
                )
                attempt_statuses.append(failed[0])
                assert len(attempt_statuses) <= max_restarts, f"more than {max_restarts} restarts\n{log.read()[-4000:]}"
                for pod in pods:
                    if pod.poll() is None:
                        pod.send_signal(signal.SIGTERM)
                for node, pod in enumerate(pods):
                    try:
                        pod.wait(timeout=GRACE_PERIOD_S)
                    except subprocess.TimeoutExpired:
                        stop(node)
                pods = [launch(node, log) for node in range(nodes)]
            time.sleep(0.1)
        log.seek(0)
        output = log.read()
        assert killed and all(pod.returncode == 0 for pod in pods), f"killed={killed}\n{output[-4000:]}"
        return attempt_statuses, output
    finally:
        for node, pod in enumerate(pods):
            if pod.poll() is None:
                stop(node)
        log.close()
