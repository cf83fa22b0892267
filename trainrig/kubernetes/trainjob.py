"""A Kubeflow Trainer v2 TrainJob (`trainer.kubeflow.org/v1alpha1`), and the TrainingRuntime it runs on when the job
needs pod settings that the stock `torch-distributed` ClusterTrainingRuntime lacks.

Trainer v2 runs a TrainJob as a JobSet with one replicated job, `node`, of `numNodes` pods. Its torch plugin (v2.3,
pkg/runtime/framework/plugins/torch) gives the container named `node` the variables torchrun reads: PET_NNODES,
PET_NPROC_PER_NODE, PET_NODE_RANK (the pod's completion index), PET_MASTER_ADDR (`<job>-node-0-0.<job>`, the first
pod's name in the JobSet's headless service) and PET_MASTER_PORT (29500). A TrainJob may not set them itself, so every
pod runs the same `torchrun cli.py fit ...` and torchrun takes node rank and master from there.

Restarts: the runtime written here runs the pods with `restartPolicy: Never` in Jobs with `backoffLimit: 0`, so any
failed pod fails its Job and JobSet restarts the whole job (`failurePolicy.maxRestarts`): every pod is recreated, and
`--ckpt_path last` continues from the newest checkpoint on the claim at the logs directory. Under ExitCode (the
default) a pod that exits 1-127 (a bug, bad input) fails the Job through its podFailurePolicy, and that reason fails
the JobSet without a restart, as the v1 operator's `restartPolicy: ExitCode` does.
"""

from trainrig.kubernetes.request import IMAGE_WORKDIR, JobRequest, fit_command, pod_resources, pod_volumes, queue_labels
from trainrig.launch.arguments import RESUME

API_VERSION = "trainer.kubeflow.org/v1alpha1"
STOCK_RUNTIME = "torch-distributed"  # the ClusterTrainingRuntime Trainer v2 installs for torchrun
NODE = "node"  # the replicated job and its container, where the torch plugin injects PET_*
ANCESTOR_LABEL = {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}  # where spec.trainer applies
PERMANENT_EXIT_CODES = list(range(1, 128))  # as the v1 operator's ExitCode policy: 128+n (a signal) is retryable
PERMANENT_FAILURE = "PodFailurePolicy"  # the reason of a Job that podFailurePolicy failed


def training_command(request: JobRequest) -> list[str]:
    """torchrun, sized and ranked by the trainer's PET_* variables, then cli.py fit for the whole job, resuming the
    run's last checkpoint."""
    return ["torchrun", *fit_command(request, num_nodes=request.pods), *request.overrides, *RESUME]


def needs_own_runtime(request: JobRequest) -> bool:
    """The stock runtime restarts nothing (JobSet's default maxRestarts is 0), mounts no claim and leaves /dev/shm at
    64 MB; any restart policy but Never, or a claim, needs a runtime of the job's own."""
    return request.restart_policy != "Never" or bool(request.volume_claims)


def trainjob_manifest(request: JobRequest) -> dict:
    if needs_own_runtime(request):
        runtime = {"apiGroup": "trainer.kubeflow.org", "kind": "TrainingRuntime", "name": request.name}
    else:
        runtime = {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime", "name": STOCK_RUNTIME}
    trainer: dict = {
        "image": request.image,
        "command": training_command(request),
        "numNodes": request.pods,
        # Explicit: the plugin's default, `auto`, counts CPU cores on a CPU-only pod.
        "numProcPerNode": request.nproc_per_node,
    }
    resources = pod_resources(request)
    if resources:
        trainer["resourcesPerNode"] = {"requests": dict(resources), "limits": dict(resources)}
    metadata = {"name": request.name} | ({"labels": queue_labels(request)} if request.queue else {})
    return {
        "apiVersion": API_VERSION,
        "kind": "TrainJob",
        "metadata": metadata,
        "spec": {"runtimeRef": runtime, "trainer": trainer},
    }


def training_runtime_manifest(request: JobRequest) -> dict:
    """The stock torch runtime plus the job's pod settings: /dev/shm in memory, the claims, and the restart policy."""
    volumes, mounts = pod_volumes(request)
    container = {"name": NODE, "image": request.image, "workingDir": IMAGE_WORKDIR, "volumeMounts": mounts}
    job: dict = {"backoffLimit": 0}
    jobset: dict = {}
    if request.restart_policy == "ExitCode":
        job["podFailurePolicy"] = {
            "rules": [
                {
                    "action": "FailJob",
                    "onExitCodes": {"containerName": NODE, "operator": "In", "values": PERMANENT_EXIT_CODES},
                }
            ]
        }
        rules = [{"name": "bug-or-bad-input", "action": "FailJobSet", "onJobFailureReasons": [PERMANENT_FAILURE]}]
        jobset["failurePolicy"] = {"maxRestarts": request.backoff_limit, "rules": rules}
    elif request.restart_policy == "OnFailure":
        jobset["failurePolicy"] = {"maxRestarts": request.backoff_limit}
    job["template"] = {"spec": {"restartPolicy": "Never", "containers": [container], "volumes": volumes}}
    jobset["replicatedJobs"] = [{"name": NODE, "template": {"metadata": {"labels": dict(ANCESTOR_LABEL)}, "spec": job}}]
    return {
        "apiVersion": API_VERSION,
        "kind": "TrainingRuntime",
        "metadata": {"name": request.name, "labels": {"trainer.kubeflow.org/framework": "torch"}},
        "spec": {"mlPolicy": {"numNodes": request.pods, "torch": {}}, "template": {"spec": jobset}},
    }


def manifests(request: JobRequest) -> list[dict]:
    """What `kubectl apply -f` gets: the job's own runtime first when it needs one, then the TrainJob."""
    runtime = [training_runtime_manifest(request)] if needs_own_runtime(request) else []
    return [*runtime, trainjob_manifest(request)]


def summary(request: JobRequest) -> str:
    runtime = (
        f"TrainingRuntime {request.name}" if needs_own_runtime(request) else f"ClusterTrainingRuntime {STOCK_RUNTIME}"
    )
    restarts = (
        "no restarts"
        if request.restart_policy == "Never"
        else f"up to {request.backoff_limit} restarts of all pods ({request.restart_policy})"
    )
    return (
        f"# {request.name}: TrainJob on {runtime}, {request.pods} nodes x {request.nproc_per_node} process(es) = "
        f"world size {request.world_size}, {restarts}\n"
    )
