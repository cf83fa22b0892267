"""`--trainer.strategy pipeline`: the model's stages spread over processes, micro-batches flowing through them.

Built on torch.distributed.pipelining over the process group Lightning's DDP launch creates
(gloo on CPU, nccl on GPU), with any of its schedules by name. While stage 2 works on micro-batch 1,
stage 1 already works on micro-batch 2, so K stages are idle only a fraction (K-1)/(M+K-1) of the
time for M micro-batches (GPipe, 1F1B); interleaved and zero-bubble schedules run several stages
per process ("virtual stages") and shrink that idle time further.

This module holds the strategy: which stages each process keeps, and what Lightning asks of a strategy. Beside it:
the schedules and their rules (pipeline_schedules.py), the checks before any process starts (pipeline_checks.py),
how a step runs (pipeline_steps.py), and the optimizer state in the single-device layout (pipeline_optimizer_state.py).

Convention the LightningModule follows (the examples here do): a batch is `(inputs, targets, ...)`
or just `inputs`, the steps call `self(inputs)` once, and `loss_fn(outputs, targets)` is the loss
`training_step` computes (checked on the first step).
"""

from collections.abc import Callable
from datetime import timedelta
from functools import cached_property

import torch.distributed as dist
from lightning.fabric.plugins.collectives.torch_collective import default_pg_timeout
from lightning.fabric.utilities.apply_func import move_data_to_device
from lightning.fabric.utilities.optimizer import _optimizers_to_device
from lightning.pytorch.strategies import DDPStrategy
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities import rank_zero_info
from torch import Tensor, nn
from torch.distributed.device_mesh import init_device_mesh
from torch.nn import functional as F
from typing_extensions import override

from trainrig.strategies.compile import apply_compile, report_compiled
from trainrig.strategies.pipeline_checks import CheckFirstLauncher, check_pipeline_setup
from trainrig.strategies.pipeline_optimizer_state import load_numbered_state, merged, numbered, state_by_name
from trainrig.strategies.pipeline_schedules import process_of_stage, schedule_class, stages_of_process
from trainrig.strategies.pipeline_steps import PipelineSteps, forward_returning, inputs_and_targets
from trainrig.strategies.stages import StageElsewhere, model_stages, replace_submodule


