"""Write a Kubeflow PyTorchJob manifest (one master, N workers) and print the equivalent Run:ai commands.

    python -m trainrig.kubernetes.pytorchjob --name shapes --image registry.example.com/template:0.1 --workers 2 \\
        --config configs/EXAMPLE.yaml --gpus-per-pod 1 --pvc results:/workspace/logs --output job.yaml \\
        -- --trainer.max_epochs 20
    python -m trainrig.kubernetes.pytorchjob --name shapes --image registry.example.com/template:0.1 --elastic 2:4 \\
        --config configs/EXAMPLE.yaml --pvc results:/workspace/logs --output job.yaml

Every pod runs the same `cli.py fit` as a local run, and Lightning's world size is pods x processes
per pod. With one process per pod, Lightning's KubeflowEnvironment reads the operator's RANK and
WORLD_SIZE (Lightning never detects it by itself, so the command names it as a plugin). With several,
torchrun starts them from the operator's PET_* variables and Lightning detects torchrun.

A restarted pod continues the run: every command passes `--ckpt_path last`, which finds the newest
checkpoint on the claim mounted at the logs directory. `restartPolicy: ExitCode` restarts pods that
exit 128+n (killed, preempted, a lost peer) and fails the job on exit 1 or 2 (a bug, bad input); a
DDP timeout of minutes instead of 30 makes the pods that wait for a lost peer give up in time.
With `--elastic MIN:MAX`, torchrun's agents restart the training processes themselves.

The pods run DDP unless `--trainer.strategy pipeline` follows `--`: then the job's processes are the pipeline's
stages (world size = pods x processes per pod), with its options as given (`--trainer.strategy.init_args.schedule`,
`...microbatches`). `layer_split` trains in one process on one machine's devices: it is refused, a PyTorchJob
runs several processes.
"""

import argparse
import datetime
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from trainrig.errors import UserInputError
from trainrig.strategies.flag import STRATEGY_FLAG, TIMEOUT_FLAG, flag_values, parse_timeout, strategy_class

IMAGE_WORKDIR = "/workspace"  # the Dockerfile's WORKDIR: relative paths in the command resolve against it
CONTAINER_NAME = "pytorch"  # the operator only wires up the container with this name
KUBEFLOW_ENVIRONMENT = "lightning.fabric.plugins.environments.KubeflowEnvironment"
DDP_STRATEGY = "lightning.pytorch.strategies.DDPStrategy"
ELASTIC_DDP_STRATEGY = "trainrig.kubernetes.elastic.ElasticDDPStrategy"
RESTART_POLICIES = ("ExitCode", "OnFailure", "Never", "Always")
# How long a collective or the start-up rendezvous waits for a lost or late pod unless the overrides set
# --trainer.strategy.init_args.timeout: minutes, not torch's 30, so the pods waiting for a lost peer give up in time.
POD_TIMEOUT = datetime.timedelta(minutes=5)
# Trainer settings the manifest derives from the pod shape; an override would break world size = pods x processes.
DERIVED_TRAINER_FLAGS = (
    "--trainer.accelerator",
    "--trainer.devices",
    "--trainer.num_nodes",
    "--trainer.plugins",
)
RESUME = ("--ckpt_path", "last")
LOGS_DIR_FLAG = "--trainer.logger.init_args.save_dir"
ELASTIC_RANGE = re.compile(r"(\d+):(\d+)")
DNS_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
MAX_SERVICE_NAME = 63  # pods and services are named NAME-worker-INDEX and must stay a DNS label
MEMORY_QUANTITY = re.compile(r"\d+(\.\d+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?")
CLAIM_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")


@dataclass(frozen=True)
class JobRequest:
    name: str
    image: str
    workers: int
    config: str
    gpus_per_pod: int
    nproc_per_node: int
    accelerator: str
    cpu: float | None
    memory: str | None
    restart_policy: str
    backoff_limit: int
    elastic: tuple[int, int] | None  # (min, max) pods that torchrun's rendezvous admits
    max_restarts: int
    volume_claims: tuple[tuple[str, str], ...]  # (PersistentVolumeClaim name, mount path in every pod)
    overrides: tuple[str, ...]  # without the strategy, which `strategy` holds
    strategy: str | None = None  # `--trainer.strategy` as given after `--` (pipeline, layer_split); None: DDP

    @property
    def pods(self) -> int:
        """Run:ai and the operator both start the master as one more pod than the workers; an elastic job has workers
        only."""
        return self.workers if self.elastic else self.workers + 1

    @property
    def world_size(self) -> int:
        return self.pods * self.nproc_per_node


