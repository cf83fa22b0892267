"""The generated TrainJob's pods on separate emulated hosts, as Kubeflow Trainer v2 and JobSet run them.

Each pod is a host (trainrig/testing/hosts.py) holding the image's /workspace (a copy of the project) and the project's
installed wheel, and runs the TrainJob's command, `torchrun cli.py fit ...`, with the variables the trainer's torch
plugin injects (tests/kubernetes/trainjobs.py). The master is named as in the cluster, `<job>-node-0-0.<job>`, the
JobSet's headless-service name of node 0, which every host's hosts file resolves to node 0's address. A claim both pods
mount at the logs directory is a folder outside them.
"""

import functools
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
import torch

from tests.helpers.installed import installed_python, not_build_inputs
from tests.helpers.mlp.multi_host_runs import finished
from tests.helpers.padded_checkpoint import PADDED_CHECKPOINTS, assert_every_checkpoint_padded
from tests.helpers.run_dirs import RunDirectory, assert_same_run_directory, assert_same_weights, final_weights
from tests.helpers.run_if import run_if
from tests.helpers.runs import ROOT, small_run_args
from tests.kubernetes.trainjobs import generated_documents, master_address, run_like_jobset, trainer_env
from trainrig.testing.hosts import EmulatedHosts, Host

SUBNET = "198.18.29"  # this test's /24 of the benchmarking range
NAME = "mlp"
SHRINK = small_run_args("mlp.yaml", Path("logs"), Path("shapes"))[2:]  # the generator adds --config
SHRINK += ["--trainer.deterministic", "true"]
STEPS_PER_EPOCH = 8
# last.ckpt every 3 steps as well as at epoch ends, so a kill can land after a checkpoint in the middle of an epoch.
# On the command line: the generator checks the job's flags, config files included, where it runs.
CHECKPOINTS = [
    "--trainer.callbacks",
    json.dumps(
        [
            {
                "class_path": "trainrig.resume.checkpoint.ResumableCheckpoint",
                "init_args": {"every_n_train_steps": 3, "train_time_interval": None},
            },
            {
                "class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
                "init_args": {"monitor": "val/loss", "mode": "min", "save_top_k": 1, "filename": "best-{epoch}-{step}"},
            },
        ]
    ),
]


def generated(tmp_path: Path, *args: str) -> dict[str, dict]:
    documents, _ = generated_documents(
        tmp_path, "--name", NAME, "--image", "template:0.1", "--nodes", "2", "--config", "configs/mlp.yaml", *args
    )
    return documents


def pods_on(hosts: EmulatedHosts) -> None:
    """Each host holds the image's /workspace; the master's DNS name resolves on every one to node 0."""
    for host in hosts:
        shutil.copytree(ROOT, host.workdir, ignore=not_build_inputs, dirs_exist_ok=True)
        resolved = host.run(["getent", "hosts", f"{NAME}-node-0-0.{NAME}"])
        assert resolved.stdout.split()[0] == hosts[0].address, resolved


def mount_claim(hosts: EmulatedHosts, claim: Path) -> None:
    claim.mkdir()
    for host in hosts:
        (host.workdir / "logs").unlink(missing_ok=True)
        (host.workdir / "logs").symlink_to(claim)


def launch(job: dict, hosts: EmulatedHosts, node: int, log) -> subprocess.Popen:
    """Pod `node`: its host runs the TrainJob's command with the trainer's variables."""
    command = job["spec"]["trainer"]["command"]
    assert command[0] == "torchrun"
    host: Host = hosts[node]
    env = host.environment(**trainer_env(job, node))
    return host.popen(
        [installed_python(), "-m", "torch.distributed.run", *command[1:]],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )


def run_pods(job: dict, hosts: EmulatedHosts) -> str:
    logs = [tempfile.TemporaryFile("w+") for _ in hosts]
    processes = [launch(job, hosts, node, log) for node, log in enumerate(logs)]
    finished(processes)
    outputs = [log.seek(0) or log.read() for log in logs]
    assert [process.returncode for process in processes] == [0, 0], [output[-3000:] for output in outputs]
    return "\n".join(outputs)


