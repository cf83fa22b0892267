"""Generated PyTorchJobs for the tests: the generator, the CRD's schema, and pods run as local processes with the
environment the training operator gives them."""

import contextlib
import functools
import io
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jsonschema
import yaml

from tests.helpers.runs import EXAMPLE_CONFIGS, LAUNCHER_VARIABLES, ROOT, read_metrics, small_run_args
from trainrig.kubernetes.jobs import main

PROCESS_TIMEOUT_S = 180
PYTORCHJOB_CRD = ROOT / "tests" / "kubernetes" / "schemas" / "kubeflow.org_pytorchjobs.yaml"
GENERATOR = [sys.executable, "-m", "trainrig.kubernetes.jobs"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def clean_env() -> dict[str, str]:
    """This machine's environment with the venv's `python` and `torchrun` first on PATH, one thread per process."""
    env = {key: value for key, value in os.environ.items() if not LAUNCHER_VARIABLES.fullmatch(key)}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["OMP_NUM_THREADS"] = "1"
    return env


def run_generator(*args: str, output: Path | None = None) -> subprocess.CompletedProcess:
    """`python -m trainrig.kubernetes.jobs ARGS` run in this process (as a process it starts in seconds, importing
    Lightning for the strategy flag; here Lightning is imported already), its exit status and output as a process's."""
    argv = list(args) if output is None else ["--output", str(output), *args]
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.chdir(ROOT), contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            main(argv)
            status = 0
        except SystemExit as exit_info:
            status = exit_info.code
    return subprocess.CompletedProcess([*GENERATOR, *argv], status, stdout.getvalue(), stderr.getvalue())


def generate(*args: str, output: Path | None = None) -> subprocess.CompletedProcess:
    return run_generator("--kind", "PyTorchJob", *args, output=output)


def assert_refused_in_one_line(result: subprocess.CompletedProcess, expected: str, job_file: Path) -> None:
    """The generator said `expected` in one line, exit status 2, and wrote no job file."""
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
    assert expected in result.stderr
    assert not job_file.exists()


def generated_manifest(tmp_path: Path, *args: str) -> tuple[dict, str]:
    job_file = tmp_path / "job.yaml"
    result = generate(*args, output=job_file)
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(job_file.read_text()), result.stdout


def overrides_without_config(log_dir: Path, shapes_root: Path) -> list[str]:
    """conftest's shrinking overrides; the generator adds `--config` itself."""
    args = small_run_args(EXAMPLE_CONFIGS[-1], log_dir, shapes_root)
    config_at = args.index("--config")
    return args[:config_at] + args[config_at + 2 :]


def operator_env(manifest: dict, replica_type: str, index: int, master_port: int) -> dict[str, str]:
    """The environment of the pod `<name>-<replica_type>-<index>` of this manifest: its container's own variables and
    what the operator adds."""
    spec = manifest["spec"]
    pods = sum(replica["replicas"] for replica in spec["pytorchReplicaSpecs"].values())
    (container,) = spec["pytorchReplicaSpecs"][replica_type]["template"]["spec"]["containers"]
    env = {variable["name"]: variable["value"] for variable in container.get("env", [])}
    env |= {"PYTHONUNBUFFERED": "1", "PET_NPROC_PER_NODE": spec["nprocPerNode"]}
    if "elasticPolicy" in spec:
        # No master: the rendezvous is on worker-0's agent, at the port the operator gives every pod.
        policy = spec["elasticPolicy"]
        return {
            **env,
            "PET_RDZV_ENDPOINT": f"127.0.0.1:{master_port}",
            "PET_RDZV_BACKEND": policy["rdzvBackend"],
            "PET_NNODES": f"{policy['minReplicas']}:{policy['maxReplicas']}",
            "PET_MAX_RESTARTS": str(policy["maxRestarts"]),
        }
    rank = index if replica_type == "Master" else index + 1
    return {
        **env,
        "MASTER_ADDR": "127.0.0.1",
        "PET_MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(master_port),
        "PET_MASTER_PORT": str(master_port),
        "WORLD_SIZE": str(pods * int(spec["nprocPerNode"])),
        "RANK": str(rank),
        "PET_NODE_RANK": str(rank),
        "PET_NNODES": str(pods),
    }


@functools.cache
def crd_validator(crd_file: Path, version: str) -> jsonschema.protocols.Validator:
    """The CRD's OpenAPI schema, with undeclared fields rejected as `kubectl apply` (strict field validation) does."""
    crd = yaml.load(crd_file.read_text(), Loader=yaml.CSafeLoader)  # libyaml: the schemas are ~1 MB
    (served,) = [served for served in crd["spec"]["versions"] if served["name"] == version]
    schema = served["schema"]["openAPIV3Schema"]
    _reject_undeclared_fields(schema)
    return jsonschema.Draft7Validator(schema)


def _reject_undeclared_fields(node) -> None:
    if isinstance(node, list):
        for item in node:
            _reject_undeclared_fields(item)
    elif isinstance(node, dict):
        declares_fields = node.get("type") == "object" and isinstance(node.get("properties"), dict)
        if (
            declares_fields
            and "additionalProperties" not in node
            and not node.get("x-kubernetes-preserve-unknown-fields")
        ):
            node["additionalProperties"] = False
        for value in node.values():
            _reject_undeclared_fields(value)


def schema_errors(manifest: dict, crd_file: Path = PYTORCHJOB_CRD, version: str = "v1") -> list[str]:
    return [
        f"{'.'.join(map(str, error.absolute_path))}: {error.message}"
        for error in crd_validator(crd_file, version).iter_errors(manifest)
    ]


def run_together(commands: list[tuple[list[str], dict[str, str]]]) -> list[str]:
    """Start every process at once (they rendezvous) and return each one's output.

    A process that fails leaves its peers waiting for it forever, so the first failure stops them all.
    """
    logs = [tempfile.TemporaryFile("w+") for _ in commands]
    processes = [
        subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
        for (argv, env), log in zip(commands, logs)
    ]
    deadline = time.monotonic() + PROCESS_TIMEOUT_S
    try:
        while any(process.poll() is None for process in processes):
            failed = any(process.returncode not in (None, 0) for process in processes)
            if failed or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    outputs = []
    for log in logs:
        log.seek(0)
        outputs.append(log.read())
        log.close()
    for process, output in zip(processes, outputs):
        assert process.returncode == 0, output[-3000:]
    return outputs


def assert_one_run_of_world_size(log_dir: Path, outputs: list[str], world_size: int) -> None:
    """Every global rank joined one process group, and rank 0 alone wrote one run's logs and checkpoints."""
    members = sorted(re.findall(r"GLOBAL_RANK: (\d+), MEMBER: \d+/(\d+)", "\n".join(outputs)))
    assert members == [(str(rank), str(world_size)) for rank in range(world_size)]
    (run_dir,) = [path.parent for path in log_dir.rglob("metrics.csv")]
    assert run_dir.name == "version_0"
    checkpoints = sorted(path.name for path in (run_dir / "checkpoints").iterdir())
    assert len(checkpoints) == 2 and checkpoints[-1] == "last.ckpt" and checkpoints[0].startswith("best-")
    assert any(row.get("val/loss") for row in read_metrics(log_dir))


def pod_command(manifest: dict, replica_type: str) -> list[str]:
    (container,) = manifest["spec"]["pytorchReplicaSpecs"][replica_type]["template"]["spec"]["containers"]
    return container["command"]


def pods_of(manifest: dict) -> list[tuple[list[str], dict[str, str]]]:
    """Command and environment of every pod of the manifest, the way the operator starts them."""
    port = free_port()
    replicas = manifest["spec"]["pytorchReplicaSpecs"]
    pods = [(kind, index) for kind, replica in replicas.items() for index in range(replica["replicas"])]
    return [
        (pod_command(manifest, kind), {**clean_env(), **operator_env(manifest, kind, index, port)})
        for kind, index in pods
    ]


def run_pods(manifest: dict) -> list[str]:
    """One local process per pod of the manifest, each with its container command and the operator's variables."""
    return run_together(pods_of(manifest))


def exit_status(returncode: int) -> int:
    """The container exit code Kubernetes reports: 128 + n for a process ended by signal n."""
    return 128 - returncode if returncode < 0 else returncode


def has_checkpoint(log_dir: Path) -> bool:
    return any(log_dir.rglob("last.ckpt"))


def run_job_like_the_operator(
    manifest: dict, kill: tuple[int, callable], max_restarts: int, launch: callable = None
) -> dict[str, int]:
    """Run the pods, SIGKILL pod `kill[0]` once `kill[1]()` holds, and restart pods as `restartPolicy: ExitCode` does.

    The operator recreates a pod that exits 128-255 and fails the job when one exits 1-127; so does this,
    until every pod has exited 0. `launch(pod, log)` starts pod number `pod` with its output to `log` (default: a
    local process with the operator's variables). Returns how often each pod's exit status was seen.
    """
    victim, kill_now = kill
    pods = pods_of(manifest)
    log = tempfile.TemporaryFile("w+")

    def start(pod: int) -> subprocess.Popen:
        if launch is not None:
            return launch(pod, log)
        argv, env = pods[pod]
        return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)

    processes = [start(pod) for pod in range(len(pods))]
    done, killed, restarts, statuses = set(), False, 0, {}
    deadline = time.monotonic() + 2 * PROCESS_TIMEOUT_S
    try:
        while len(done) < len(pods) and time.monotonic() < deadline:
            if not killed and kill_now():
                processes[victim].send_signal(signal.SIGKILL)
                killed = True
            for pod, process in enumerate(processes):
                if pod in done or process.poll() is None:
                    continue
                status = exit_status(process.returncode)
                statuses[status] = statuses.get(status, 0) + 1
                if status == 0:
                    done.add(pod)
                    continue
                log.seek(0)
                assert 128 <= status <= 255, (
                    f"pod {pod} exited {status}: the operator would fail the job\n{log.read()[-4000:]}"
                )
                restarts += 1
                assert restarts <= max_restarts, f"more than {max_restarts} restarts\n{log.read()[-4000:]}"
                processes[pod] = start(pod)
            time.sleep(0.1)
        log.seek(0)
        assert killed and len(done) == len(pods), (
            f"killed={killed}, finished pods {sorted(done)} of {len(pods)}\n{log.read()[-4000:]}"
        )
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
        log.close()
    return statuses