class _OneLineErrorParser(argparse.ArgumentParser):
    """Report bad flags like every other bad input: one line, exit status 2."""

    def error(self, message: str):
        raise UserInputError(f"{message} (see --help)")


def _parser() -> argparse.ArgumentParser:
    parser = _OneLineErrorParser(
        prog="python -m trainrig.kubernetes.pytorchjob",
        description="Write a Kubeflow PyTorchJob (1 master + N workers running cli.py fit) and print the Run:ai "
        "equivalents. "
        "Arguments after `--` are passed on to cli.py fit.",
    )
    parser.add_argument("--name", required=True, help="job name: lower-case letters, digits and '-'")
    parser.add_argument(
        "--image",
        required=True,
        help="image built from this repository's Dockerfile, pushed to a registry the cluster can pull from",
    )
    pods = parser.add_mutually_exclusive_group(required=True)
    pods.add_argument(
        "--workers", type=int, help="worker pods besides the master (world size = (workers + 1) x nproc-per-node)"
    )
    pods.add_argument(
        "--elastic",
        metavar="MIN:MAX",
        help="MAX worker pods and no master; torchrun trains with as many as are up (at least MIN) and restarts "
        "its processes when one fails",
    )
    parser.add_argument(
        "--config", required=True, help="config path relative to the project root, e.g. configs/EXAMPLE.yaml"
    )
    parser.add_argument("--gpus-per-pod", type=int, default=0, help="NVIDIA GPUs per pod (default 0: CPU)")
    parser.add_argument("--accelerator", choices=("cpu", "gpu"), help="default: gpu when --gpus-per-pod > 0, else cpu")
    parser.add_argument(
        "--nproc-per-node",
        type=int,
        help="training processes per pod; default one per GPU, or 1 on CPU. Above 1, pods run torchrun",
    )
    parser.add_argument("--cpu", type=float, help="CPU cores per pod (request = limit)")
    parser.add_argument("--memory", help="memory per pod as a Kubernetes quantity, e.g. 16Gi (request = limit)")
    parser.add_argument(
        "--restart-policy",
        choices=RESTART_POLICIES,
        help="default ExitCode: restart pods that exit 128+n (killed, preempted, lost peer), fail on 1-127 (bug, "
        "bad input); OnFailure with --elastic",
    )
    parser.add_argument(
        "--backoff-limit",
        type=int,
        default=3,
        help="pod restarts before the job fails (runPolicy.backoffLimit, default 3)",
    )
    parser.add_argument(
        "--max-restarts", type=int, help="with --elastic: restarts of the training processes by torchrun (default 3)"
    )
    parser.add_argument(
        "--pvc",
        action="append",
        default=[],
        metavar="CLAIM:PATH",
        help="mount an existing PersistentVolumeClaim in every pod (repeatable); e.g. "
        f"results:{IMAGE_WORKDIR}/logs keeps the master's logs and checkpoints after its pod is gone",
    )
    parser.add_argument(
        "--output",
        type=Path,
        help="manifest file to write; without it the manifest goes to stdout and the Run:ai commands to stderr",
    )
    return parser


