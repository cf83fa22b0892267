"""Cluster jobs: the PyTorchJob manifest, its pods' command run as local processes, torchrun, bad input.

Pods are stood in for by processes on this machine that get the variables the Kubeflow training
operator (v1.7+, pkg/controller.v1/pytorch/envvar.go) injects, with the master's address 127.0.0.1.
"""

import os
import re
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from conftest import EXAMPLE_CONFIGS, ROOT, read_metrics, small_run_args

PROCESS_TIMEOUT_S = 180
GENERATOR = [sys.executable, "-m", "cluster.pytorchjob"]
# Variables a parent launcher could leak into the children and that would change how they rank themselves.
LAUNCHER_VARIABLES = re.compile(r"(RANK|LOCAL_RANK|WORLD_SIZE|GROUP_RANK|MASTER_ADDR|MASTER_PORT|LOCAL_WORLD_SIZE|NODE_RANK|TORCHELASTIC_.*|PET_.*)")


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


def generate(*args: str, output: Path | None = None) -> subprocess.CompletedProcess:
    argv = [*GENERATOR, *args] if output is None else [*GENERATOR, "--output", str(output), *args]
    return subprocess.run(argv, cwd=ROOT, env=clean_env(), capture_output=True, text=True, timeout=60)


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
    """What the operator adds to the pod `<name>-<replica_type>-<index>` of this manifest."""
    spec = manifest["spec"]
    pods = sum(replica["replicas"] for replica in spec["pytorchReplicaSpecs"].values())
    rank = index if replica_type == "Master" else index + 1
    return {
        "PYTHONUNBUFFERED": "1",
        "MASTER_ADDR": "127.0.0.1",
        "PET_MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(master_port),
        "PET_MASTER_PORT": str(master_port),
        "WORLD_SIZE": str(pods * int(spec["nprocPerNode"])),
        "RANK": str(rank),
        "PET_NODE_RANK": str(rank),
        "PET_NNODES": str(pods),
        "PET_NPROC_PER_NODE": spec["nprocPerNode"],
    }


def run_together(commands: list[tuple[list[str], dict[str, str]]]) -> list[str]:
    """Start every process at once (they rendezvous) and return each one's output.

    A process that fails leaves its peers waiting for it forever, so the first failure stops them all.
    """
    logs = [tempfile.TemporaryFile("w+") for _ in commands]
    processes = [subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, text=True) for (argv, env), log in zip(commands, logs)]
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


def run_pods(manifest: dict) -> list[str]:
    """One local process per pod of the manifest, each with its container command and the operator's variables."""
    port = free_port()
    replicas = manifest["spec"]["pytorchReplicaSpecs"]
    pods = [(kind, index) for kind, replica in replicas.items() for index in range(replica["replicas"])]
    return run_together([(pod_command(manifest, kind), {**clean_env(), **operator_env(manifest, kind, index, port)}) for kind, index in pods])


def test_manifest_has_the_structure_a_pytorchjob_requires(tmp_path):
    manifest, stdout = generated_manifest(
        tmp_path,
        "--name", "shapes", "--image", "registry.example.com/template:0.1", "--workers", "3",
        "--config", f"configs/{EXAMPLE_CONFIGS[0]}", "--gpus-per-pod", "2", "--cpu", "8", "--memory", "32Gi",
        "--pvc", "results:/workspace/logs", "--pvc", "datasets:/data/datasets", "--", "--trainer.max_epochs", "20",
    )
    assert manifest["apiVersion"] == "kubeflow.org/v1"
    assert manifest["kind"] == "PyTorchJob"
    assert manifest["metadata"] == {"name": "shapes"}
    spec = manifest["spec"]
    assert spec["nprocPerNode"] == "2"
    replicas = spec["pytorchReplicaSpecs"]
    assert set(replicas) == {"Master", "Worker"}
    assert replicas["Master"]["replicas"] == 1 and replicas["Worker"]["replicas"] == 3
    for replica in replicas.values():
        assert replica["restartPolicy"] == "OnFailure"
        pod = replica["template"]["spec"]
        (container,) = pod["containers"]
        assert container["name"] == "pytorch"
        assert container["image"] == "registry.example.com/template:0.1"
        assert container["workingDir"] == "/workspace"
        assert all(isinstance(part, str) for part in container["command"])
        expected_resources = {"nvidia.com/gpu": 2, "cpu": "8", "memory": "32Gi"}
        assert container["resources"] == {"requests": expected_resources, "limits": expected_resources}
        claims = {volume["name"]: volume["persistentVolumeClaim"]["claimName"] for volume in pod["volumes"] if "persistentVolumeClaim" in volume}
        mounts = {claims.get(mount["name"], mount["name"]): mount["mountPath"] for mount in container["volumeMounts"]}
        assert mounts == {"dshm": "/dev/shm", "results": "/workspace/logs", "datasets": "/data/datasets"}

    command = pod_command(manifest, "Master")
    assert command == pod_command(manifest, "Worker")
    assert command[:5] == ["torchrun", "--nnodes", "4", "--nproc_per_node", "2"]
    fit = " ".join(command[5:])
    assert fit.startswith(f"cli.py fit --config configs/{EXAMPLE_CONFIGS[0]} ")
    assert "--trainer.strategy ddp --trainer.accelerator gpu --trainer.devices 2 --trainer.num_nodes 4" in fit
    assert fit.endswith("--trainer.max_epochs 20") and "KubeflowEnvironment" not in fit

    runai_v1, runai_v2 = [line for line in stdout.splitlines() if line.startswith("runai ")]
    assert runai_v1.startswith("runai submit-dist pytorch shapes --workers=3 -i registry.example.com/template:0.1 -g 2 ")
    assert runai_v2.startswith("runai distributed submit shapes --framework PyTorch -i registry.example.com/template:0.1 --workers 3 --gpu-devices-request 2 ")
    assert "--pvc-exists claimname=results,path=/workspace/logs --pvc-exists claimname=datasets,path=/data/datasets" in runai_v1
    assert "--existing-pvc claimname=results,path=/workspace/logs --existing-pvc claimname=datasets,path=/data/datasets" in runai_v2
    for runai in (runai_v1, runai_v2):
        assert runai.endswith(f"--command -- {shlex.join(command)}")


