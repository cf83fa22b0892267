"""The cluster job asked for on the command line of `python -m trainrig.kubernetes.jobs`, checked so that a manifest
that is written can run, and what every pod of it runs: the same `cli.py fit` as a local run.

Both kinds of job share the pod shape (nodes x processes per node, GPUs, CPU, memory, claims) and the training command;
trainjob.py and pytorchjob_v1.py turn it into their manifests, runai.py into Run:ai commands.
"""

import argparse
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from trainrig.errors import UserInputError
from trainrig.errors.options import OneLineArgumentParser
from trainrig.launch.arguments import Launcher, check_job_fits, job_arguments, split_at_separator
from trainrig.launch.strategy import JobStrategy, Placement, pipeline_hint
from trainrig.launch.trainer_flags import trainer_flags
from trainrig.strategies.strategy_option import STRATEGY_FLAG

KINDS = ("TrainJob", "PyTorchJob")
IMAGE_WORKDIR = "/workspace"  # the Dockerfile's WORKDIR: relative paths in the command resolve against it
RESTART_POLICIES = ("ExitCode", "OnFailure", "Never", "Always")
KUBERNETES = Launcher(
    runs_in="in the pods",
    node="pod",
    sized_by="--nodes, --gpus-per-pod, --nproc-per-node and --accelerator",
    resized_by="--nodes or --nproc-per-node",
    resumes="so that a restarted pod continues the run",
)
LOGS_DIR_FLAG = "--trainer.logger.init_args.save_dir"
ELASTIC_RANGE = re.compile(r"(\d+):(\d+)")
DNS_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
MAX_HOST_NAME = 63  # pod host names (NAME-worker-INDEX, NAME-node-0-INDEX) must stay a DNS label
MEMORY_QUANTITY = re.compile(r"\d+(\.\d+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?")
CLAIM_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")  # also a Kueue LocalQueue's name: a DNS subdomain


@dataclass(frozen=True)
class JobRequest:
    kind: str  # one of KINDS
    name: str
    image: str
    pods: (
        int  # every node of the job: a TrainJob's numNodes; a PyTorchJob's master and workers (workers only if elastic)
    )
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
    strategy: JobStrategy = JobStrategy()  # as given after `--` (pipeline, fsdp2...); DDP by default
    queue: str | None = None  # Kueue LocalQueue the job is admitted through

    @property
    def workers(self) -> int:
        """Pods besides the master, as the v1 operator and Run:ai count them; an elastic job has workers only."""
        return self.pods if self.elastic else self.pods - 1

    @property
    def world_size(self) -> int:
        return self.pods * self.nproc_per_node


def option_parser() -> argparse.ArgumentParser:
    parser = OneLineArgumentParser(
        prog="python -m trainrig.kubernetes.jobs",
        description="Write a Kubeflow TrainJob (Trainer v2) or PyTorchJob (v1 training operator) whose pods run "
        "cli.py fit, and print the Run:ai equivalent. Arguments after `--` are passed on to cli.py fit.",
    )
    parser.add_argument(
        "--kind",
        choices=KINDS,
        default="TrainJob",
        help="TrainJob (default) for Kubeflow Trainer v2; PyTorchJob for clusters still on the v1 training operator",
    )
    parser.add_argument("--name", required=True, help="job name: lower-case letters, digits and '-'")
    parser.add_argument(
        "--image",
        required=True,
        help="image built from this repository's Dockerfile, pushed to a registry the cluster can pull from",
    )
    pods = parser.add_mutually_exclusive_group(required=True)
    pods.add_argument("--nodes", type=int, help="pods of the job (world size = nodes x nproc-per-node)")
    pods.add_argument("--workers", type=int, help="PyTorchJob: worker pods besides the master (nodes - 1)")
    pods.add_argument(
        "--elastic",
        metavar="MIN:MAX",
        help="PyTorchJob: MAX worker pods and no master; torchrun trains with as many as are up (at least MIN) and "
        "restarts its processes when one fails",
    )
    parser.add_argument(
        "--config", required=True, help="config path relative to the project root, e.g. configs/EXAMPLE.yaml"
    )
    parser.add_argument("--gpus-per-pod", type=int, default=0, help="NVIDIA GPUs per pod (default 0: CPU)")
    parser.add_argument("--accelerator", choices=("cpu", "gpu"), help="default: gpu when --gpus-per-pod > 0, else cpu")
    parser.add_argument(
        "--nproc-per-node",
        type=int,
        help="training processes per pod; default one per GPU, or 1 on CPU",
    )
    parser.add_argument("--cpu", type=float, help="CPU cores per pod (request = limit)")
    parser.add_argument("--memory", help="memory per pod as a Kubernetes quantity, e.g. 16Gi (request = limit)")
    parser.add_argument(
        "--restart-policy",
        choices=RESTART_POLICIES,
        help="default ExitCode: restart after an exit 128+n (killed, preempted, lost peer), fail on 1-127 (bug, "
        "bad input); OnFailure with --elastic. A TrainJob restarts all its pods at once (JobSet), and takes ExitCode, "
        "OnFailure or Never",
    )
    parser.add_argument(
        "--backoff-limit",
        type=int,
        default=3,
        help="restarts before the job fails (default 3): PyTorchJob runPolicy.backoffLimit, pod restarts; TrainJob "
        "JobSet failurePolicy.maxRestarts, restarts of the whole job",
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
        f"results:{IMAGE_WORKDIR}/logs keeps logs and checkpoints after the pods are gone",
    )
    parser.add_argument("--queue", help="Kueue LocalQueue to submit through (label kueue.x-k8s.io/queue-name)")
    parser.add_argument(
        "--output",
        type=Path,
        help="manifest file to write; without it the manifest goes to stdout and the Run:ai commands to stderr",
    )
    return parser