def parse_request(argv: list[str]) -> tuple[JobRequest, Path | None]:
    """The job asked for on the command line, checked so that a manifest that is written can run."""
    split = argv.index("--") if "--" in argv else len(argv)
    args = _parser().parse_args(argv[:split])
    overrides = tuple(argv[split + 1 :])

    if not DNS_LABEL.fullmatch(args.name):
        raise UserInputError(
            f"--name {args.name!r} must be lower-case letters, digits and '-', starting with a letter and not "
            "ending with '-'"
        )
    elastic = _elastic_range(args.elastic) if args.elastic is not None else None
    workers = elastic[1] if elastic else args.workers
    longest_pod_name = f"{args.name}-worker-{max(workers - 1, 0)}"
    if len(longest_pod_name) > MAX_SERVICE_NAME:
        raise UserInputError(
            f"--name is too long: pod names like {longest_pod_name!r} must fit in {MAX_SERVICE_NAME} characters"
        )
    if not args.image.strip() or any(character.isspace() for character in args.image):
        raise UserInputError(
            f"--image {args.image!r} is not an image name; give the pushed image, e.g. "
            "registry.example.com/template:0.1"
        )
    if workers < 1:
        raise UserInputError(
            f"--workers must be at least 1 (the master is started in addition to the workers), got {workers}"
        )
    if args.gpus_per_pod < 0:
        raise UserInputError(f"--gpus-per-pod must be 0 or more, got {args.gpus_per_pod}")
    accelerator = args.accelerator or ("gpu" if args.gpus_per_pod else "cpu")
    if accelerator == "cpu" and args.gpus_per_pod:
        raise UserInputError(
            f"--accelerator cpu trains on CPU only but --gpus-per-pod {args.gpus_per_pod} requests GPUs; drop "
            "one of them"
        )
    if accelerator == "gpu" and not args.gpus_per_pod:
        raise UserInputError("--accelerator gpu needs --gpus-per-pod 1 or more")
    if args.nproc_per_node is not None and args.nproc_per_node < 1:
        raise UserInputError(f"--nproc-per-node must be at least 1, got {args.nproc_per_node}")
    nproc_per_node = args.nproc_per_node or max(args.gpus_per_pod, 1)
    if args.gpus_per_pod and nproc_per_node != args.gpus_per_pod:
        raise UserInputError(
            f"DDP runs one process per GPU: --nproc-per-node {nproc_per_node} must equal --gpus-per-pod "
            f"{args.gpus_per_pod}"
        )
    if args.cpu is not None and args.cpu <= 0:
        raise UserInputError(f"--cpu must be a positive number of cores, got {args.cpu:g}")
    if args.memory is not None and not MEMORY_QUANTITY.fullmatch(args.memory):
        raise UserInputError(f"--memory {args.memory!r} is not a Kubernetes quantity such as 16Gi or 500M")
    config = Path(args.config)
    if config.is_absolute() or not config.is_file():
        raise UserInputError(
            f"--config {args.config!r} must be an existing file given relative to the project root (the image "
            f"holds the project at {IMAGE_WORKDIR})"
        )
    volume_claims = tuple(_volume_claim(value) for value in args.pvc)
    strategy, overrides = _strategy_override(overrides)
    for timeout in flag_values(list(overrides), TIMEOUT_FLAG)[0]:
        parse_timeout(timeout)
    for override in overrides:
        flag = override.split("=", 1)[0].rstrip("+")
        if flag in DERIVED_TRAINER_FLAGS:
            raise UserInputError(
                f"{flag} is set from --workers, --gpus-per-pod, --nproc-per-node and --accelerator; do not "
                "override it after `--`"
            )
        if flag == RESUME[0]:
            raise UserInputError(
                f"{flag} is set to `last` so that a restarted pod continues the run; do not override it after `--`"
            )
    restart_policy = args.restart_policy or ("OnFailure" if elastic else "ExitCode")
    if elastic and restart_policy == "ExitCode":
        # Measured: killing the agent that hosts the c10d rendezvous (worker-0) makes every other agent exit 1 within
        # seconds.
        raise UserInputError(
            "--elastic cannot use --restart-policy ExitCode: losing worker-0, which hosts the rendezvous, "
            "makes the other pods exit 1, which ExitCode never restarts"
        )
    if args.backoff_limit < 0:
        raise UserInputError(f"--backoff-limit must be 0 or more, got {args.backoff_limit}")
    if args.max_restarts is not None and not elastic:
        raise UserInputError(
            "--max-restarts counts torchrun's restarts of an elastic job; add --elastic MIN:MAX or use --backoff-limit"
        )
    max_restarts = 3 if args.max_restarts is None else args.max_restarts
    if max_restarts < 0:
        raise UserInputError(f"--max-restarts must be 0 or more, got {max_restarts}")
    pods = workers if elastic else workers + 1
    if strategy is not None:
        _check_strategy_fits(strategy, pods * nproc_per_node, elastic)

    request = JobRequest(
        name=args.name,
        image=args.image,
        workers=workers,
        config=config.as_posix(),
        gpus_per_pod=args.gpus_per_pod,
        nproc_per_node=nproc_per_node,
        accelerator=accelerator,
        cpu=args.cpu,
        memory=args.memory,
        restart_policy=restart_policy,
        backoff_limit=args.backoff_limit,
        elastic=elastic,
        max_restarts=max_restarts,
        volume_claims=volume_claims,
        overrides=overrides,
        strategy=strategy,
    )
    return request, args.output


