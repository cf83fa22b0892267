"""The staged MLP streamed from shards (tests/helpers/mlp/streamed_runs.py) by a torchrun job across two emulated hosts
(trainrig/testing/hosts.py), as tests/hosts/mlp/test_torchrun.py runs the map-style job: each host runs the
installed wheel in its own working directory with its own copy of the config, and the shards sit on a folder both
hosts see, as a shared file system holds them."""

import shutil
import subprocess

from tests.helpers.installed import installed_python
from tests.helpers.mlp.multi_host_runs import DDP_TIMEOUT, RENDEZVOUS_PORT, finished, torchrun
from tests.helpers.mlp.streamed_runs import assert_each_sample_once, assert_streamed, write_config, write_shards
from tests.helpers.ran import assert_ran_as
from tests.helpers.run_if import run_if
from tests.helpers.runs import ROOT
from trainrig.testing.hosts import EmulatedHosts

SUBNET = "198.18.43"  # this test's /24 of the benchmarking range


@run_if(emulated_hosts=True)
def test_torchrun_on_two_hosts_streams_shards_from_a_folder_both_see_each_sample_once_an_epoch(shapes_root):
    python = installed_python()
    with EmulatedHosts(2, subnet=SUBNET) as hosts:
        first = hosts[0]
        shared = hosts.root / "shared"
        shared.mkdir()
        config = write_config(shared / "streamed.yaml", shared / "shards", shapes_root)
        code, printed = write_shards(config)
        assert code == 0, printed[-3000:]
        processes = []
        for host in hosts:
            shutil.copy(config, host.workdir / "streamed.yaml")
            # Not in the wheel: the test's own callback, importable from the working directory.
            shutil.copy(ROOT / "tests" / "helpers" / "sample_record.py", host.workdir / "sample_record.py")
            hosts_the_store = ["--rdzv_conf", "is_host=1"] if host is first else []
            command = torchrun(
                python,
                *("--nnodes", "2", "--nproc_per_node", "1", "--rdzv_backend", "c10d", "--rdzv_id", "streamed"),
                *("--rdzv_endpoint", f"{first.address}:{RENDEZVOUS_PORT}", *hosts_the_store),
            )
            job = ["--config", "streamed.yaml", "--trainer.logger.init_args.save_dir", "logs"]
            job += ["--trainer.callbacks+=sample_record.RecordSamples"]
            job += [f"--trainer.callbacks.init_args.directory={shared / 'samples'}"]
            job += ["--trainer.strategy", "ddp", "--trainer.strategy.init_args.timeout", DDP_TIMEOUT]
            job += ["--trainer.accelerator", "cpu", "--trainer.devices", "1", "--trainer.num_nodes", "2"]
            output = dict(stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            processes.append(host.popen(command + job, **output))
        outputs = finished(processes)
        assert [process.returncode for process in processes] == [0, 0], [text[-3000:] for text in outputs]
        logs = first.workdir / "logs"
        assert_ran_as(logs, strategy="DDPStrategy", processes=2, nodes=2, environment="TorchElasticEnvironment")
        assert_streamed(logs, shared / "shards")
        for epoch in (0, 1):  # the hosts' folders go with them
            assert_each_sample_once(shared / "samples", epoch, ranks=2)
