"""The MLP's pipeline (and every other strategy by flag) sent to Kubernetes: the generated job's pods run it with its
options, in a PyTorchJob and in a TrainJob."""

import pytest
import yaml

from tests.helpers.runs import run_cli
from tests.kubernetes import pytorchjobs, trainjobs
from tests.kubernetes.pytorchjobs import (
    assert_refused_in_one_line,
    generated_manifest,
    pod_command,
    schema_errors,
)
from tests.kubernetes.trainjobs import generated_documents, trainer_schema_errors

MLP_JOB = ["--name", "mlp", "--image", "template:0.1", "--config", "configs/mlp.yaml"]


def test_pipeline_after_the_separator_runs_in_every_pod_with_its_options(tmp_path, capsys):
    """`-- --trainer.strategy pipeline` replaces DDP in every pod; its options follow; cli.py reads them all, and the
    pipeline spans the job's 2 pods x 2 processes, two of the model's 8 stages on each."""
    job = ["--name", "mlp", "--image", "template:0.1", "--workers", "1", "--nproc-per-node", "2"]
    pipeline = ["--trainer.strategy", "pipeline", "--trainer.strategy.init_args.schedule", "Interleaved1F1B"]
    pipeline += ["--trainer.strategy.init_args.microbatches=8", "--model.init_args.hidden_sizes=[32,32,32,32,32,32,32]"]
    pipeline += ["--model.init_args.num_stages=8"]
    manifest, stdout = generated_manifest(tmp_path, *job, "--config", "configs/mlp.yaml", "--", *pipeline)
    assert schema_errors(manifest) == []
    assert "2 pods x 2 process(es) = world size 4" in stdout
    for kind in ("Master", "Worker"):
        command = pod_command(manifest, kind)
        assert command[:5] == ["torchrun", "--nnodes", "2", "--nproc_per_node", "2"]
        assert command.count("--trainer.strategy") == 1
        assert command[command.index("--trainer.strategy") + 1] == "pipeline"
        assert command[-2:] == ["--ckpt_path", "last"]
    with pytest.raises(SystemExit) as exit_info:
        run_cli("fit", [*command[command.index("fit") + 1 :], "--print_config"])
    assert exit_info.value.code in (None, 0)
    config = yaml.safe_load(capsys.readouterr().out)
    assert config["trainer"]["strategy"]["class_path"] == "trainrig.strategies.pipeline.PipelineStrategy"
    assert config["trainer"]["strategy"]["init_args"] | {"loss_fn": None} == {
        "schedule": "Interleaved1F1B",
        "microbatches": 8,
        "data_parallel": 1,
        "loss_fn": None,
        "process_group_backend": None,
        "timeout": "0:05:00",
        "compile": False,
    }
    assert (config["trainer"]["devices"], config["trainer"]["num_nodes"]) == ("2", 2)


STRATEGIES = {
    "pipeline": ["--trainer.strategy", "pipeline", "--trainer.strategy.init_args.schedule", "1F1B"],
    "fsdp2": ["--trainer.strategy", "fsdp2"],
}
# What each pod's cli.py must end up with, as the docs state it (docs/strategies.md's short names for the classes of
# configs/strategies/*.yaml; docs/clusters.md: the generator's 5-minute timeout instead of torch's 30, N nodes and
# `--ckpt_path last`), and the pipeline's schedule as given after the separator.
EXPECTED = {
    "pipeline": ("trainrig.strategies.pipeline.PipelineStrategy", {"schedule": "1F1B", "timeout": "0:05:00"}),
    "fsdp2": ("trainrig.strategies.fsdp2.FSDP2Strategy", {"timeout": "0:05:00"}),
}


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_by_flag_is_a_valid_trainjob_whose_command_cli_reads(tmp_path, capsys, strategy):
    documents, _ = generated_documents(
        tmp_path,
        *("--name", "mlp", "--image", "template:0.1", "--nodes", "2", "--config", "configs/mlp.yaml"),
        *("--", *STRATEGIES[strategy]),
    )
    for manifest in documents.values():
        assert trainer_schema_errors(manifest) == []
    command = documents["TrainJob"]["spec"]["trainer"]["command"]
    assert command.count("--trainer.strategy") == 1 and command[command.index("--trainer.strategy") + 1] == strategy
    with pytest.raises(SystemExit) as exit_info:
        run_cli("fit", [*command[command.index("fit") + 1 :], "--print_config"])
    assert exit_info.value.code in (None, 0)
    config = yaml.safe_load(capsys.readouterr().out)
    class_path, init_args = EXPECTED[strategy]
    assert config["trainer"]["strategy"]["class_path"] == class_path
    assert {name: config["trainer"]["strategy"]["init_args"][name] for name in init_args} == init_args
    assert (config["trainer"]["num_nodes"], config["trainer"]["devices"], config["ckpt_path"]) == (2, "1", "last")


@pytest.mark.parametrize(
    ("generate", "args", "expected"),
    [
        (
            pytorchjobs.generate,
            [*MLP_JOB, "--workers", "2", "--", "--trainer.strategy", "pipeline", "--model.init_args.num_stages", "2"],
            "error: pipeline schedule GPipe runs one stage per process, but the model has 2 stages and the job runs 3 "
            "process(es); change --nodes or --nproc-per-node, or the model's stages\n",
        ),
        (
            pytorchjobs.generate,
            [
                *MLP_JOB,
                "--workers",
                "2",
                "--",
                "--trainer.strategy",
                "pipeline",
                "--trainer.strategy.init_args.data_parallel=2",
            ],
            "error: pipeline data_parallel 2 does not divide the job's 3 processes (3 pod(s) x 1)\n",
        ),
        (
            pytorchjobs.generate,
            [*MLP_JOB, "--workers", "2", "--", "--trainer.strategy=layer_split"],
            "--trainer.strategy layer_split trains in one process on one machine's devices, but this job runs 3",
        ),
        (
            pytorchjobs.generate,
            [*MLP_JOB, "--elastic", "2:4", "--", "--trainer.strategy", "pipeline"],
            "--trainer.strategy pipeline needs a fixed number of processes; use --workers or --nodes, not --elastic",
        ),
        (
            trainjobs.generate,
            [*MLP_JOB, "--nodes", "3", "--", "--trainer.strategy", "layer_split"],
            "--trainer.strategy layer_split trains in one process",
        ),
    ],
)
def test_a_model_parallel_strategy_the_job_cannot_hold_is_refused_in_one_line(generate, args, expected, tmp_path):
    """The pipeline's stages must fit the job's processes, and layer_split runs in one process: each refused when the
    job is written, before it waits in a queue."""
    job_file = tmp_path / "job.yaml"
    assert_refused_in_one_line(generate(*args, output=job_file), expected, job_file)
