"""Cluster jobs of `--kind TrainJob` (the default): the TrainJob and the TrainingRuntime it runs on, checked against
Kubeflow Trainer v2's own CRD schemas (tests/kubernetes/schemas), the commands cli.py reads from them, the Run:ai
command's flags against Run:ai's reference, and the one-line refusals. The pods run on emulated hosts in an example's
tests/kubernetes/<example>/test_trainjob_hosts.py.
"""

import copy
import importlib.util
import shlex

import pytest

from tests.helpers.runs import EXAMPLE_CONFIGS, ROOT
from tests.kubernetes.pytorchjobs import assert_refused_in_one_line
from tests.kubernetes.trainjobs import generate, generated_documents, trainer_schema_errors
from trainrig.errors.moved import moved_path_error, new_path

BASE = ["--name", "shapes", "--image", "template:0.1", "--nodes", "3", "--config", f"configs/{EXAMPLE_CONFIGS[0]}"]


def test_trainjob_runs_torchrun_on_a_runtime_of_its_own_with_claims_and_exit_code_restarts(tmp_path):
    documents, stdout = generated_documents(
        tmp_path,
        *BASE,
        *("--gpus-per-pod", "2", "--cpu", "8", "--memory", "32Gi", "--queue", "team-a"),
        *("--pvc", "results:/workspace/logs", "--backoff-limit", "5"),
        *("--", "--trainer.max_epochs", "20"),
    )
    assert list(documents) == ["TrainingRuntime", "TrainJob"]
    for manifest in documents.values():
        assert manifest["apiVersion"] == "trainer.kubeflow.org/v1alpha1"
        assert trainer_schema_errors(manifest) == []
    job, runtime = documents["TrainJob"], documents["TrainingRuntime"]
    assert job["metadata"] == {"name": "shapes", "labels": {"kueue.x-k8s.io/queue-name": "team-a"}}
    assert job["spec"]["runtimeRef"] == {
        "apiGroup": "trainer.kubeflow.org",
        "kind": "TrainingRuntime",
        "name": "shapes",
    }
    trainer = job["spec"]["trainer"]
    assert (trainer["image"], trainer["numNodes"], trainer["numProcPerNode"]) == ("template:0.1", 3, 2)
    expected_resources = {"nvidia.com/gpu": 2, "cpu": "8", "memory": "32Gi"}
    assert trainer["resourcesPerNode"] == {"requests": expected_resources, "limits": expected_resources}
    assert "env" not in trainer, "the trainer injects PET_*; a TrainJob may not set them"
    command = trainer["command"]
    assert command[:4] == ["torchrun", "cli.py", "fit", "--config"], "torchrun reads sizes and ranks from PET_*"
    fit = shlex.join(command)
    assert (
        "--trainer.strategy lightning.pytorch.strategies.DDPStrategy --trainer.strategy.init_args.timeout 0:05:00"
        in fit
    )
    assert "--trainer.accelerator gpu --trainer.devices 2 --trainer.num_nodes 3 --trainer.max_epochs 20" in fit
    assert fit.endswith("--ckpt_path last")

    assert runtime["metadata"]["name"] == "shapes"
    assert runtime["spec"]["mlPolicy"] == {"numNodes": 3, "torch": {}}
    jobset = runtime["spec"]["template"]["spec"]
    assert jobset["failurePolicy"] == {
        "maxRestarts": 5,
        "rules": [{"name": "bug-or-bad-input", "action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]}],
    }
    (node,) = jobset["replicatedJobs"]
    assert node["name"] == "node"
    assert node["template"]["metadata"]["labels"] == {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
    job_spec = node["template"]["spec"]
    assert job_spec["backoffLimit"] == 0, "a failed pod fails its Job at once, and JobSet restarts every pod"
    (rule,) = job_spec["podFailurePolicy"]["rules"]
    assert rule["action"] == "FailJob" and rule["onExitCodes"]["values"] == list(range(1, 128))
    pod = job_spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    (container,) = pod["containers"]
    assert (container["name"], container["workingDir"]) == ("node", "/workspace")
    mounts = {mount["name"]: mount["mountPath"] for mount in container["volumeMounts"]}
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    assert mounts == {"dshm": "/dev/shm", "pvc-0": "/workspace/logs"}
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory"}
    assert volumes["pvc-0"]["persistentVolumeClaim"] == {"claimName": "results"}
    assert "TrainJob on TrainingRuntime shapes, 3 nodes x 2 process(es) = world size 6, up to 5 restarts" in stdout


@pytest.mark.parametrize(
    ("args", "runtime"),
    [
        (["--restart-policy", "Never"], "ClusterTrainingRuntime torch-distributed"),
        (["--restart-policy", "Never", "--pvc", "results:/workspace/logs"], "TrainingRuntime shapes"),
        (["--restart-policy", "OnFailure"], "TrainingRuntime shapes"),
        ([], "TrainingRuntime shapes"),
    ],
    ids=["stock-runtime", "claim-needs-own", "on-failure", "exit-code"],
)
def test_the_stock_runtime_serves_a_job_that_needs_no_pod_settings(tmp_path, args, runtime):
    documents, _ = generated_documents(tmp_path, *BASE, *args)
    kind, name = runtime.split()
    assert documents["TrainJob"]["spec"]["runtimeRef"] == {
        "apiGroup": "trainer.kubeflow.org",
        "kind": kind,
        "name": name,
    }
    assert ("TrainingRuntime" in documents) == (kind == "TrainingRuntime")
    for manifest in documents.values():
        assert trainer_schema_errors(manifest) == []
    if "--restart-policy" in args and args[args.index("--restart-policy") + 1] == "OnFailure":
        jobset = documents["TrainingRuntime"]["spec"]["template"]["spec"]
        assert jobset["failurePolicy"] == {"maxRestarts": 3}
        assert "podFailurePolicy" not in jobset["replicatedJobs"][0]["template"]["spec"]


def valid_documents(tmp_path) -> dict[str, dict]:
    documents, _ = generated_documents(tmp_path, *BASE, "--pvc", "results:/workspace/logs", "--queue", "team-a")
    return documents


@pytest.mark.parametrize(
    ("kind", "break_it", "expected"),
    [
        ("TrainJob", lambda job: job["spec"]["trainer"].update(numNodes="2"), "spec.trainer.numNodes: '2' is not of"),
        (
            "TrainJob",
            lambda job: job["spec"]["trainer"].update(nodes=2),
            "spec.trainer: Additional properties are not allowed ('nodes' was unexpected)",
        ),
        ("TrainJob", lambda job: job["spec"].pop("runtimeRef"), "'runtimeRef' is a required property"),
        (
            "TrainingRuntime",
            lambda runtime: runtime["spec"]["template"]["spec"]["failurePolicy"]["rules"][0].update(action="Restart"),
            "'Restart' is not one of",
        ),
        (
            "TrainingRuntime",
            lambda runtime: runtime["spec"]["template"]["spec"]["failurePolicy"].update(maxRestart=3),
            "Additional properties are not allowed ('maxRestart' was unexpected)",
        ),
    ],
    ids=["nodes-as-string", "misspelt-trainer-field", "no-runtime", "unknown-failure-action", "misspelt-jobset-field"],
)
def test_trainer_schemas_reject_a_broken_manifest(tmp_path, kind, break_it, expected):
    manifest = copy.deepcopy(valid_documents(tmp_path)[kind])
    break_it(manifest)
    errors = trainer_schema_errors(manifest)
    assert errors and any(expected in error for error in errors), errors


# Run:ai's reference for the command the tool prints, read 2026-11-25:
# https://docs.nvidia.com/run-ai/self-hosted/reference/cli/runai/training/runai-training-pytorch-submit (self-hosted
# v3.0, the default, with v2.24-v2.26; `runai pytorch submit` is its documented alias), and its Options list as
# run-ai/docs keeps it (docs/Researcher/cli-reference/new-cli/runai_pytorch_submit.md, commit 090b17d): every flag
# below is there with the value it takes. Each flag the tool may print:
RUNAI_SUBMIT = "runai training pytorch submit"
RUNAI_DOCUMENTED_FLAGS = {
    "-i": "image",
    "--workers": "int32: worker replicas besides the master",
    "--gpu-devices-request": "GPU devices per pod",
    "--cpu-core-request": "CPU cores requested",
    "--cpu-core-limit": "CPU cores limit",
    "--cpu-memory-request": "memory requested, a quantity",
    "--cpu-memory-limit": "memory limit, a quantity",
    "--working-dir": "container working directory",
    "--large-shm": "boolean: a large /dev/shm",
    "--existing-pvc": "claimname=NAME,path=PATH",
    "--command": "boolean: what follows `--` replaces the image's entry point",
}
RUNAI_BOOLEAN_FLAGS = ("--large-shm", "--command")


@pytest.mark.parametrize("kind", ["TrainJob", "PyTorchJob"])
def test_runai_command_names_only_flags_its_reference_documents(kind):
    args = [*BASE, "--kind", kind, "--gpus-per-pod", "1", "--cpu", "4", "--memory", "16Gi"]
    result = generate(*args, "--pvc", "results:/workspace/logs", "--pvc", "data:/data")
    assert result.returncode == 0, result.stderr
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("runai ")]
    words = shlex.split(line)
    assert shlex.join(words[:4]) == RUNAI_SUBMIT and words[4] == "shapes"
    separator = words.index("--")
    flags, at = {}, 5
    while at < separator:
        flag = words[at]
        assert flag in RUNAI_DOCUMENTED_FLAGS, f"{flag} is not in Run:ai's reference for {RUNAI_SUBMIT}"
        if flag in RUNAI_BOOLEAN_FLAGS:
            flags.setdefault(flag, []).append(None)
            at += 1
        else:
            flags.setdefault(flag, []).append(words[at + 1])
            at += 2
    assert flags == {
        "-i": ["template:0.1"],
        "--workers": ["2"],
        "--gpu-devices-request": ["1"],
        "--cpu-core-request": ["4"],
        "--cpu-core-limit": ["4"],
        "--cpu-memory-request": ["16Gi"],
        "--cpu-memory-limit": ["16Gi"],
        "--working-dir": ["/workspace"],
        "--large-shm": [None],
        "--existing-pvc": ["claimname=results,path=/workspace/logs", "claimname=data,path=/data"],
        "--command": [None],
    }
    # Run:ai sets the v1 operator's variables (master + workers), so its pods run the PyTorchJob's command.
    assert words[separator + 1 : separator + 3] == ["python", "cli.py"]
    assert "--trainer.num_nodes 3" in shlex.join(words[separator:])


def with_flag(flag: str, value: str | None) -> list[str]:
    args = list(BASE)
    if flag in args:
        at = args.index(flag)
        del args[at : at + 2]
    return args if value is None else [*args, flag, value]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            [*with_flag("--nodes", None), "--elastic", "2:4"],
            "--elastic needs --kind PyTorchJob: Kubeflow Trainer v2.2 removed ElasticPolicy",
        ),
        ([*with_flag("--nodes", None), "--workers", "2"], "a TrainJob has no master and workers: give --nodes 3"),
        (with_flag("--nodes", "0"), "--nodes must be at least 1, got 0"),
        ([*with_flag("--nodes", None), "--kind", "PyTorchJob", "--nodes", "1"], "--nodes must be at least 2"),
        ([*BASE, "--restart-policy", "Always"], "--restart-policy Always cannot apply to a TrainJob"),
        ([*BASE, "--max-restarts", "2"], "a TrainJob's restarts of all its pods are --backoff-limit"),
        ([*BASE, "--queue", "Team A"], "--queue 'Team A' is not a LocalQueue name"),
        ([*BASE, "--kind", "MPIJob"], "argument --kind: invalid choice: 'MPIJob'"),
        (with_flag("--name", "a" * 56), "pod names like '" + "a" * 56 + "-node-0-2' must fit in 63 characters"),
        ([*BASE, "--", "--trainer.num_nodes=2"], "--trainer.num_nodes is set from --nodes"),
        ([*BASE, "--", "--trainer.strategy", "auto"], "--trainer.strategy 'auto' cannot run in the pods"),
    ],
)
def test_bad_input_gives_one_clear_line(tmp_path, args, expected):
    job_file = tmp_path / "job.yaml"
    assert_refused_in_one_line(generate(*args, output=job_file), expected, job_file)


def test_the_old_command_names_the_one_that_replaced_it():
    """`trainrig.kubernetes.pytorchjob`, the module that wrote PyTorchJobs before TrainJobs, is gone: the moved-paths
    table names the one that replaced it (a config naming the old path gets that line), and docs/clusters.md gives the
    new command with the option for the same job."""
    old = "trainrig.kubernetes.pytorchjob"
    assert new_path(old) == "trainrig.kubernetes.jobs"
    assert moved_path_error(old).startswith(f"{old} has moved to trainrig.kubernetes.jobs:")
    assert importlib.util.find_spec(old) is None
    clusters = " ".join((ROOT / "docs" / "clusters.md").read_text().split())
    assert f"`python -m {old}`, is gone: `python -m trainrig.kubernetes.jobs --kind PyTorchJob`" in clusters
