"""The generated TrainJob with `-- --trainer.strategy fsdp2`, its two pods on separate emulated hosts as Kubeflow
Trainer v2 runs them (see tests/kubernetes/mlp/test_trainjob_hosts.py): the parameters are sharded over the pods, and
both write their shards of every checkpoint into the claim they mount at the logs directory."""

import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.helpers.installed import installed_python, not_build_inputs
from tests.helpers.mlp.multi_host_runs import finished
from tests.helpers.ran import assert_ran_as
from tests.helpers.run_if import run_if
from tests.helpers.runs import ROOT, small_run_args
from tests.helpers.sharded_runs import shard_files, sharded_checkpoint
from tests.kubernetes.trainjobs import generated_documents, master_address, trainer_env
from trainrig.testing.hosts import EmulatedHosts

NAME = "mlp"
SHRINK = small_run_args("mlp.yaml", Path("logs"), Path("shapes"))[2:]  # the generator adds --config


@run_if(emulated_hosts=True)
def test_an_fsdp2_trainjob_shards_the_model_over_its_pods_on_separate_hosts(tmp_path):
    documents, _ = generated_documents(
        tmp_path,
        *("--name", NAME, "--image", "template:0.1", "--nodes", "2", "--config", "configs/mlp.yaml"),
        *("--restart-policy", "Never", "--", *SHRINK, "--trainer.strategy", "fsdp2"),
    )
    job = documents["TrainJob"]
    command = job["spec"]["trainer"]["command"]
    assert command[0] == "torchrun"
    with EmulatedHosts(2, subnet="198.18.42", aliases={master_address(job): 0}) as hosts:
        claim = hosts.root / "claim"
        claim.mkdir()
        logs, pods = [], []
        for node, host in enumerate(hosts):
            shutil.copytree(ROOT, host.workdir, ignore=not_build_inputs, dirs_exist_ok=True)  # the image's /workspace
            (host.workdir / "logs").symlink_to(claim, target_is_directory=True)
            logs.append(tempfile.TemporaryFile("w+"))
            pods.append(
                host.popen(
                    [installed_python(), "-m", "torch.distributed.run", *command[1:]],
                    env=host.environment(**trainer_env(job, node)),
                    stdout=logs[-1],
                    stderr=subprocess.STDOUT,
                    text=True,
                )
            )
        finished(pods)
        outputs = [log.seek(0) or log.read() for log in logs]
        assert [pod.returncode for pod in pods] == [0, 0], [output[-3000:] for output in outputs]
        assert "fsdp2: 2 sharding units over 2 process(es)" in outputs[0], outputs[0][-3000:]
        ran_as = dict(strategy="FSDP2Strategy", processes=2, nodes=2, environment="TorchElasticEnvironment")
        assert_ran_as(claim, **ran_as, data_parallel=2)
        assert shard_files(sharded_checkpoint(claim)) == [".metadata", "__0_0.distcp", "__1_0.distcp", "meta.pt"]