def parse_request(argv: list[str]) -> tuple[JobRequest, Path | None]:
    """The job asked for on the command line, checked so that a manifest that is written can run."""
    own, overrides = split_at_separator(argv)
    args = option_parser().parse_args(own)
    trainjob = args.kind == "TrainJob"

    if not DNS_LABEL.fullmatch(args.name):
        raise UserInputError(
            f"--name {args.name!r} must be lower-case letters, digits and '-', starting with a letter and not "
            "ending with '-'"
        )
    if trainjob and args.elastic is not None:
        raise UserInputError(
            "--elastic needs --kind PyTorchJob: Kubeflow Trainer v2.2 removed ElasticPolicy, so a TrainJob runs a "
            "fixed --nodes"
        )
    if trainjob and args.workers is not None:
        raise UserInputError(
            f"a TrainJob has no master and workers: give --nodes {args.workers + 1} (the workers and the master)"
        )
    elastic = _elastic_range(args.elastic) if args.elastic is not None else None
    if elastic:
        pods = elastic[1]
    elif args.workers is not None:
        if args.workers < 1:
            raise UserInputError(
                f"--workers must be at least 1 (the master is started in addition to the workers), got {args.workers}"
            )
        pods = args.workers + 1
    else:
        pods = args.nodes
        least = 1 if trainjob else 2
        if pods < least:
            raise UserInputError(
                f"--nodes must be at least {least}"
                + ("" if trainjob else " (a PyTorchJob's master and one worker)")
                + f", got {pods}"
            )
    longest_pod_name = f"{args.name}-node-0-{pods - 1}" if trainjob else f"{args.name}-worker-{max(pods - 2, 0)}"
    if len(longest_pod_name) > MAX_HOST_NAME:
        raise UserInputError(
            f"--name is too long: pod names like {longest_pod_name!r} must fit in {MAX_HOST_NAME} characters"
        )
    if not args.image.strip() or any(character.isspace() for character in args.image):
        raise UserInputError(
            f"--image {args.image!r} is not an image name; give the pushed image, e.g. "
            "registry.example.com/template:0.1"
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
    if args.queue is not None and not CLAIM_NAME.fullmatch(args.queue):
        raise UserInputError(
            f"--queue {args.queue!r} is not a LocalQueue name: lower-case letters, digits, '-' and '.'"
        )
    config = Path(args.config)
    if config.is_absolute() or not config.is_file():
        raise UserInputError(
            f"--config {args.config!r} must be an existing file given relative to the project root (the image "
            f"holds the project at {IMAGE_WORKDIR})"
        )
    volume_claims = tuple(_volume_claim(value) for value in args.pvc)
    strategy, overrides = job_arguments(overrides, KUBERNETES)
    restart_policy = args.restart_policy or ("OnFailure" if elastic else "ExitCode")
    if trainjob and restart_policy == "Always":
        raise UserInputError(
            "--restart-policy Always cannot apply to a TrainJob: its pods are Jobs' pods, which end; use ExitCode or "
            "OnFailure"
        )
    if elastic and restart_policy == "ExitCode":
        # Measured: killing the agent that hosts the c10d rendezvous (worker-0) makes every other agent exit 1 within
        # seconds.
        raise UserInputError(
            "--elastic cannot use --restart-policy ExitCode: losing worker-0, which hosts the rendezvous, "
            "makes the other pods exit 1, which ExitCode never restarts"
        )
    if args.backoff_limit < 0:
        raise UserInputError(f"--backoff-limit must be 0 or more, got {args.backoff_limit}")
    if args.max_restarts is not None and trainjob:
        raise UserInputError(
            "--max-restarts counts torchrun's restarts of an elastic PyTorchJob; a TrainJob's restarts of all its pods "
            "are --backoff-limit"
        )
    if args.max_restarts is not None and not elastic:
        raise UserInputError(
            "--max-restarts counts torchrun's restarts of an elastic job; add --elastic MIN:MAX or use --backoff-limit"
        )
    max_restarts = 3 if args.max_restarts is None else args.max_restarts
    if max_restarts < 0:
        raise UserInputError(f"--max-restarts must be 0 or more, got {max_restarts}")
    _check_strategy_fits(strategy, pods * nproc_per_node, elastic)
    check_job_fits(strategy, overrides, config.as_posix(), pods, nproc_per_node, KUBERNETES)

    request = JobRequest(
        kind=args.kind,
        name=args.name,
        image=args.image,
        pods=pods,
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
        queue=args.queue,
    )
    return request, args.output


def _check_strategy_fits(strategy: JobStrategy, processes: int, elastic: tuple[int, int] | None) -> None:
    """Every pod runs its processes: a strategy of one process cannot; only DDP, the default, is elastic."""
    if strategy.placement is Placement.ONE_PROCESS:
        raise UserInputError(
            f"{STRATEGY_FLAG} {strategy.name} trains in one process on one machine's devices, but this job runs "
            f"{processes} process(es) on {'elastic ' if elastic else ''}pods; use ddp or fsdp2"
            f"{pipeline_hint('the pods')}"
        )
    if elastic and strategy.name is not None:
        raise UserInputError(
            f"{STRATEGY_FLAG} {strategy.name} needs a fixed number of processes; use --workers or --nodes, not "
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


def fit_command(
    request: JobRequest,
    num_nodes: int | None = None,
    plugins: str | None = None,
    strategy: JobStrategy | None = None,
) -> list[str]:
    """`cli.py fit` with the strategy (`strategy`, else the one asked for, else DDP) and devices of the pod shape, and
    the node count and cluster environment where the kind gives them; the launcher before it is each kind's."""
    return ["cli.py", "fit", *fit_arguments(request, num_nodes, plugins, strategy)]


def fit_arguments(
    request: JobRequest,
    num_nodes: int | None = None,
    plugins: str | None = None,
    strategy: JobStrategy | None = None,
) -> list[str]:
    """The arguments of `fit_command`, without the overrides that follow them."""
    flags = trainer_flags(strategy or request.strategy, request.accelerator, request.nproc_per_node, num_nodes, plugins)
    return ["--config", request.config, *flags]


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


def pod_volumes(request: JobRequest) -> tuple[list[dict], list[dict]]:
    """The pod's volumes and the container's mounts: memory-backed /dev/shm (DataLoader workers share batches there,
    64 MB in a pod unless replaced) and each claim. Fresh dicts per call, so YAML writes no anchors."""
    volumes = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    mounts = [{"name": "dshm", "mountPath": "/dev/shm"}]
    for index, (claim, path) in enumerate(request.volume_claims):
        volumes.append({"name": f"pvc-{index}", "persistentVolumeClaim": {"claimName": claim}})
        mounts.append({"name": f"pvc-{index}", "mountPath": path})
    return volumes, mounts


def queue_labels(request: JobRequest) -> dict[str, str]:
    return {"kueue.x-k8s.io/queue-name": request.queue} if request.queue else {}