def test_manifest_without_output_prints_plain_yaml_for_kubectl():
    result = generate("--name", "example", "--image", "template:0.1", "--workers", "1", "--config", f"configs/{EXAMPLE_CONFIGS[-1]}")
    assert result.returncode == 0, result.stderr
    assert "&" not in result.stdout and "*id" not in result.stdout  # no YAML anchors or aliases
    manifest = yaml.safe_load(result.stdout)
    (container,) = manifest["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    assert "resources" not in container
    assert "runai submit-dist pytorch example --workers=1" in result.stderr


def test_pods_run_the_manifest_command_as_one_ddp_job(tmp_path, shapes_root):
    """One process per pod: the operator's RANK and WORLD_SIZE reach Lightning through KubeflowEnvironment."""
    log_dir = tmp_path / "logs"
    manifest, _ = generated_manifest(
        tmp_path, "--name", "example", "--image", "template:0.1", "--workers", "1", "--config", f"configs/{EXAMPLE_CONFIGS[-1]}",
        "--", *overrides_without_config(log_dir, shapes_root),
    )
    command = pod_command(manifest, "Master")
    assert command[:2] == ["python", "cli.py"]
    assert "--trainer.num_nodes 2" in " ".join(command) and "KubeflowEnvironment" in " ".join(command)
    outputs = run_pods(manifest)
    assert_one_run_of_world_size(log_dir, outputs, world_size=2)


def test_pods_with_several_processes_run_torchrun_from_the_operator_variables(tmp_path, shapes_root):
    """Two pods of two processes: torchrun takes node rank and master from PET_*, Lightning detects torchrun."""
    log_dir = tmp_path / "logs"
    manifest, _ = generated_manifest(
        tmp_path, "--name", "example", "--image", "template:0.1", "--workers", "1", "--nproc-per-node", "2",
        "--config", f"configs/{EXAMPLE_CONFIGS[-1]}", "--", *overrides_without_config(log_dir, shapes_root),
    )
    assert pod_command(manifest, "Master")[0] == "torchrun"
    outputs = run_pods(manifest)
    assert_one_run_of_world_size(log_dir, outputs, world_size=4)


def test_torchrun_with_two_processes_trains(tmp_path, shapes_root):
    log_dir = tmp_path / "logs"
    command = [
        "torchrun", "--nproc_per_node", "2", "--master_port", str(free_port()),
        "cli.py", "fit", *small_run_args(EXAMPLE_CONFIGS[-1], log_dir, shapes_root),
        "--trainer.strategy", "ddp", "--trainer.accelerator", "cpu", "--trainer.devices", "2",
    ]
    (output,) = run_together([(command, clean_env())])
    assert_one_run_of_world_size(log_dir, [output], world_size=2)


BASE = ["--name", "shapes", "--image", "template:0.1", "--workers", "2", "--config", f"configs/{EXAMPLE_CONFIGS[0]}"]


def with_flag(flag: str, value: str | None) -> list[str]:
    """BASE with `flag` set to `value`, or left out when `value` is None."""
    args = list(BASE)
    if flag in args:
        at = args.index(flag)
        del args[at : at + 2]
    return args if value is None else [*args, flag, value]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (with_flag("--workers", "0"), "--workers must be at least 1"),
        (with_flag("--workers", "-3"), "--workers must be at least 1"),
        (with_flag("--image", None), "required: --image"),
        (with_flag("--image", ""), "is not an image name"),
        (with_flag("--image", "  "), "is not an image name"),
        ([*BASE, "--accelerator", "cpu", "--gpus-per-pod", "1"], "--accelerator cpu trains on CPU only but --gpus-per-pod 1 requests GPUs"),
        ([*BASE, "--accelerator", "gpu"], "--accelerator gpu needs --gpus-per-pod"),
        ([*BASE, "--gpus-per-pod", "4", "--nproc-per-node", "2"], "one process per GPU"),
        ([*BASE, "--accelerator", "tpu"], "invalid choice: 'tpu'"),
        (with_flag("--name", "My_Job"), "--name 'My_Job' must be lower-case"),
        (with_flag("--config", "configs/missing.yaml"), "must be an existing file"),
        ([*BASE, "--memory", "lots"], "not a Kubernetes quantity"),
        ([*BASE, "--pvc", "results"], "must be CLAIM:PATH"),
        ([*BASE, "--", "--trainer.devices=4"], "--trainer.devices is set from"),
        ([*BASE, "--", "--trainer.strategy", "fsdp"], "--trainer.strategy is set from"),
    ],
)
def test_bad_input_gives_one_clear_line(tmp_path, args, expected):
    job_file = tmp_path / "job.yaml"
    result = generate(*args, output=job_file)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
    assert expected in result.stderr
    assert not job_file.exists()
