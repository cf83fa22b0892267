"""The same job through NVIDIA Run:ai's command-line interface, as its reference documents it now:

    runai training pytorch submit NAME -i IMAGE --workers N ... --command -- torchrun ... cli.py fit ...

(https://docs.nvidia.com/run-ai/self-hosted/reference/cli/runai/training/runai-training-pytorch-submit, self-hosted
v3.0 and v2.24-v2.26; `runai pytorch submit` is its alias). Run:ai runs a PyTorch workload as a master and `--workers`
pods with the v1 operator's variables, so every pod runs the PyTorchJob's command.
"""

import shlex

from trainrig.kubernetes.pytorchjob_v1 import training_command
from trainrig.kubernetes.request import IMAGE_WORKDIR, JobRequest

SUBMIT = ("runai", "training", "pytorch", "submit")


def runai_command(request: JobRequest) -> str:
    command = [*SUBMIT, request.name, "-i", request.image, "--workers", str(request.workers)]
    if request.gpus_per_pod:
        command += ["--gpu-devices-request", str(request.gpus_per_pod)]
    if request.cpu is not None:
        command += ["--cpu-core-request", f"{request.cpu:g}", "--cpu-core-limit", f"{request.cpu:g}"]
    if request.memory is not None:
        command += ["--cpu-memory-request", request.memory, "--cpu-memory-limit", request.memory]
    command += ["--working-dir", IMAGE_WORKDIR, "--large-shm"]
    for claim, path in request.volume_claims:
        command += ["--existing-pvc", f"claimname={claim},path={path}"]
    return shlex.join([*command, "--command", "--", *training_command(request)])
