"""Cluster jobs of `--kind PyTorchJob`: the manifest, its pods' command run as local processes, torchrun, bad input.

Pods are stood in for by processes on this machine that get the variables the Kubeflow training
operator (v1.7+, pkg/controller.v1/pytorch/envvar.go and elastic.go) injects, with the master's
address 127.0.0.1. Manifests are checked against the operator's own CRD schema (tests/kubernetes/schemas).
"""

import copy
import functools
import shlex
import signal
from pathlib import Path

import pytest
import yaml

from tests.helpers.run_dirs import assert_same_weights, final_weights
from tests.helpers.runs import EXAMPLE_CONFIGS, run_cli, small_run_args
from tests.kubernetes.pytorchjobs import (
    assert_one_run_of_world_size,
    assert_refused_in_one_line,
    clean_env,
    free_port,
    generate,
    generated_manifest,
    has_checkpoint,
    overrides_without_config,
    pod_command,
    run_job_like_the_operator,
    run_pods,
    run_together,
    schema_errors,
)
from tests.kubernetes.trainjobs import generated_documents


def test_manifest_has_the_structure_a_pytorchjob_requires(tmp_path):
    manifest, stdout = generated_manifest(
        tmp_path,
        "--name",
        "shapes",
        "--image",
        "registry.example.com/template:0.1",
        "--workers",
        "3",
        "--config",
        f"configs/{EXAMPLE_CONFIGS[0]}",
        "--gpus-per-pod",
        "2",
        "--cpu",
        "8",
        "--memory",
        "32Gi",
        "--pvc",
        "results:/workspace/logs",
        "--pvc",
        "datasets:/data/datasets",
        "--",
        "--trainer.max_epochs",
        "20",
    )
    assert manifest["apiVersion"] == "kubeflow.org/v1"
    assert manifest["kind"] == "PyTorchJob"
    assert manifest["metadata"] == {"name": "shapes"}
    spec = manifest["spec"]
    assert spec["nprocPerNode"] == "2"
    replicas = spec["pytorchReplicaSpecs"]
    assert set(replicas) == {"Master", "Worker"}
    assert replicas["Master"]["replicas"] == 1 and replicas["Worker"]["replicas"] == 3
    assert spec["runPolicy"] == {"backoffLimit": 3}
    for replica in replicas.values():
        assert replica["restartPolicy"] == "ExitCode"
        pod = replica["template"]["spec"]
        (container,) = pod["containers"]
        assert container["name"] == "pytorch"
        assert container["image"] == "registry.example.com/template:0.1"
        assert container["workingDir"] == "/workspace"
        assert all(isinstance(part, str) for part in container["command"])
        expected_resources = {"nvidia.com/gpu": 2, "cpu": "8", "memory": "32Gi"}
        assert container["resources"] == {"requests": expected_resources, "limits": expected_resources}
        claims = {
            volume["name"]: volume["persistentVolumeClaim"]["claimName"]
            for volume in pod["volumes"]
            if "persistentVolumeClaim" in volume
        }
        mounts = {claims.get(mount["name"], mount["name"]): mount["mountPath"] for mount in container["volumeMounts"]}
        assert mounts == {"dshm": "/dev/shm", "results": "/workspace/logs", "datasets": "/data/datasets"}

    command = pod_command(manifest, "Master")
    assert command == pod_command(manifest, "Worker")
    assert command[:5] == ["torchrun", "--nnodes", "4", "--nproc_per_node", "2"]
    fit = " ".join(command[5:])
    assert fit.startswith(f"cli.py fit --config configs/{EXAMPLE_CONFIGS[0]} ")
    assert (
        "--trainer.strategy lightning.pytorch.strategies.DDPStrategy --trainer.strategy.init_args.timeout 0:05:00"
        in fit
    )
    assert "--trainer.accelerator gpu --trainer.devices 2 --trainer.num_nodes 4" in fit
    assert fit.endswith("--trainer.max_epochs 20 --ckpt_path last") and "KubeflowEnvironment" not in fit
    assert schema_errors(manifest) == []

    (runai,) = [line for line in stdout.splitlines() if line.startswith("runai ")]
    assert runai.startswith("runai training pytorch submit shapes -i registry.example.com/template:0.1 --workers 3 ")
    assert (
        "--existing-pvc claimname=results,path=/workspace/logs --existing-pvc claimname=datasets,path=/data/datasets"
        in runai
    )
    assert runai.endswith(f"--command -- {shlex.join(command)}")


