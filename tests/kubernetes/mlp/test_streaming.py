"""The staged MLP streamed from shards (tests/helpers/mlp/streamed_runs.py) by a generated TrainJob whose pods run on
separate emulated hosts, as tests/kubernetes/mlp/test_trainjob_hosts.py runs the map-style job: each pod holds the
image's /workspace and runs the TrainJob's command with the variables Kubeflow Trainer v2 injects; the shards are on a
claim mounted in every pod at /workspace/data/shards, the logs on another at /workspace/logs."""

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.helpers.installed import installed_python, not_build_inputs
from tests.helpers.mlp.multi_host_runs import finished
from tests.helpers.mlp.streamed_runs import assert_each_sample_once, assert_streamed, write_config, write_shards
from tests.helpers.ran import assert_ran_as
from tests.helpers.run_if import run_if
from tests.helpers.runs import ROOT
from tests.kubernetes.trainjobs import generated_documents, master_address, trainer_env
from trainrig.testing.hosts import EmulatedHosts

SUBNET = "198.18.31"  # this test's /24 of the benchmarking range
NAME = "streamed"
SHARDS_MOUNT = Path("data/shards")  # relative to /workspace, where the pods run


@run_if(emulated_hosts=True)
@pytest.mark.slow  # CI budget: 27 s on 2 busy cores; the torchrun job across hosts streams in the default run
def test_trainjob_pods_stream_shards_from_a_claim_each_sample_once_an_epoch(tmp_path, shapes_root):
    record = ["--trainer.callbacks+=tests.helpers.sample_record.RecordSamples"]
    # The generator parses the flags after `--` as the pods will, so the config exists here too: on a shared volume,
    # by its absolute path; the shards' path in it is relative to /workspace, where each pod runs.
    streamed = write_config(tmp_path / "streamed.yaml", SHARDS_MOUNT, shapes_root)
    documents, _ = generated_documents(
        tmp_path,
        *("--name", NAME, "--image", "template:0.1", "--nodes", "2", "--config", "configs/mlp_streaming.yaml"),
        *("--pvc", "results:/workspace/logs", "--pvc", f"shards:/workspace/{SHARDS_MOUNT}"),
        *(
            "--",
            "--config",
            str(streamed),
            *record,
            f"--trainer.callbacks.init_args.directory={tmp_path / 'samples'}",
        ),
    )
    job = documents["TrainJob"]
    command = job["spec"]["trainer"]["command"]
    assert command[0] == "torchrun"
    with EmulatedHosts(2, subnet=SUBNET, aliases={master_address(job): 0}) as hosts:
        shards_claim, logs_claim = hosts.root / "claim-shards", hosts.root / "claim-logs"
        logs_claim.mkdir()
        code, printed = write_shards(write_config(hosts.root / "writer.yaml", shards_claim, shapes_root))
        assert code == 0, printed[-3000:]
        pods, logs = [], []
        for node, host in enumerate(hosts):
            shutil.copytree(ROOT, host.workdir, ignore=not_build_inputs, dirs_exist_ok=True)  # the image's /workspace
            (host.workdir / SHARDS_MOUNT).parent.mkdir(exist_ok=True)
            (host.workdir / SHARDS_MOUNT).symlink_to(shards_claim, target_is_directory=True)
            (host.workdir / "logs").symlink_to(logs_claim, target_is_directory=True)
            logs.append(tempfile.TemporaryFile("w+"))
            python = [installed_python(), "-m", "torch.distributed.run", *command[1:]]
            env = host.environment(**trainer_env(job, node))
            pods.append(host.popen(python, env=env, stdout=logs[-1], stderr=subprocess.STDOUT, text=True))
        finished(pods)
        outputs = [log.seek(0) or log.read() for log in logs]
        assert [pod.returncode for pod in pods] == [0, 0], [output[-3000:] for output in outputs]
        assert_ran_as(logs_claim, strategy="DDPStrategy", processes=2, nodes=2, environment="TorchElasticEnvironment")
        assert_streamed(logs_claim, shards_claim, configured=str(SHARDS_MOUNT))
    for epoch in (0, 1):
        assert_each_sample_once(tmp_path / "samples", epoch, ranks=2)