def _strategy_override(overrides: tuple[str, ...]) -> tuple[str | None, tuple[str, ...]]:
    """`--trainer.strategy NAME` taken out of the overrides (the manifest places it), when it names a model-parallel
    strategy of `trainrig/strategies/`; DDP, the default, and any other strategy are refused, as the pod shape sets
    them."""
    strategies, rest = flag_values(list(overrides), STRATEGY_FLAG)
    for value in strategies:
        if _model_parallel_strategy(value) is None:
            raise UserInputError(
                f"{STRATEGY_FLAG} {value!r} cannot run in the pods: DDP is set from --workers, --gpus-per-pod, "
                "--nproc-per-node and --accelerator, and only `-- --trainer.strategy pipeline` replaces it"
            )
    return (strategies[-1] if strategies else None), tuple(rest)


def _model_parallel_strategy(value: str) -> type | None:
    """The class `--trainer.strategy value` selects when it is a model-parallel strategy (one of its own, derived
    from Lightning's DDP or single-device strategy, as `pipeline` and `layer_split` are), else None. Imported only
    when asked: the generator otherwise needs no torch."""
    from lightning.pytorch.strategies import DDPStrategy, SingleDeviceStrategy

    selected = strategy_class(value)
    if selected is None or selected in (DDPStrategy, SingleDeviceStrategy):
        return None
    return selected if issubclass(selected, (DDPStrategy, SingleDeviceStrategy)) else None


def _check_strategy_fits(strategy: str, processes: int, elastic: tuple[int, int] | None) -> None:
    from lightning.pytorch.strategies import SingleDeviceStrategy

    if issubclass(_model_parallel_strategy(strategy), SingleDeviceStrategy):
        raise UserInputError(
            f"{STRATEGY_FLAG} {strategy} trains in one process on one machine's devices, but this job runs "
            f"{processes} process(es) on {'elastic ' if elastic else ''}pods; use pipeline to spread the stages over "
            "the pods"
        )
    if elastic:
        raise UserInputError(
            f"{STRATEGY_FLAG} {strategy} needs a fixed number of processes (one per stage); use --workers, not "
            "--elastic"
        )


def _elastic_range(value: str) -> tuple[int, int]:
    match = ELASTIC_RANGE.fullmatch(value)
    if not match or not 1 <= int(match[1]) <= int(match[2]):
        raise UserInputError(f"--elastic {value!r} must be MIN:MAX pods with 1 <= MIN <= MAX, e.g. 2:4")
    return int(match[1]), int(match[2])


def _volume_claim(value: str) -> tuple[str, str]:
    claim, _, path = value.partition(":")
    if not CLAIM_NAME.fullmatch(claim) or not path.startswith("/"):
        raise UserInputError(
            f"--pvc {value!r} must be CLAIM:PATH, an existing claim's name and an absolute mount path, e.g. "
            f"results:{IMAGE_WORKDIR}/logs"
        )
    return claim, path


