"""The batch-script generator on its own: what it refuses (one line, exit 2, no script written) and how it sizes
srun for each strategy. tests/slurm/mlp/test_jobs.py runs its scripts on a real cluster."""

import shlex
from dataclasses import dataclass

import pytest

from tests.helpers.runs import ROOT
from trainrig.slurm import sbatch

MLP = ("--config", "configs/mlp.yaml")


@dataclass
class Generated:
    returncode: int
    stderr: str


@pytest.fixture
def generate(monkeypatch, capsys):
    """`python -m trainrig.slurm.sbatch --output tmp_path/job.sbatch ARGS` from the project root, in this process."""
    monkeypatch.chdir(ROOT)

    def run(tmp_path, *args: str) -> Generated:
        try:
            sbatch.main(["--output", str(tmp_path / "job.sbatch"), *args])
            code = 0
        except SystemExit as exit:
            code = exit.code
        return Generated(code, capsys.readouterr().err)

    return run


def srun_line(script: str) -> list[str]:
    (line,) = [line for line in script.splitlines() if line.startswith("srun ")]
    return shlex.split(line.removesuffix(" &"))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--nodes", "0", *MLP), "error: --nodes must be at least 1, got 0"),
        (("--nodes", "2", "--config", "configs/none.yaml"), "error: --config 'configs/none.yaml' must be an existing"),
        (("--nodes", "2", *MLP, "--time", "soon"), "error: --time 'soon' is not a SLURM time limit"),
        (("--nodes", "2", *MLP, "--time", "1", "--signal-lead", "60"), "error: --signal-lead 60 s must be shorter"),
        (("--nodes", "2", *MLP, "--gpu-per-node", "4"), "error: unrecognized arguments: --gpu-per-node 4"),
        (("--nodes", "2", *MLP, "--", "--trainer.devices", "4"), "error: --trainer.devices is set from --nodes"),
        (("--nodes", "2", *MLP, "--", "--ckpt_path", "last"), "error: --ckpt_path is set to `last` when SLURM"),
        (
            ("--nodes", "2", *MLP, "--", "--trainer.strategy", "layer_split"),
            "error: --trainer.strategy layer_split trains in one process on one node's devices, but --nodes is 2",
        ),
        (
            ("--nodes", "3", *MLP, "--", "--trainer.strategy", "pipeline"),
            "error: pipeline schedule GPipe runs one stage per process, but the model has 2 stages and the job runs "
            "3 process(es); change --nodes or --gpus-per-node, or the model's stages\n",
        ),
        (("--nodes", "2", *MLP, "--", "--trainer.strategy", "nonsense"), "error: --trainer.strategy 'nonsense' cannot"),
        (
            ("--nodes", "1", *MLP, "--", "--trainer.strategy", "single_device"),
            "error: --trainer.strategy 'single_device' cannot run under srun",
        ),
    ],
)
def test_bad_requests_fail_in_one_line_and_write_nothing(generate, tmp_path, args, message):
    result = generate(tmp_path, *args)
    assert result.returncode == 2
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1, result.stderr
    assert not (tmp_path / "job.sbatch").exists()


@pytest.mark.parametrize(
    ("strategy", "selected"),
    [
        ((), "lightning.pytorch.strategies.DDPStrategy"),
        (("--trainer.strategy", "ddp"), "lightning.pytorch.strategies.DDPStrategy"),
        (("--trainer.strategy", "fsdp2"), "fsdp2"),
    ],
)
def test_multi_process_strategies_run_a_task_per_gpu_on_every_node_and_requeue(generate, tmp_path, strategy, selected):
    result = generate(tmp_path, "--nodes", "4", "--gpus-per-node", "8", "--time", "20:00:00", *MLP, "--", *strategy)
    assert result.returncode == 0, result.stderr
    script = (tmp_path / "job.sbatch").read_text()
    for line in ("--nodes=4", "--ntasks-per-node=8", "--gpus-per-node=8", "--time=20:00:00", "--requeue"):
        assert f"#SBATCH {line}\n" in script
    assert "#SBATCH --signal=B:USR1@300\n" in script
    command = srun_line(script)
    sizes = {flag: command[command.index(flag) + 1] for flag in ("--trainer.devices", "--trainer.num_nodes")}
    assert sizes == {"--trainer.devices": "8", "--trainer.num_nodes": "4"}
    assert command[command.index("--trainer.strategy") + 1] == selected
    assert command[command.index("--trainer.accelerator") + 1] == "gpu"
    assert '"auto_requeue": false' in command[command.index("--trainer.plugins") + 1]


def test_layer_split_runs_one_task_with_the_nodes_gpus(generate, tmp_path):
    result = generate(tmp_path, "--nodes", "1", "--gpus-per-node", "2", *MLP, "--", "--trainer.strategy", "layer_split")
    assert result.returncode == 0, result.stderr
    script = (tmp_path / "job.sbatch").read_text()
    assert "#SBATCH --ntasks-per-node=1\n" in script and "#SBATCH --gpus-per-node=2\n" in script
    command = srun_line(script)
    assert command[command.index("--trainer.strategy") + 1] == "layer_split"
    assert command[command.index("--trainer.devices") + 1] == "2"
