"""fsdp2 across machines: torchrun on two emulated hosts (trainrig/testing/hosts.py, as tests/hosts/mlp/test_torchrun.py
runs DDP), each host's logs/ a claim on shared storage, where both ranks write their shards of every checkpoint.
The job ends with the shards, losses and weights of the same job as two processes on one host."""

import subprocess

import pytest
import torch

from tests.helpers.installed import installed_python
from tests.helpers.mlp.multi_host_runs import DDP_TIMEOUT, RENDEZVOUS_PORT, finished, job_args, losses, torchrun
from tests.helpers.ran import assert_ran_as
from tests.helpers.run_if import run_if
from tests.helpers.sharded_runs import shard_files, sharded_checkpoint
from trainrig.resume.sharded import consolidated
from trainrig.testing.hosts import EmulatedHosts, Host


def fsdp2_ranks(devices: int, nodes: int) -> list[str]:
    strategy = ["--trainer.strategy", "fsdp2", "--trainer.strategy.init_args.timeout", DDP_TIMEOUT]
    return [
        *strategy,
        "--trainer.accelerator",
        "cpu",
        "--trainer.devices",
        str(devices),
        "--trainer.num_nodes",
        str(nodes),
    ]


def on_claim(host: Host, claim) -> None:
    """`host`'s logs/ is `claim`, as a shared volume mounted there."""
    (host.workdir / "logs").unlink(missing_ok=True)
    (host.workdir / "logs").symlink_to(claim, target_is_directory=True)


@pytest.mark.slow  # CI budget: 65 s; fsdp2 on separate hosts stays in the default run through another launcher
@run_if(emulated_hosts=True)
def test_fsdp2_under_torchrun_on_two_hosts_matches_two_processes_on_one_host():
    python = installed_python()
    output = dict(stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with EmulatedHosts(2, subnet="198.18.41") as hosts:
        first = hosts[0]
        across = hosts.root / "claim-two-hosts"
        across.mkdir()
        processes = []
        for host in hosts:
            on_claim(host, across)
            # The first host's name resolves to loopback there, so torch cannot tell that the endpoint is its own.
            hosts_the_store = ["--rdzv_conf", "is_host=1"] if host is first else []
            command = torchrun(
                python,
                *("--nnodes", "2", "--nproc_per_node", "1", "--rdzv_backend", "c10d", "--rdzv_id", "mlp"),
                *("--rdzv_endpoint", f"{first.address}:{RENDEZVOUS_PORT}", *hosts_the_store),
            )
            processes.append(host.popen(command + job_args(host) + fsdp2_ranks(devices=1, nodes=2), **output))
        outputs = finished(processes)
        assert [process.returncode for process in processes] == [0, 0], [text[-3000:] for text in outputs]
        assert "fsdp2: 2 sharding units over 2 process(es)" in outputs[0], outputs[0][-3000:]
        ran_as = dict(strategy="FSDP2Strategy", processes=2, nodes=2, environment="TorchElasticEnvironment")
        assert_ran_as(across, **ran_as, data_parallel=2)

        one_host = hosts.root / "claim-one-host"
        one_host.mkdir()
        on_claim(first, one_host)
        command = torchrun(python, "--standalone", "--nproc_per_node", "2") + job_args(first)
        reference = first.popen(command + fsdp2_ranks(devices=2, nodes=1), **output)
        (reference_output,) = finished([reference])
        assert reference.returncode == 0, reference_output[-3000:]
        assert_ran_as(one_host, strategy="FSDP2Strategy", processes=2, nodes=1)

        assert shard_files(sharded_checkpoint(across)) == [".metadata", "__0_0.distcp", "__1_0.distcp", "meta.pt"]
        assert losses(across) == losses(one_host)
        weights = [consolidated(sharded_checkpoint(claim))["state_dict"] for claim in (across, one_host)]
    assert weights[0].keys() == weights[1].keys()
    for name, expected in weights[1].items():
        assert torch.equal(weights[0][name], expected), name
