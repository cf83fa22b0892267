"""A Kubeflow PyTorchJob (`kubeflow.org/v1`, the v1 training operator): one master and N-1 workers, or elastic workers.

With one process per pod, Lightning's KubeflowEnvironment reads the operator's RANK and WORLD_SIZE (Lightning never
detects it by itself, so the command names it as a plugin). With several, torchrun starts them from the operator's
PET_* variables and Lightning detects torchrun.

A restarted pod continues the run: every command passes `--ckpt_path last`, which finds the newest checkpoint on the
claim mounted at the logs directory. `restartPolicy: ExitCode` restarts pods that exit 128+n (killed, preempted, a
lost peer) and fails the job on exit 1 or 2 (a bug, bad input); a DDP timeout of minutes instead of 30 makes the pods
that wait for a lost peer give up in time. With `--elastic MIN:MAX`, torchrun's agents restart the training processes
themselves.
"""

from trainrig.kubernetes.request import IMAGE_WORKDIR, JobRequest, fit_command, pod_resources, pod_volumes, queue_labels
from trainrig.launch.arguments import RESUME
from trainrig.launch.strategy import JobStrategy, Placement

CONTAINER_NAME = "pytorch"  # the operator only wires up the container with this name
KUBEFLOW_ENVIRONMENT = "lightning.fabric.plugins.environments.KubeflowEnvironment"
ELASTIC_DDP = JobStrategy("trainrig.kubernetes.elastic.ElasticDDPStrategy", Placement.PROCESS_PER_DEVICE)


def training_command(request: JobRequest) -> list[str]:
    """The command every pod runs: cli.py fit with DDP (or the strategy asked for) sized to the whole job, resuming
    the run's last checkpoint."""
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
        return [*launcher, *fit_command(request, strategy=ELASTIC_DDP), *request.overrides, *RESUME]
    if request.nproc_per_node == 1:
        fit = fit_command(request, num_nodes=request.pods, plugins=KUBEFLOW_ENVIRONMENT)
        return ["python", *fit, *request.overrides, *RESUME]
    # Node rank and master address come from the operator's PET_NODE_RANK / PET_MASTER_ADDR / PET_MASTER_PORT;
    # the sizes are explicit so the command is right also where nprocPerNode is not set (Run:ai).
    launcher = ["torchrun", "--nnodes", str(request.pods), "--nproc_per_node", str(request.nproc_per_node)]
    return [*launcher, *fit_command(request, num_nodes=request.pods), *request.overrides, *RESUME]


def replica_spec(request: JobRequest, replicas: int) -> dict:
    """A fresh dict per replica type, so the YAML dump writes plain mappings instead of anchors and aliases."""
    volumes, mounts = pod_volumes(request)
    container = {
        "name": CONTAINER_NAME,
        "image": request.image,
        "workingDir": IMAGE_WORKDIR,
        "command": training_command(request),
        "volumeMounts": mounts,
    }
    if request.elastic:
        # torch keeps the agents' store across restarts, where a restarted worker cannot tell its attempt's keys
        # (trainrig/resume/torchrun_restarts.py): every rendezvous round gets a store of its own.
        container["env"] = [{"name": "TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "value": "1"}]
    resources = pod_resources(request)
    if resources:
        container["resources"] = {"requests": dict(resources), "limits": dict(resources)}
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
    metadata = {"name": request.name} | ({"labels": queue_labels(request)} if request.queue else {})
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": metadata, "spec": spec}


def summary(request: JobRequest) -> str:
    if request.elastic:
        low, high = request.elastic
        return (
            f"# {request.name}: {high} worker pods, training with {low} to {high} of them x "
            f"{request.nproc_per_node} process(es); torchrun restarts the processes up to {request.max_restarts} "
            "times\n"
        )
    return (
        f"# {request.name}: 1 master + {request.workers} worker(s) = {request.pods} pods x {request.nproc_per_node} "
        f"process(es) = world size {request.world_size}\n"
    )