def training_command(request: JobRequest) -> list[str]:
    """The command every pod runs: cli.py fit with DDP (or the strategy asked for) sized to the whole job, resuming
    the run's last checkpoint."""
    strategy = request.strategy or (ELASTIC_DDP_STRATEGY if request.elastic else DDP_STRATEGY)
    fit = [
        "cli.py",
        "fit",
        "--config",
        request.config,
        STRATEGY_FLAG,
        strategy,
        TIMEOUT_FLAG,
        str(POD_TIMEOUT),  # an override after `--` comes later and wins
        "--trainer.accelerator",
        request.accelerator,
        "--trainer.devices",
        str(request.nproc_per_node),
    ]
    if request.elastic:
        # The node count is whatever the rendezvous admitted (ElasticDDPStrategy reads it); the endpoint,
        # worker-0's agent, comes from the operator's PET_RDZV_ENDPOINT.
        low, high = request.elastic
        launcher = [
            "torchrun",
            "--nnodes",
            f"{low}:{high}",
            "--nproc_per_node",
            str(request.nproc_per_node),
            "--rdzv_backend",
            "c10d",
            "--max_restarts",
            str(request.max_restarts),
        ]
        return [*launcher, *fit, *request.overrides, *RESUME]
    fit += ["--trainer.num_nodes", str(request.pods)]
    if request.nproc_per_node == 1:
        return ["python", *fit, "--trainer.plugins", KUBEFLOW_ENVIRONMENT, *request.overrides, *RESUME]
    # Node rank and master address come from the operator's PET_NODE_RANK / PET_MASTER_ADDR / PET_MASTER_PORT;
    # the sizes are explicit so the command is right also where nprocPerNode is not set (Run:ai).
    launcher = ["torchrun", "--nnodes", str(request.pods), "--nproc_per_node", str(request.nproc_per_node)]
    return [*launcher, *fit, *request.overrides, *RESUME]


def logs_dir(request: JobRequest) -> str:
    """Where rank 0 writes logs and checkpoints inside the pod: the logger's save_dir from the overrides or the
    config."""
    save_dir = None
    for at, override in enumerate(request.overrides):
        flag, equals, value = override.partition("=")
        if flag == LOGS_DIR_FLAG:
            save_dir = value if equals else (request.overrides[at + 1] if at + 1 < len(request.overrides) else None)
    if save_dir is None:
        logger = (yaml.safe_load(Path(request.config).read_text()) or {}).get("trainer", {}).get("logger")
        init_args = logger.get("init_args", {}) if isinstance(logger, dict) else {}
        save_dir = init_args.get("save_dir", "logs")
    return str(Path(IMAGE_WORKDIR, save_dir))


def resume_warning(request: JobRequest) -> str | None:
    """A restarted pod starts on a fresh disk: without a claim under the logs directory it cannot resume."""
    if request.restart_policy == "Never":
        return None
    directory = logs_dir(request)
    if any(
        directory == path.rstrip("/") or directory.startswith(path.rstrip("/") + "/")
        for _, path in request.volume_claims
    ):
        return None
    return (
        f"warning: no --pvc is mounted at {directory}, where checkpoints are written: "
        f"a restarted pod will train from step 0 (add e.g. --pvc results:{directory})"
    )


def pod_resources(request: JobRequest) -> dict[str, int | str]:
    """Quantities as the API expects them: an integer GPU count, CPU and memory as strings."""
    resources: dict[str, int | str] = {}
    if request.gpus_per_pod:
        resources["nvidia.com/gpu"] = request.gpus_per_pod
    if request.cpu is not None:
        resources["cpu"] = f"{request.cpu:g}"
    if request.memory is not None:
        resources["memory"] = request.memory
    return resources


