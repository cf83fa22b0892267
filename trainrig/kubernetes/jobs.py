"""Write a Kubeflow job whose pods run the same `cli.py fit` as a local run, and print the Run:ai equivalent.

    python -m trainrig.kubernetes.jobs --name shapes --image registry.example.com/template:0.1 --nodes 3 \\
        --config configs/EXAMPLE.yaml --gpus-per-pod 1 --pvc results:/workspace/logs --output job.yaml \\
        -- --trainer.max_epochs 20
    python -m trainrig.kubernetes.jobs --kind PyTorchJob --name shapes --image registry.example.com/template:0.1 \\
        --elastic 2:4 --config configs/EXAMPLE.yaml --pvc results:/workspace/logs --output job.yaml

`--kind TrainJob` (the default, trainjob.py) writes a Kubeflow Trainer v2 TrainJob and, when the job needs pod
settings the stock `torch-distributed` runtime lacks, the TrainingRuntime it runs on; `--kind PyTorchJob`
(pytorchjob_v1.py) writes the v1 training operator's job. Lightning's world size is pods x processes per pod.

The pods run DDP unless another strategy follows `--` (`--trainer.strategy pipeline`, with its options): then the
job's processes are that strategy's (a pipeline's stages span the pods, and must fit them). `layer_split` trains in
one process on one machine's devices: it is refused, a cluster job runs several processes. What a job runs is
decided as for every launcher (trainrig/launch/).
"""

import shlex
import sys

import yaml

from trainrig.errors.exit_status import entry_point
from trainrig.kubernetes import pytorchjob_v1, trainjob
from trainrig.kubernetes.request import JobRequest, fit_arguments, parse_request, resume_warning
from trainrig.kubernetes.runai import runai_command
from trainrig.launch.fit_arguments import check_fit_arguments


def manifests(request: JobRequest) -> list[dict]:
    if request.kind == "TrainJob":
        return trainjob.manifests(request)
    return [pytorchjob_v1.pytorchjob_manifest(request)]


def summary(request: JobRequest) -> str:
    shape = trainjob.summary(request) if request.kind == "TrainJob" else pytorchjob_v1.summary(request)
    if request.elastic:
        return (
            shape + "# Run:ai: not generated for --elastic (its CLI does not set the operator's rendezvous endpoint)\n"
        )
    return f"{shape}# Run:ai (runai training pytorch submit):\n{runai_command(request)}\n"


@entry_point
def main(argv: list[str] | None = None) -> None:
    request, output = parse_request(sys.argv[1:] if argv is None else argv)
    check_fit_arguments([*fit_arguments(request, num_nodes=request.pods), *request.overrides])
    documents = yaml.safe_dump_all(manifests(request), sort_keys=False, default_flow_style=None, width=1_000_000)
    warning = resume_warning(request)
    if warning:
        sys.stderr.write(warning + "\n")
    if output is None:
        sys.stdout.write(documents)
        sys.stderr.write(summary(request))
        return
    output.write_text(documents)
    sys.stdout.write(
        f"# wrote {output}; submit it with: kubectl apply -f {shlex.quote(str(output))}\n{summary(request)}"
    )


if __name__ == "__main__":
    main()