@run_if(emulated_hosts=True)
@pytest.mark.slow  # CI budget: 27 s; the restarted pipeline TrainJob stays
def test_two_node_trainjob_on_separate_hosts_ends_with_the_weights_of_two_processes_on_one_host(tmp_path):
    """DDP over the 2 pods, rendezvous at the master's DNS name; the same run as 2 processes on one host (torchrun
    --standalone) ends with the same weights, bit for bit."""
    job = generated(tmp_path, "--restart-policy", "Never", "--", *SHRINK)["TrainJob"]
    assert job["spec"]["runtimeRef"]["name"] == "torch-distributed"
    assert master_address(job) == f"{NAME}-node-0-0.{NAME}"
    with EmulatedHosts(2, subnet=SUBNET, aliases={master_address(job): 0}) as hosts:
        pods_on(hosts)
        mount_claim(hosts, hosts.root / "claim")
        output = run_pods(job, hosts)
        assert "GLOBAL_RANK: 1, MEMBER: 2/2" in output
        two_nodes = final_weights(hosts.root / "claim")

        command = job["spec"]["trainer"]["command"]
        one_host = command[1:]
        at = one_host.index("--trainer.devices")
        one_host[at + 1] = "2"
        one_host[one_host.index("--trainer.num_nodes") + 1] = "1"
        mount_claim(hosts, hosts.root / "one-host")
        standalone = [installed_python(), "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
        reference = hosts[0].popen(
            [*standalone, *one_host], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        (reference_output,) = finished([reference])
        assert reference.returncode == 0, reference_output[-3000:]
        one_host_weights = final_weights(hosts.root / "one-host")
    assert_same_weights(two_nodes, one_host_weights)


def checkpoint_step(claim: Path, seen: list[int]) -> bool:
    """Whether last.ckpt exists; the step it was saved at is recorded."""
    checkpoints = list(claim.rglob("last.ckpt"))
    if checkpoints:
        seen.append(torch.load(checkpoints[0], map_location="cpu", weights_only=False)["global_step"])
    return bool(checkpoints)


@run_if(emulated_hosts=True)
def test_pipeline_trainjob_restarted_by_jobset_mid_epoch_ends_with_the_uninterrupted_run_directory(tmp_path):
    """The pipeline's 2 stages on the 2 pods (the run says so). Pod 1 is killed after the first mid-epoch checkpoint;
    as the written runtime's failurePolicy does, every pod is deleted and created again, and the job continues from
    the claim: it leaves exactly the uninterrupted job's run directory. Every checkpoint is of a real model's size
    (over 100 MB, padded; the callback comes from the pods' copy of the checkout), and each the restarted job leaves
    holds all of it."""
    pipeline = ["--trainer.strategy", "pipeline", "--trainer.strategy.init_args.schedule", "1F1B"]
    shrink = [*SHRINK, *CHECKPOINTS, PADDED_CHECKPOINTS]
    shrink += ["--trainer.limit_train_batches", str(STEPS_PER_EPOCH)]
    documents = generated(tmp_path, "--pvc", "results:/workspace/logs", "--", *shrink, *pipeline)
    job, runtime = documents["TrainJob"], documents["TrainingRuntime"]
    assert job["spec"]["runtimeRef"] == {"apiGroup": "trainer.kubeflow.org", "kind": "TrainingRuntime", "name": NAME}
    max_restarts = runtime["spec"]["template"]["spec"]["failurePolicy"]["maxRestarts"]
    runs = {}
    with EmulatedHosts(2, subnet=SUBNET, aliases={master_address(job): 0}) as hosts:
        pods_on(hosts)
        for run in ("uninterrupted", "restarted"):
            claim = hosts.root / f"claim-{run}"
            mount_claim(hosts, claim)
            if run == "uninterrupted":
                output = run_pods(job, hosts)
            else:
                steps_at_kill = []
                statuses, output = run_like_jobset(
                    2,
                    functools.partial(launch, job, hosts),
                    kill=(1, functools.partial(checkpoint_step, claim, steps_at_kill)),
                    max_restarts=max_restarts,
                    stop=lambda node: hosts[node].lose(),
                )
                assert statuses == [137], statuses
                assert steps_at_kill[-1] % STEPS_PER_EPOCH, f"killed at an epoch's end (step {steps_at_kill[-1]})"
                assert "Restoring states from the checkpoint path" in output
                assert_every_checkpoint_padded(claim)
            assert "pipeline: 2 stages on 2 processes, 1F1B" in output, output[-3000:]
            runs[run] = RunDirectory.only_one_under(claim)
        assert_same_run_directory(runs["restarted"], runs["uninterrupted"], "JobSet restart")
