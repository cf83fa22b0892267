"""The generated PyTorchJob's pipeline pods on separate emulated hosts, restarted as the ExitCode policy does."""

import functools
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from tests.helpers.installed import installed_python, not_build_inputs
from tests.helpers.mlp.multi_host_runs import (
    RENDEZVOUS_PORT,
    finished,
)
from tests.helpers.run_dirs import assert_same_weights, final_weights
from tests.helpers.run_if import run_if
from tests.helpers.runs import ROOT, small_run_args
from trainrig.testing.hosts import EmulatedHosts


@run_if(emulated_hosts=True)
def test_pytorchjob_pipeline_pods_on_separate_hosts_resume_after_an_exit_code_restart(tmp_path):
    """The generated manifest's pods, pipeline stages on separate hosts, with the variables the training operator sets
    there (the master pod gets MASTER_ADDR=localhost, a worker the master's service name) and a claim both mount at
    the logs directory. Killed mid-run and restarted as `restartPolicy: ExitCode` does, the job ends with the
    uninterrupted job's weights."""
    from tests.kubernetes.pytorchjobs import (
        generated_manifest,
        has_checkpoint,
        operator_env,
        pod_command,
        run_job_like_the_operator,
    )

    shrink = small_run_args("mlp.yaml", Path("logs"), Path("shapes"))[2:]  # the generator adds --config
    shrink += ["--trainer.max_epochs", "3", "--trainer.limit_train_batches", "10", "--trainer.deterministic", "true"]
    job = ["--name", "mlp", "--image", "template:0.1", "--workers", "1", "--config", "configs/mlp.yaml"]
    pipeline = ["--trainer.strategy", "pipeline", "--trainer.strategy.init_args.schedule", "1F1B"]
    manifest, _ = generated_manifest(tmp_path, *job, "--", *shrink, *pipeline)
    python = installed_python()
    weights = {}
    with EmulatedHosts(2) as hosts:
        master, worker = hosts
        pods = ((master, "Master", "localhost"), (worker, "Worker", master.name))
        for host, _, _ in pods:
            shutil.copytree(ROOT, host.workdir, ignore=not_build_inputs, dirs_exist_ok=True)  # the image's /workspace

        def launch(pod: int, log) -> subprocess.Popen:
            host, kind, master_address = pods[pod]
            operator = operator_env(manifest, kind, 0, RENDEZVOUS_PORT)
            env = host.environment(**operator | {"MASTER_ADDR": master_address, "PET_MASTER_ADDR": master_address})
            command = pod_command(manifest, kind)
            assert command[:2] == ["python", "cli.py"]
            return host.popen([python, *command[1:]], env=env, stdout=log, stderr=subprocess.STDOUT, text=True)

        for run in ("uninterrupted", "killed"):
            claim = hosts.root / f"claim-{run}"  # a PersistentVolumeClaim: outside every pod, mounted at its logs/
            claim.mkdir()
            for host, _, _ in pods:
                (host.workdir / "logs").unlink(missing_ok=True)
                (host.workdir / "logs").symlink_to(claim)
            if run == "uninterrupted":
                logs = [tempfile.TemporaryFile("w+") for _ in pods]
                processes = [launch(pod, log) for pod, log in enumerate(logs)]
                finished(processes)
                outputs = [log.seek(0) or log.read() for log in logs]
                assert [process.returncode for process in processes] == [0, 0], [out[-3000:] for out in outputs]
            else:
                statuses = run_job_like_the_operator(
                    manifest,
                    kill=(1, functools.partial(has_checkpoint, claim)),
                    max_restarts=manifest["spec"]["runPolicy"]["backoffLimit"],
                    launch=launch,
                )
                assert statuses.get(128 + signal.SIGKILL) == 1, statuses
            weights[run] = final_weights(claim)
    assert_same_weights(weights["killed"], weights["uninterrupted"])