def test_manifest_without_output_prints_plain_yaml_for_kubectl():
    result = generate(
        "--name", "example", "--image", "template:0.1", "--workers", "1", "--config", f"configs/{EXAMPLE_CONFIGS[-1]}"
    )
    assert result.returncode == 0, result.stderr
    assert "&" not in result.stdout and "*id" not in result.stdout  # no YAML anchors or aliases
    manifest = yaml.safe_load(result.stdout)
    (container,) = manifest["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    assert "resources" not in container
    assert "runai training pytorch submit example -i template:0.1 --workers 1 " in result.stderr


@pytest.mark.parametrize(
    ("args", "warned"),
    [
        ([], True),
        (["--pvc", "results:/workspace/logs"], False),
        (["--pvc", "results:/workspace"], False),
        (["--pvc", "results:/workspace/logs", "--", "--trainer.logger.init_args.save_dir=/runs"], True),
        (["--pvc", "runs:/runs", "--", "--trainer.logger.init_args.save_dir", "/runs/shapes"], False),
        (["--restart-policy", "Never"], False),
    ],
)
def test_a_job_whose_checkpoints_are_on_no_claim_is_warned_it_cannot_resume(args, warned):
    result = generate(*BASE, *args)
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == warned
    if warned:
        assert "where checkpoints are written: a restarted pod will train from step 0" in warnings[0]


def test_pods_run_the_manifest_command_as_one_ddp_job(tmp_path, shapes_root):
    """One process per pod: the operator's RANK and WORLD_SIZE reach Lightning through KubeflowEnvironment."""
    log_dir = tmp_path / "logs"
    manifest, _ = generated_manifest(
        tmp_path,
        "--name",
        "example",
        "--image",
        "template:0.1",
        "--workers",
        "1",
        "--config",
        f"configs/{EXAMPLE_CONFIGS[-1]}",
        "--",
        *overrides_without_config(log_dir, shapes_root),
    )
    command = pod_command(manifest, "Master")
    assert command[:2] == ["python", "cli.py"]
    assert "--trainer.num_nodes 2" in " ".join(command) and "KubeflowEnvironment" in " ".join(command)
    outputs = run_pods(manifest)
    assert_one_run_of_world_size(log_dir, outputs, world_size=2)


@pytest.mark.slow  # CI budget: 26 s
def test_pods_with_several_processes_run_torchrun_from_the_operator_variables(tmp_path, shapes_root):
    """Two pods of two processes: torchrun takes node rank and master from PET_*, Lightning detects torchrun."""
    log_dir = tmp_path / "logs"
    manifest, _ = generated_manifest(
        tmp_path,
        "--name",
        "example",
        "--image",
        "template:0.1",
        "--workers",
        "1",
        "--nproc-per-node",
        "2",
        "--config",
        f"configs/{EXAMPLE_CONFIGS[-1]}",
        "--",
        *overrides_without_config(log_dir, shapes_root),
    )
    assert pod_command(manifest, "Master")[0] == "torchrun"
    outputs = run_pods(manifest)
    assert_one_run_of_world_size(log_dir, outputs, world_size=4)


def test_torchrun_with_two_processes_trains(tmp_path, shapes_root):
    log_dir = tmp_path / "logs"
    command = [
        "torchrun",
        "--nproc_per_node",
        "2",
        "--master_port",
        str(free_port()),
        "cli.py",
        "fit",
        *small_run_args(EXAMPLE_CONFIGS[-1], log_dir, shapes_root),
        "--trainer.strategy",
        "ddp",
        "--trainer.accelerator",
        "cpu",
        "--trainer.devices",
        "2",
    ]
    (output,) = run_together([(command, clean_env())])
    assert_one_run_of_world_size(log_dir, [output], world_size=2)


JOB_VARIANTS = {
    "cpu": ["--workers", "2", "--cpu", "4", "--memory", "16Gi"],
    "one-gpu-per-pod": ["--workers", "3", "--gpus-per-pod", "1", "--pvc", "results:/workspace/logs"],
    "torchrun-per-pod": [
        "--workers",
        "1",
        "--gpus-per-pod",
        "4",
        "--restart-policy",
        "OnFailure",
        "--backoff-limit",
        "10",
    ],
    "elastic": ["--elastic", "2:4", "--max-restarts", "5", "--pvc", "results:/workspace/logs"],
    "elastic-gpus": ["--elastic", "1:3", "--gpus-per-pod", "2"],
    "exit-code-never": ["--workers", "1", "--restart-policy", "Never", "--backoff-limit", "0"],
}


@pytest.mark.parametrize("variant", JOB_VARIANTS)
def test_every_kind_of_job_is_a_valid_pytorchjob_that_resumes(tmp_path, variant):
    args = JOB_VARIANTS[variant]
    manifest, _ = generated_manifest(
        tmp_path,
        "--name",
        "shapes",
        "--image",
        "template:0.1",
        "--config",
        f"configs/{EXAMPLE_CONFIGS[0]}",
        *args,
        "--",
        *(["--trainer.strategy.init_args.timeout", "0:02:30"] if variant == "elastic" else []),
        "--trainer.max_epochs",
        "3",
    )
    assert schema_errors(manifest) == []
    spec = manifest["spec"]
    elastic = "--elastic" in args
    assert set(spec["pytorchReplicaSpecs"]) == ({"Worker"} if elastic else {"Master", "Worker"})
    expected_policy = (
        args[args.index("--restart-policy") + 1]
        if "--restart-policy" in args
        else ("OnFailure" if elastic else "ExitCode")
    )
    assert {replica["restartPolicy"] for replica in spec["pytorchReplicaSpecs"].values()} == {expected_policy}
    assert spec["runPolicy"]["backoffLimit"] == (
        int(args[args.index("--backoff-limit") + 1]) if "--backoff-limit" in args else 3
    )
    command = pod_command(manifest, "Worker")
    assert command[-4:] == ["--trainer.max_epochs", "3", "--ckpt_path", "last"]
    timeouts = [command[at + 1] for at, part in enumerate(command) if part == "--trainer.strategy.init_args.timeout"]
    assert timeouts[-1] == ("0:02:30" if variant == "elastic" else "0:05:00"), "an override after `--` wins"
    if elastic:
        low, high = args[args.index("--elastic") + 1].split(":")
        restarts = int(args[args.index("--max-restarts") + 1]) if "--max-restarts" in args else 3
        assert spec["elasticPolicy"] == {
            "rdzvBackend": "c10d",
            "minReplicas": int(low),
            "maxReplicas": int(high),
            "maxRestarts": restarts,
        }
        assert spec["pytorchReplicaSpecs"]["Worker"]["replicas"] == int(high)
        assert command[:9] == [
            "torchrun",
            "--nnodes",
            f"{low}:{high}",
            "--nproc_per_node",
            spec["nprocPerNode"],
            "--rdzv_backend",
            "c10d",
            "--max_restarts",
            str(restarts),
        ]
        assert command[command.index("--trainer.strategy") + 1] == "trainrig.kubernetes.elastic.ElasticDDPStrategy"
        assert "--trainer.num_nodes" not in command
    else:
        assert "elasticPolicy" not in spec


def valid_manifest(tmp_path: Path) -> dict:
    manifest, _ = generated_manifest(
        tmp_path,
        *JOB_VARIANTS["elastic"],
        "--name",
        "shapes",
        "--image",
        "template:0.1",
        "--config",
        f"configs/{EXAMPLE_CONFIGS[0]}",
    )
    assert schema_errors(manifest) == []
    return manifest


def worker_container(manifest: dict) -> dict:
    return manifest["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize(
    ("break_it", "expected"),
    [
        (
            lambda job: job["spec"]["pytorchReplicaSpecs"]["Worker"].update(replicas="4"),
            "spec.pytorchReplicaSpecs.Worker.replicas: '4' is not of type 'integer'",
        ),
        (
            lambda job: job["spec"]["elasticPolicy"].update(minReplica=2),
            "spec.elasticPolicy: Additional properties are not allowed ('minReplica' was unexpected)",
        ),
        (lambda job: worker_container(job)["command"].append(3), "is not of type 'string'"),
        (lambda job: worker_container(job).pop("name"), "'name' is a required property"),
        (
            lambda job: worker_container(job).update(resources={"limits": {"memory": "16 GB"}}),
            "spec.pytorchReplicaSpecs.Worker.template.spec.containers.0.resources.limits.memory",
        ),
        (lambda job: job["spec"].pop("pytorchReplicaSpecs"), "'pytorchReplicaSpecs' is a required property"),
    ],
    ids=[
        "replicas-as-string",
        "misspelt-field",
        "non-string-argument",
        "container-without-name",
        "bad-quantity",
        "no-replicas",
    ],
)
def test_schema_rejects_a_broken_manifest(tmp_path, break_it, expected):
    manifest = copy.deepcopy(valid_manifest(tmp_path))
    break_it(manifest)
    errors = schema_errors(manifest)
    assert errors and any(expected in error for error in errors), errors


def test_pod_commands_parse_with_the_projects_cli(tmp_path, capsys):
    """cli.py accepts what the generator writes: the DDPStrategy class with its timeout (or the one given after `--`),
    the elastic one, `--ckpt_path last`."""
    for variant in ("cpu", "elastic"):
        manifest, _ = generated_manifest(
            tmp_path,
            *JOB_VARIANTS[variant],
            "--name",
            "shapes",
            "--image",
            "template:0.1",
            "--config",
            f"configs/{EXAMPLE_CONFIGS[-1]}",
            *(["--", "--trainer.strategy.init_args.timeout", "0:02:30"] if variant == "elastic" else []),
        )
        command = pod_command(manifest, "Worker")
        with pytest.raises(SystemExit) as exit_info:
            run_cli("fit", [*command[command.index("fit") + 1 :], "--print_config"])
        assert exit_info.value.code in (None, 0)
        config = yaml.safe_load(capsys.readouterr().out)
        strategy = config["trainer"]["strategy"]
        expected_class = (
            "trainrig.kubernetes.elastic.ElasticDDPStrategy"
            if variant == "elastic"
            else "lightning.pytorch.strategies.DDPStrategy"
        )
        assert strategy["class_path"] == expected_class
        assert strategy["init_args"]["timeout"] == ("0:02:30" if variant == "elastic" else "0:05:00")
        assert config["ckpt_path"] == "last"


def test_elastic_pods_rendezvous_and_train_with_the_node_count_torchrun_admitted(tmp_path, shapes_root):
    """Two worker pods of `--elastic 1:2`: torchrun's c10d rendezvous on worker-0, Lightning's node count from it."""
    log_dir = tmp_path / "logs"
    manifest, _ = generated_manifest(
        tmp_path,
        "--name",
        "example",
        "--image",
        "template:0.1",
        "--elastic",
        "1:2",
        "--config",
        f"configs/{EXAMPLE_CONFIGS[-1]}",
        "--",
        *overrides_without_config(log_dir, shapes_root),
    )
    assert schema_errors(manifest) == []
    outputs = run_pods(manifest)
    assert_one_run_of_world_size(log_dir, outputs, world_size=2)


@pytest.mark.slow  # CI budget: 35 s; the pods on hosts restarted stay
def test_job_restarted_like_the_operator_after_a_pod_is_killed_ends_with_the_uninterrupted_weights(
    tmp_path, shapes_root
):
    """Kill the worker pod's process once the first checkpoint exists; restart pods as ExitCode does; same final
    weights."""
    runs = {}
    for run in ("uninterrupted", "killed"):
        log_dir = tmp_path / run / "logs"
        manifest, _ = generated_manifest(
            tmp_path,
            "--name",
            "example",
            "--image",
            "template:0.1",
            "--workers",
            "1",
            "--config",
            f"configs/{EXAMPLE_CONFIGS[-1]}",
            "--",
            *overrides_without_config(log_dir, shapes_root),
            "--trainer.max_epochs",
            "12",
            "--trainer.deterministic",
            "true",
        )
        if run == "uninterrupted":
            run_pods(manifest)
        else:
            statuses = run_job_like_the_operator(
                manifest,
                kill=(1, functools.partial(has_checkpoint, log_dir)),
                max_restarts=manifest["spec"]["runPolicy"]["backoffLimit"],
            )
            assert statuses.get(128 + signal.SIGKILL) == 1
        runs[run] = final_weights(log_dir)
    assert_same_weights(runs["killed"], runs["uninterrupted"])


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
        (
            [*BASE, "--accelerator", "cpu", "--gpus-per-pod", "1"],
            "--accelerator cpu trains on CPU only but --gpus-per-pod 1 requests GPUs",
        ),
        ([*BASE, "--accelerator", "gpu"], "--accelerator gpu needs --gpus-per-pod"),
        ([*BASE, "--gpus-per-pod", "4", "--nproc-per-node", "2"], "one process per GPU"),
        ([*BASE, "--accelerator", "tpu"], "invalid choice: 'tpu'"),
        (with_flag("--name", "My_Job"), "--name 'My_Job' must be lower-case"),
        (with_flag("--config", "configs/missing.yaml"), "must be an existing file"),
        ([*BASE, "--memory", "lots"], "not a Kubernetes quantity"),
        ([*BASE, "--pvc", "results"], "must be CLAIM:PATH"),
        ([*BASE, "--", "--trainer.devices=4"], "--trainer.devices is set from"),
        (
            [*BASE, "--", "--trainer.strategy", "single_device"],
            "--trainer.strategy 'single_device' cannot run in the pods: give ddp, fsdp2 or another",
        ),
        ([*BASE, "--", "--ckpt_path", "some.ckpt"], "--ckpt_path is set to `last` so that a restarted pod continues"),
        ([*BASE, "--elastic", "2:4"], "argument --elastic: not allowed with argument --workers"),
        (
            [*with_flag("--workers", None), "--elastic", "4:2"],
            "--elastic '4:2' must be MIN:MAX pods with 1 <= MIN <= MAX",
        ),
        ([*with_flag("--workers", None), "--elastic", "0:2"], "--elastic '0:2' must be MIN:MAX"),
        (
            [*with_flag("--workers", None), "--elastic", "2:4", "--restart-policy", "ExitCode"],
            "--elastic cannot use --restart-policy ExitCode",
        ),
        ([*BASE, "--max-restarts", "2"], "--max-restarts counts torchrun's restarts of an elastic job"),
        ([*BASE, "--backoff-limit", "-1"], "--backoff-limit must be 0 or more"),
        (
            [*BASE, "--", "--trainer.strategy.init_args.timeout", "0:00:00"],
            "--trainer.strategy.init_args.timeout must be a positive duration as H:MM:SS",
        ),
        ([*BASE, "--", "--trainer.strategy.init_args.timeout=5"], "must be a positive duration as H:MM:SS"),
    ],
)
def test_bad_input_gives_one_clear_line(tmp_path, args, expected):
    job_file = tmp_path / "job.yaml"
    assert_refused_in_one_line(generate(*args, output=job_file), expected, job_file)


def test_nodes_count_the_master_and_a_queue_labels_the_job(tmp_path):
    """`--nodes 3` is the master and 2 workers, the job `--workers 2` writes; `--queue` adds Kueue's label."""
    by_workers, _ = generated_documents(tmp_path, "--kind", "PyTorchJob", *BASE)
    by_nodes, _ = generated_documents(
        tmp_path, "--kind", "PyTorchJob", *with_flag("--workers", None), "--nodes", "3", "--queue", "team-a"
    )
    job = by_nodes["PyTorchJob"]
    assert job["metadata"] == {"name": "shapes", "labels": {"kueue.x-k8s.io/queue-name": "team-a"}}
    assert job["spec"] == by_workers["PyTorchJob"]["spec"]
    assert schema_errors(job) == []