def replica_spec(request: JobRequest, replicas: int) -> dict:
    """A fresh dict per replica type, so the YAML dump writes plain mappings instead of anchors and aliases."""
    container = {
        "name": CONTAINER_NAME,
        "image": request.image,
        "workingDir": IMAGE_WORKDIR,
        "command": training_command(request),
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
    }
    if request.elastic:
        # torch keeps the agents' store across restarts, where a restarted worker cannot tell its attempt's keys
        # (trainrig/resume/torchrun_restarts.py): every rendezvous round gets a store of its own.
        container["env"] = [{"name": "TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "value": "1"}]
    # DataLoader workers share batches through /dev/shm, which is 64 MB in a pod unless replaced.
    volumes = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    resources = pod_resources(request)
    if resources:
        container["resources"] = {"requests": dict(resources), "limits": dict(resources)}
    for index, (claim, path) in enumerate(request.volume_claims):
        container["volumeMounts"].append({"name": f"pvc-{index}", "mountPath": path})
        volumes.append({"name": f"pvc-{index}", "persistentVolumeClaim": {"claimName": claim}})
    return {
        "replicas": replicas,
        "restartPolicy": request.restart_policy,
        "template": {"spec": {"containers": [container], "volumes": volumes}},
    }


def pytorchjob_manifest(request: JobRequest) -> dict:
    spec: dict = {
        "runPolicy": {"backoffLimit": request.backoff_limit},
        "nprocPerNode": str(request.nproc_per_node),
    }
    if request.elastic:
        low, high = request.elastic
        spec["elasticPolicy"] = {
            "rdzvBackend": "c10d",
            "minReplicas": low,
            "maxReplicas": high,
            "maxRestarts": request.max_restarts,
        }
        spec["pytorchReplicaSpecs"] = {"Worker": replica_spec(request, request.workers)}
    else:
        spec["pytorchReplicaSpecs"] = {
            "Master": replica_spec(request, 1),
            "Worker": replica_spec(request, request.workers),
        }
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": request.name}, "spec": spec}


def runai_commands(request: JobRequest) -> tuple[str, str]:
    """The same job through Run:ai CLI v1 (`runai submit-dist pytorch`) and CLI v2 (`runai distributed submit`)."""
    command = ["--command", "--", *training_command(request)]
    cpu = f"{request.cpu:g}" if request.cpu is not None else None
    v1 = ["runai", "submit-dist", "pytorch", request.name, f"--workers={request.workers}", "-i", request.image]
    v2 = [
        "runai",
        "distributed",
        "submit",
        request.name,
        "--framework",
        "PyTorch",
        "-i",
        request.image,
        "--workers",
        str(request.workers),
    ]
    if request.gpus_per_pod:
        v1 += ["-g", str(request.gpus_per_pod)]
        v2 += [
            "--gpu-devices-request",
            str(request.gpus_per_pod),
            "--master-gpu-devices-request",
            str(request.gpus_per_pod),
        ]
    if cpu is not None:
        v1 += ["--cpu", cpu, "--cpu-limit", cpu]
        v2 += ["--cpu-core-request", cpu, "--cpu-core-limit", cpu]
    if request.memory is not None:
        v1 += ["--memory", request.memory, "--memory-limit", request.memory]
        v2 += ["--cpu-memory-request", request.memory, "--cpu-memory-limit", request.memory]
    shared = ["--working-dir", IMAGE_WORKDIR, "--large-shm"]
    v1 += shared
    v2 += shared
    for claim, path in request.volume_claims:
        v1 += ["--pvc-exists", f"claimname={claim},path={path}"]
        v2 += ["--existing-pvc", f"claimname={claim},path={path}"]
    return shlex.join(v1 + command), shlex.join(v2 + command)


def main(argv: list[str] | None = None) -> None:
    try:
        request, output = parse_request(sys.argv[1:] if argv is None else argv)
    except UserInputError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)

    manifest = yaml.safe_dump(pytorchjob_manifest(request), sort_keys=False, default_flow_style=None, width=1_000_000)
    if request.elastic:
        low, high = request.elastic
        summary = (
            f"# {request.name}: {high} worker pods, training with {low} to {high} of them x "
            f"{request.nproc_per_node} process(es); "
            f"torchrun restarts the processes up to {request.max_restarts} times\n"
            "# Run:ai: not generated for --elastic (its CLI does not set the operator's rendezvous endpoint)\n"
        )
    else:
        runai_v1, runai_v2 = runai_commands(request)
        summary = (
            f"# {request.name}: 1 master + {request.workers} worker(s) = {request.pods} pods x "
            f"{request.nproc_per_node} "
            f"process(es) = world size {request.world_size}\n"
            f"# Run:ai CLI v1:\n{runai_v1}\n# Run:ai CLI v2:\n{runai_v2}\n"
        )
    warning = resume_warning(request)
    if warning:
        sys.stderr.write(warning + "\n")
    if output is None:
        sys.stdout.write(manifest)
        sys.stderr.write(summary)
        return
    output.write_text(manifest)
    sys.stdout.write(f"# wrote {output}; submit it with: kubectl apply -f {shlex.quote(str(output))}\n{summary}")


if __name__ == "__main__":
    main()