class PipelineStrategy(DDPStrategy):
    """Each process trains its own stages of the model; a micro-batch schedule keeps them busy together."""

    strategy_name = "pipeline"
    strategy_description = "one process per stage, micro-batched with torch.distributed.pipelining (any schedule)"
    # What a launcher checks of a job that runs this strategy before writing it: the stages fit its processes (called
    # by trainrig.launch.arguments.check_job_fits). Named, not imported, as strategies sit below the launchers.
    job_check = "trainrig.launch.pipeline_fit.check_pipeline_fits"

    def __init__(
        self,
        schedule: str = "GPipe",
        microbatches: int = 4,
        data_parallel: int = 1,
        loss_fn: Callable[[Tensor, Tensor], Tensor] = F.cross_entropy,
        process_group_backend: str | None = None,
        timeout: timedelta = default_pg_timeout,
        compile: bool = False,
    ):
        """
        Args:
            schedule: a torch.distributed.pipelining schedule, all with the same result: GPipe (all
                forwards, then all backwards), 1F1B (alternates once the pipe is full, so fewer
                micro-batches' activations are alive), and with several stages per process
                Interleaved1F1B, LoopedBFS, InterleavedZeroBubble, or ZBVZeroBubble and DualPipeV (exactly two,
                placed as a V).
            microbatches: micro-batches per batch. More means a smaller idle fraction but smaller
                matrix products; a batch that does not divide evenly uses the largest divisor below
                that the schedule accepts.
            data_parallel: D pipeline replicas, each on its own shard of the data: the processes form a
                D x P mesh (P processes per pipeline), and each stage's gradients are averaged over its
                D replicas, as DDP averages them. The batch size is per replica.
            loss_fn: the loss of one micro-batch, `loss_fn(outputs, targets)`; must equal the loss the
                LightningModule's training_step computes (checked on the first step).
            process_group_backend: gloo or nccl; unset picks gloo on CPU and nccl on GPUs.
            timeout: how long the rendezvous and every send, receive or collective wait for the other stages.
            compile: `torch.compile` each stage this process runs, before the schedule's `PipelineStage` wraps it
                (trainrig/strategies/compile.py).
        """
        super().__init__(process_group_backend=process_group_backend, timeout=timeout, start_method="popen")
        self.schedule = schedule
        self.microbatches = microbatches
        self.data_parallel = data_parallel
        self.loss_fn = loss_fn
        self.compile = compile
        self._compiled: list[nn.Module] = []
        self._num_stages = 0
        self._parameter_names: list[str] = []
        self._state_keys: list[str] = []
        self._steps: PipelineSteps | None = None

    @cached_property
    def _schedule_class(self) -> type:
        """The schedule named by `schedule`, resolved at the first check (a UserInputError there, in one line)."""
        return schedule_class(self.schedule)

    def layout(self) -> dict:
        """What a run's checkpoints record of this pipeline (trainrig/strategies/record.py)."""
        return {
            "schedule": self.schedule,
            "stages": self._num_stages,
            "data_parallel": self.data_parallel,
            "compiled": bool(self._compiled),
        }

    @property
    @override
    def distributed_sampler_kwargs(self) -> dict:
        """Every stage of a pipeline sees the same batch: the data is sharded over the replicas only."""
        return {"num_replicas": self.data_parallel, "rank": self._replica}

    @property
    def _pipeline_size(self) -> int:
        """P, the processes of one pipeline."""
        return self.world_size // self.data_parallel

    @property
    def _pipeline_rank(self) -> int:
        return self.global_rank % self._pipeline_size

    @property
    def _replica(self) -> int:
        return self.global_rank // self._pipeline_size

    @override
    def _configure_launcher(self) -> None:
        self._launcher = CheckFirstLauncher(
            self._check_setup, self.cluster_environment, self.num_processes, self.num_nodes
        )

    @override
    def connect(self, model) -> None:
        self._check_setup(model, model._trainer.datamodule if model._trainer is not None else None)
        super().connect(model)

    def _check_setup(self, model, datamodule=None) -> None:
        """Raise a UserInputError for a setup that cannot work, before any process group exists."""
        check_pipeline_setup(
            model,
            datamodule,
            schedule=self._schedule_class,
            schedule_name=self.schedule,
            microbatches=self.microbatches,
            data_parallel=self.data_parallel,
            world_size=self.world_size,
            scales_gradients=getattr(self.precision_plugin, "scaler", None) is not None,
            backend=self._get_process_group_backend(),
        )

    @override
    def setup(self, trainer) -> None:
        """Keep only this process's stages, then set up as DDP would, minus the DDP wrapper."""
        self.accelerator.setup(trainer)
        module = self.lightning_module
        stages = model_stages(module, self.strategy_name)
        if self._steps is None:
            self._parameter_names = [name for name, _ in module.named_parameters()]
            self._state_keys = list(module.state_dict())
        mesh = init_device_mesh(
            self.root_device.type, (self.data_parallel, self._pipeline_size), mesh_dim_names=("data", "pipeline")
        )
        self._num_stages = len(stages)
        first_of_replica = self._replica * self._pipeline_size
        owners = [
            first_of_replica + process_of_stage(self._schedule_class, index, self._pipeline_size, self._num_stages)
            for index in range(self._num_stages)
        ]
        own_indices = stages_of_process(
            self._schedule_class, self._pipeline_rank, self._pipeline_size, self._num_stages
        )
        for index, stage in enumerate(stages):
            if index not in own_indices:
                replace_submodule(module, stage, StageElsewhere(index, f"process {owners[index]}"))
        self.model = self.precision_plugin.convert_module(self.model)
        self.model_to_device()
        own_stages = {index: stages[index] for index in own_indices}
        if self.compile and not self._compiled:  # the schedules wrap the stages at the first batch of each shape
            self._compiled = apply_compile(list(own_stages.values()))
            report_compiled("pipeline", self._compiled)
        self._steps = PipelineSteps(
            self._schedule_class,
            self.microbatches,
            self.loss_fn,
            own_stages,
            owners,
            self.global_rank,
            self.root_device,
            pipeline_group=mesh.get_group("pipeline"),
            data_group=mesh.get_group("data"),
        )
        fitting = trainer.state.fn == TrainerFn.FITTING
        if fitting:
            self.setup_optimizers(trainer)
        self.setup_precision_plugin()
        if fitting:
            _optimizers_to_device(self.optimizers, self.root_device)
        rank_zero_info(
            f"pipeline: {self._num_stages} stages on {self._pipeline_size} processes"
            + (f" x {self.data_parallel} data-parallel replicas" if self.data_parallel > 1 else "")
            + f", {self.schedule}, {self.microbatches} micro-batches per batch"
        )

    @override
    def training_step(self, *args, **kwargs):
        batch, module = args[0], self.lightning_module
        with self.precision_plugin.train_step_context():
            outputs, pipeline_loss = self._steps.run(batch, training=True)
            with forward_returning(module, inputs_and_targets(batch)[0], outputs):
                step_output = module.training_step(*args, **kwargs)
        self._steps.check_loss_fn_once(pipeline_loss, step_output)
        return step_output

    @override
    def backward(self, closure_loss: Tensor, optimizer, *args, **kwargs) -> Tensor:
        """The schedule already back-propagated; hand its gradients over as loss.backward() would have."""
        module = self.lightning_module
        closure_loss = self.precision_plugin.pre_backward(closure_loss, module)
        self._steps.hand_over_gradients()
        return self.precision_plugin.post_backward(closure_loss, module)

    def _evaluation_step(self, step_name: str, context, *args, **kwargs):
        batch, module = args[0], self.lightning_module
        with context():
            outputs, _ = self._steps.run(batch, training=False)
            with forward_returning(module, inputs_and_targets(batch)[0], outputs):
                return getattr(module, step_name)(*args, **kwargs)

    @override
    def validation_step(self, *args, **kwargs):
        return self._evaluation_step("validation_step", self.precision_plugin.val_step_context, *args, **kwargs)

    @override
    def test_step(self, *args, **kwargs):
        return self._evaluation_step("test_step", self.precision_plugin.test_step_context, *args, **kwargs)

    @override
    def predict_step(self, *args, **kwargs):
        return self._evaluation_step("predict_step", self.precision_plugin.predict_step_context, *args, **kwargs)

    def _gather_on_first_process(self, part: dict) -> list[dict] | None:
        """Every process's part on global rank 0, keeping the first replica's: the replicas hold the same."""
        parts = [None] * self.world_size if self.global_rank == 0 else None
        dist.gather_object(part, parts, dst=0)
        return parts[: self._pipeline_size] if parts is not None else None

    @override
    def lightning_module_state_dict(self) -> dict[str, Tensor]:
        """Every stage's weights, in the single-device order, so any strategy can load the checkpoint."""
        local = move_data_to_device(self.lightning_module.state_dict(), "cpu")
        parts = self._gather_on_first_process(local)
        if parts is None:
            return local
        merged_weights = {key: value for part in parts for key, value in part.items()}
        ordered = {key: merged_weights.pop(key) for key in self._state_keys if key in merged_weights}
        return {**ordered, **merged_weights}

    @override
    def optimizer_state(self, optimizer) -> dict:
        """Every stage's optimizer state, numbered as the single-device optimizer numbers its parameters."""
        by_name = state_by_name(self.lightning_module, optimizer)
        parts = self._gather_on_first_process(move_data_to_device(by_name, "cpu"))
        if parts is None:
            return {}
        return numbered(merged(parts), self._parameter_names)

    @override
    def load_optimizer_state_dict(self, checkpoint) -> None:
        """Each process takes its own parameters' entries, by name, from the single-device layout."""
        for optimizer, state in zip(self.optimizers, checkpoint["optimizer_states"]):
            load_numbered_state(self.lightning_module, optimizer, state, self._parameter_names)
