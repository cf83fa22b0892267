"""`--trainer.strategy pipeline`: the model's stages spread over processes, micro-batches flowing through them.

Built on torch.distributed.pipelining over the process group Lightning's DDP launch creates
(gloo on CPU, nccl on GPU), with any of its schedules by name. While stage 2 works on micro-batch 1,
stage 1 already works on micro-batch 2, so K stages are idle only a fraction (K-1)/(M+K-1) of the
time for M micro-batches (GPipe, 1F1B); interleaved and zero-bubble schedules run several stages
per process ("virtual stages") and shrink that idle time further.

How a step runs, on every process:
1. the schedule runs forward and backward over the micro-batches; each process computes and
   keeps gradients for its own stages only;
2. the process with the last stage sends the whole batch's outputs to every process;
3. the LightningModule's own `training_step` (or validation/test/predict step) runs with
   `self(inputs)` answering those outputs, so it logs the same metrics as on one device.
The gradients of step 1 are handed over in `backward`, after Lightning's `zero_grad`.

Convention the LightningModule follows (the examples here do): a batch is `(inputs, targets, ...)`
or just `inputs`, the steps call `self(inputs)` once, and `loss_fn(outputs, targets)` is the loss
`training_step` computes (checked on the first step).
"""

import itertools
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import timedelta

import torch
import torch.distributed as dist
from lightning.fabric.plugins.collectives.torch_collective import default_pg_timeout
from lightning.fabric.utilities.apply_func import move_data_to_device
from lightning.fabric.utilities.optimizer import _optimizers_to_device
from lightning.pytorch import LightningDataModule, LightningModule
from lightning.pytorch.strategies import DDPStrategy
from lightning.pytorch.strategies.launchers import _SubprocessScriptLauncher
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities import rank_zero_info, rank_zero_warn
from torch import Tensor, nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict, set_optimizer_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.pipelining import (
    PipelineStage,
    Schedule1F1B,
    ScheduleDualPipeV,
    ScheduleGPipe,
    ScheduleInterleaved1F1B,
    ScheduleInterleavedZeroBubble,
    ScheduleZBVZeroBubble,
)
from torch.distributed.pipelining.schedules import PipelineScheduleMulti, PipelineScheduleSingle, get_schedule_class
from torch.nn import functional as F
from typing_extensions import override

from trainrig.errors import UserInputError
from trainrig.strategies.compile import apply_compile, report_compiled
from trainrig.strategies.stages import StageElsewhere, model_stages, replace_submodule

# torch.distributed.pipelining's schedules by the names get_schedule_class knows. GPipe and 1F1B run one stage
# per process; the others run several ("virtual stages"), ZBVZeroBubble and DualPipeV exactly two, placed as a V.
SCHEDULE_NAMES = (
    "GPipe",
    "1F1B",
    "Interleaved1F1B",
    "LoopedBFS",
    "InterleavedZeroBubble",
    "ZBVZeroBubble",
    "DualPipeV",
)
# Schedules placing two stages on each process as a V: process r holds stages r and 2P-1-r.
V_SCHEDULES = (ScheduleZBVZeroBubble, ScheduleDualPipeV)
# Optimizer state keyed by parameter name, whole tensors: how torch's distributed state-dict helpers exchange it.
BY_NAME = StateDictOptions(full_state_dict=True)
# Relative difference above which loss_fn and training_step disagree for real, not by float rounding.
LOSS_FN_TOLERANCE = 1e-3


def schedule_class(name: str) -> type[PipelineScheduleSingle | PipelineScheduleMulti]:
    if name.lower() not in {known.lower() for known in SCHEDULE_NAMES}:
        raise UserInputError(f"pipeline schedule {name!r} is unknown; choose one of {', '.join(SCHEDULE_NAMES)}")
    return get_schedule_class(name)


def stages_of_process(schedule: type, rank: int, processes: int, num_stages: int) -> list[int]:
    """The stages process `rank` runs: stage i on process i mod P, or the V of ZBVZeroBubble and DualPipeV (r and
    2P-1-r)."""
    if schedule in V_SCHEDULES:
        return [rank, 2 * processes - 1 - rank]
    return list(range(rank, num_stages, processes))


def stage_count_problem(schedule: type, num_stages: int, processes: int) -> str | None:
    """Why `schedule` cannot run `num_stages` stages on `processes` processes (None when it can)."""
    if issubclass(schedule, PipelineScheduleSingle):
        rule, per_process = "one stage per process", 1
    elif schedule in V_SCHEDULES:
        rule, per_process = "exactly two stages per process", 2
    else:
        rule, per_process = "the same number of stages on every process", None
    if (num_stages == per_process * processes) if per_process else (num_stages % processes == 0):
        return None
    if num_stages % (per_process or 1):
        fix = f"give the model {per_process * processes} stages"
    else:
        devices = num_stages // (per_process or 1)
        fix = f"set --trainer.devices {devices} (or {devices} rank(s) on a launcher) or change the model's stages"
    name = schedule.__name__.removeprefix("Schedule")
    return (
        f"pipeline schedule {name} runs {rule}, but the model has {num_stages} stages and the trainer starts "
        f"{processes} process(es); {fix}"
    )


def process_of_stage(schedule: type, stage: int, processes: int, num_stages: int) -> int:
    return next(rank for rank in range(processes) if stage in stages_of_process(schedule, rank, processes, num_stages))


# torch's conditions on the number of micro-batches, where it has any.
MICROBATCH_RULES = {
    Schedule1F1B: "it needs at least one micro-batch per process",
    ScheduleInterleaved1F1B: "it needs whole rounds: a multiple of microbatches // processes",
    ScheduleInterleavedZeroBubble: "it needs whole rounds: a multiple of microbatches // processes",
    ScheduleDualPipeV: "it needs at least as many micro-batches as stages",
}


def accepts_microbatches(schedule: type, count: int, processes: int) -> bool:
    if schedule is Schedule1F1B:
        return count >= processes
    if schedule in (ScheduleInterleaved1F1B, ScheduleInterleavedZeroBubble):
        return count % max(1, count // processes) == 0
    if schedule is ScheduleDualPipeV:
        return count >= 2 * processes
    return True


def inputs_and_targets(batch) -> tuple[Tensor, Tensor | None]:
    if isinstance(batch, (tuple, list)):
        return batch[0], (batch[1] if len(batch) > 1 else None)
    return batch, None


@contextmanager
def forward_returning(module: nn.Module, inputs: Tensor, outputs: Tensor) -> Iterator[None]:
    """While a step runs, `module(inputs)` answers the outputs the pipeline already computed."""

    def precomputed_forward(*args, **kwargs):
        if not args or args[0] is not inputs:
            raise RuntimeError(
                "the pipeline strategy computed the outputs for the batch's first element; the step must call "
                "self(inputs) on exactly that tensor, once (move preprocessing into the first stage)"
            )
        return outputs

    module.forward = precomputed_forward
    try:
        yield
    finally:
        del module.forward


class PipelineStrategy(DDPStrategy):
    """Each process trains its own stages of the model; a micro-batch schedule keeps them busy together."""

    strategy_name = "pipeline"
    strategy_description = "one process per stage, micro-batched with torch.distributed.pipelining (any schedule)"

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
        self._pipeline_group: dist.ProcessGroup | None = None
        self._data_group: dist.ProcessGroup | None = None
        self._stage_indices: list[int] = []
        self._stage_modules: list[nn.Module] = []
        self._num_stages = 0
        self._parameter_names: list[str] = []
        self._state_keys: list[str] = []
        self._schedules: dict[tuple, PipelineScheduleSingle | PipelineScheduleMulti] = {}
        self._output_meta: dict[object, tuple[torch.Size, torch.dtype] | None] = {}
        self._held_grads: list[tuple[nn.Parameter, Tensor | None]] = []
        self._loss_fn_checked = False
        self._reported_batch_sizes: set[int] = set()

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

    def _global_rank_of(self, pipeline_rank: int) -> int:
        return self._replica * self._pipeline_size + pipeline_rank

    @property
    def _holds_last_stage(self) -> bool:
        return self._num_stages - 1 in self._stage_indices

    @property
    def _last_stage_rank(self) -> int:
        return process_of_stage(
            schedule_class(self.schedule), self._num_stages - 1, self._pipeline_size, self._num_stages
        )

    @override
    def _configure_launcher(self) -> None:
        self._launcher = _CheckFirstLauncher(
            self._check_setup, self.cluster_environment, self.num_processes, self.num_nodes
        )

    @override
    def connect(self, model) -> None:
        self._check_setup(model, model._trainer.datamodule if model._trainer is not None else None)
        super().connect(model)

    def _check_setup(self, model, datamodule=None) -> None:
        """Raise a UserInputError for a setup that cannot work, before any process group exists."""
        schedule = schedule_class(self.schedule)
        if self.microbatches < 1:
            raise UserInputError(f"pipeline microbatches must be at least 1, got {self.microbatches}")
        if self.data_parallel < 1 or self.world_size % self.data_parallel:
            raise UserInputError(
                f"pipeline data_parallel {self.data_parallel} does not divide the trainer's {self.world_size} "
                "process(es) into equal pipelines; set --trainer.devices to data_parallel x processes per pipeline"
            )
        processes = self._pipeline_size
        if not accepts_microbatches(schedule, self.microbatches, processes):
            valid = next(
                count
                for count in itertools.count(self.microbatches)
                if accepts_microbatches(schedule, count, processes)
            )
            raise UserInputError(
                f"pipeline schedule {self.schedule} cannot split a batch into {self.microbatches} micro-batches on "
                f"{processes} processes ({MICROBATCH_RULES[schedule]}); "
                f"set --trainer.strategy.init_args.microbatches {valid}"
            )
        self._check_batch_size(datamodule, schedule, processes)
        stages = model_stages(model, self.strategy_name)
        if (problem := stage_count_problem(schedule, len(stages), processes)) is not None:
            if self.data_parallel > 1:
                problem += f" (processes per pipeline: --trainer.devices / data_parallel {self.data_parallel})"
            raise UserInputError(problem)
        in_stages = {id(param) for stage in stages for param in stage.parameters()}
        outside = [name for name, param in model.named_parameters() if id(param) not in in_stages]
        if outside:
            raise UserInputError(
                f"pipeline trains only parameters inside stages(), but {type(model).__name__} also has {outside[:3]}"
            )
        if getattr(self.precision_plugin, "scaler", None) is not None:
            raise UserInputError("pipeline cannot use a gradient scaler (precision 16-mixed); use bf16-mixed or 32")

    def _check_batch_size(self, datamodule, schedule: type, processes: int) -> None:
        """A batch size (the datamodule's `batch_size` hyper-parameter) that `microbatches` does not divide is refused:
        the run would otherwise split every batch into fewer micro-batches than the one it says it uses."""
        batch_size = getattr(datamodule, "hparams", {}).get("batch_size")
        if not isinstance(batch_size, int) or batch_size % self.microbatches == 0:
            return
        counts = [
            c for c in range(1, batch_size + 1) if not batch_size % c and accepts_microbatches(schedule, c, processes)
        ]
        nearest = min(counts or [1], key=lambda count: abs(count - self.microbatches))
        raise UserInputError(
            f"pipeline microbatches {self.microbatches} does not divide the batch size {batch_size} "
            f"(--data.init_args.batch_size); set --trainer.strategy.init_args.microbatches {nearest}, or a batch size "
            f"that {self.microbatches} divides"
        )

    @override
    def setup(self, trainer) -> None:
        """Keep only this process's stages, then set up as DDP would, minus the DDP wrapper."""
        self.accelerator.setup(trainer)
        module = self.lightning_module
        stages = model_stages(module, self.strategy_name)
        if not self._stage_modules:
            self._parameter_names = [name for name, _ in module.named_parameters()]
            self._state_keys = list(module.state_dict())
        schedule = schedule_class(self.schedule)
        mesh = init_device_mesh(
            self.root_device.type, (self.data_parallel, self._pipeline_size), mesh_dim_names=("data", "pipeline")
        )
        self._data_group, self._pipeline_group = mesh.get_group("data"), mesh.get_group("pipeline")
        self._num_stages = len(stages)
        self._stage_indices = stages_of_process(schedule, self._pipeline_rank, self._pipeline_size, self._num_stages)
        self._stage_modules = [stages[index] for index in self._stage_indices]
        for index, stage in enumerate(stages):
            if index not in self._stage_indices:
                rank = self._global_rank_of(process_of_stage(schedule, index, self._pipeline_size, self._num_stages))
                replace_submodule(module, stage, StageElsewhere(index, f"process {rank}"))
        self.model = self.precision_plugin.convert_module(self.model)
        self.model_to_device()
        if self.compile and not self._compiled:  # the schedules wrap the stages at the first batch of each shape
            self._compiled = apply_compile(self._stage_modules)
            report_compiled("pipeline", self._compiled)
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

    def _microbatch_count(self, batch_size: int, schedule: type) -> int:
        """The largest count up to `microbatches` that divides the batch and the schedule accepts.

        1F1B accepts none below one micro-batch per stage; such a batch runs as GPipe, with the same result (DualPipeV:
        ZBVZeroBubble).
        """
        counts = [c for c in range(min(self.microbatches, batch_size), 0, -1) if batch_size % c == 0]
        count = next((c for c in counts if accepts_microbatches(schedule, c, self._pipeline_size)), counts[0])
        if count != self.microbatches and batch_size not in self._reported_batch_sizes:
            self._reported_batch_sizes.add(batch_size)
            rank_zero_warn(
                f"pipeline: a batch of {batch_size} splits evenly into {count} micro-batches, not {self.microbatches}"
            )
        return count

    def _schedule_for(
        self, inputs: Tensor, training: bool
    ) -> tuple[tuple, PipelineScheduleSingle | PipelineScheduleMulti | None]:
        """One schedule per batch shape (the stages size their buffers once); None: evaluate stage by stage."""
        schedule = schedule_class(self.schedule)
        count = self._microbatch_count(len(inputs), schedule)
        key = (training, count, tuple(inputs.shape), inputs.dtype)
        if not training and schedule in V_SCHEDULES:
            return key, None
        if key not in self._schedules:
            stages = [
                PipelineStage(module, index, self._num_stages, self.root_device, group=self._pipeline_group)
                for index, module in zip(self._stage_indices, self._stage_modules)
            ]
            # A batch too small for the schedule (the last one, say) runs the same placement without its condition.
            if issubclass(schedule, PipelineScheduleSingle) and (
                not training or not accepts_microbatches(schedule, count, self._pipeline_size)
            ):
                schedule = ScheduleGPipe
            elif schedule is ScheduleDualPipeV and not accepts_microbatches(schedule, count, self._pipeline_size):
                schedule = ScheduleZBVZeroBubble
            loss_fn = self.loss_fn if training else None
            self._schedules[key] = (
                schedule(stages[0], count, loss_fn=loss_fn)
                if issubclass(schedule, PipelineScheduleSingle)
                else schedule(stages, count, loss_fn=loss_fn)
            )
        return key, self._schedules[key]

    def _run_pipeline(self, batch, training: bool) -> tuple[Tensor, Tensor | None]:
        """The whole batch's outputs on every process, and (training) the mean micro-batch loss on the last."""
        inputs, targets = inputs_and_targets(batch)
        key, schedule = self._schedule_for(inputs, training)
        first_stage_inputs = (inputs,) if 0 in self._stage_indices else ()
        loss = None
        if training:
            if targets is None:
                raise UserInputError("pipeline training needs batches of (inputs, targets)")
            losses: list[Tensor] = []
            with self._new_gradients_held():
                outputs = schedule.step(
                    *first_stage_inputs,
                    target=targets if self._holds_last_stage else None,
                    losses=losses if self._holds_last_stage else None,
                )
            self._synchronize_replicas()
            if self._holds_last_stage:
                loss = torch.stack(losses).mean().detach()
        elif schedule is None:
            outputs = self._forward_stage_by_stage(inputs)
        else:
            outputs = schedule.step(*first_stage_inputs)
        return self._from_last_stage(
            outputs.detach() if self._holds_last_stage and isinstance(outputs, Tensor) else None, key
        ), loss

    def _forward_stage_by_stage(self, inputs: Tensor) -> Tensor | None:
        """The stages in order on the whole batch, each activation sent to the process of the next stage.

        Evaluation under ZBVZeroBubble and DualPipeV: torch's V-shaped schedules run their backward actions also
        without a loss.
        """
        schedule = schedule_class(self.schedule)
        owners = [
            self._global_rank_of(process_of_stage(schedule, index, self._pipeline_size, self._num_stages))
            for index in range(self._num_stages)
        ]
        activation = inputs
        for index, owner in enumerate(owners):
            sender = owners[index - 1] if index > 0 else owner
            if self.global_rank == sender != owner:
                dist.send_object_list([(activation.shape, activation.dtype)], dst=owner)
                dist.send(activation.contiguous(), dst=owner)
            elif self.global_rank == owner != sender:
                meta = [None]
                dist.recv_object_list(meta, src=sender)
                activation = torch.empty(meta[0][0], dtype=meta[0][1], device=self.root_device)
                dist.recv(activation, src=sender)
            if self.global_rank == owner:
                activation = self._stage_modules[self._stage_indices.index(index)](activation)
        return activation if self._holds_last_stage else None

    def _synchronize_replicas(self) -> None:
        """As DDP does: each stage's gradients averaged over that stage's data-parallel replicas, and its buffers
        (batch-norm running statistics) the first replica's, which the checkpoint keeps."""
        if self.data_parallel == 1:
            return
        for _, grad in self._held_grads:
            if grad is not None:
                dist.all_reduce(grad, group=self._data_group)
                grad.div_(self.data_parallel)
        for module in self._stage_modules:
            for buffer in module.buffers():
                dist.broadcast(buffer, src=self._pipeline_rank, group=self._data_group)  # replica 0's process

    @contextmanager
    def _new_gradients_held(self) -> Iterator[None]:
        """Lightning zeroes gradients after training_step and before backward: keep the schedule's until then."""
        params = [param for module in self._stage_modules for param in module.parameters() if param.requires_grad]
        earlier = [param.grad for param in params]
        for param in params:
            param.grad = None
        try:
            yield
        finally:
            self._held_grads = [(param, param.grad) for param in params]
            for param, grad in zip(params, earlier):
                param.grad = grad

    def _from_last_stage(self, tensor: Tensor | None, key) -> Tensor:
        """Broadcast a tensor the last stage's process holds; its shape travels once per key."""
        last = self._global_rank_of(self._last_stage_rank)
        if key not in self._output_meta:
            meta = [(tensor.shape, tensor.dtype) if tensor is not None else None]
            dist.broadcast_object_list(meta, src=last, group=self._pipeline_group)
            self._output_meta[key] = meta[0]
        if self._output_meta[key] is None:
            raise UserInputError("pipeline needs the last stage to return a single tensor")
        shape, dtype = self._output_meta[key]
        buffer = tensor.contiguous() if tensor is not None else torch.empty(shape, dtype=dtype, device=self.root_device)
        dist.broadcast(buffer, src=last, group=self._pipeline_group)
        return buffer

    @override
    def training_step(self, *args, **kwargs):
        batch, module = args[0], self.lightning_module
        with self.precision_plugin.train_step_context():
            outputs, pipeline_loss = self._run_pipeline(batch, training=True)
            with forward_returning(module, inputs_and_targets(batch)[0], outputs):
                step_output = module.training_step(*args, **kwargs)
        if not self._loss_fn_checked:
            self._check_loss_fn(pipeline_loss, step_output)
        return step_output

    def _check_loss_fn(self, pipeline_loss: Tensor | None, step_output) -> None:
        """The gradients come from loss_fn, the logged loss from training_step: they must agree."""
        self._loss_fn_checked = True
        module_loss = step_output.get("loss") if isinstance(step_output, Mapping) else step_output
        pipeline_loss = self._from_last_stage(pipeline_loss, "loss")
        if isinstance(module_loss, Tensor) and not torch.allclose(
            pipeline_loss, module_loss.detach().to(pipeline_loss), rtol=LOSS_FN_TOLERANCE, atol=1e-6
        ):
            raise UserInputError(
                f"the pipeline's loss_fn gives {pipeline_loss.item():.6f} but training_step computes "
                f"{module_loss.item():.6f} "
                "from the same outputs; set the strategy's loss_fn to the loss training_step uses"
            )

    @override
    def backward(self, closure_loss: Tensor, optimizer, *args, **kwargs) -> Tensor:
        """The schedule already back-propagated; hand its gradients over as loss.backward() would have."""
        module = self.lightning_module
        closure_loss = self.precision_plugin.pre_backward(closure_loss, module)
        for param, grad in self._held_grads:
            if grad is not None:
                param.grad = grad if param.grad is None else param.grad + grad
        self._held_grads = []
        return self.precision_plugin.post_backward(closure_loss, module)

    def _evaluation_step(self, step_name: str, context, *args, **kwargs):
        batch, module = args[0], self.lightning_module
        with context():
            outputs, _ = self._run_pipeline(batch, training=False)
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
        merged = {key: value for part in parts for key, value in part.items()}
        ordered = {key: merged.pop(key) for key in self._state_keys if key in merged}
        return {**ordered, **merged}

    @override
    def optimizer_state(self, optimizer) -> dict:
        """Every stage's optimizer state, numbered as the single-device optimizer numbers its parameters.

        Before the first step there is no state to carry, and torch's helper would create it with a
        zero-gradient step that Adam counts: only the parameter groups are saved then.
        """
        if optimizer.state:
            by_name = get_optimizer_state_dict(self.lightning_module, optimizer, options=BY_NAME)
        else:
            names = {id(param): name for name, param in self.lightning_module.named_parameters()}
            groups = [
                {**_hyperparameters(group), "params": [names[id(param)] for param in group["params"]]}
                for group in optimizer.param_groups
            ]
            by_name = {"state": {}, "param_groups": groups}
        parts = self._gather_on_first_process(move_data_to_device(by_name, "cpu"))
        if parts is None:
            return {}
        return _numbered(_merged(parts), self._parameter_names)

    @override
    def load_optimizer_state_dict(self, checkpoint) -> None:
        """Each process takes its own parameters' entries, by name, from the single-device layout."""
        for optimizer, state in zip(self.optimizers, checkpoint["optimizer_states"]):
            if not state["state"]:  # saved before the first step: see optimizer_state
                for group, saved in zip(optimizer.param_groups, state["param_groups"]):
                    group.update(_hyperparameters(saved))
                continue
            set_optimizer_state_dict(
                self.lightning_module, optimizer, _named(state, self._parameter_names), options=BY_NAME
            )


class _CheckFirstLauncher(_SubprocessScriptLauncher):
    """Checks the model before starting the other processes, so a bad setup fails once, in one line."""

    def __init__(self, check: Callable[[LightningModule, LightningDataModule | None], None], *args):
        super().__init__(*args)
        self._check = check

    @override
    def launch(self, function, *args, trainer=None, **kwargs):
        if args and isinstance(args[0], LightningModule):
            datamodule = next((arg for arg in (*args, *kwargs.values()) if isinstance(arg, LightningDataModule)), None)
            self._check(args[0], datamodule)
        return super().launch(function, *args, trainer=trainer, **kwargs)


def _hyperparameters(param_group: dict) -> dict:
    return {key: value for key, value in param_group.items() if key not in ("params", "param_names")}


def _merged(parts: list[dict]) -> dict:
    """One optimizer state by parameter name from every process's part of it (the same groups on each)."""
    return {
        "state": {name: value for part in parts for name, value in part["state"].items()},
        "param_groups": [
            {
                **_hyperparameters(group),
                "params": [name for part in parts for name in part["param_groups"][index]["params"]],
            }
            for index, group in enumerate(parts[0]["param_groups"])
        ],
    }


def _numbered(by_name: dict, names: list[str]) -> dict:
    """A state keyed by parameter name, keyed instead by each parameter's position in the whole model."""
    position = {name: index for index, name in enumerate(names)}
    return {
        "state": {position[name]: by_name["state"][name] for name in names if name in by_name["state"]},
        "param_groups": [
            {**group, "params": sorted(position[name] for name in group["params"])} for group in by_name["param_groups"]
        ],
    }


def _named(numbered: dict, names: list[str]) -> dict:
    """The inverse of `_numbered`: the form torch's set_optimizer_state_dict picks each process's entries from."""
    return {
        "state": {names[index]: value for index, value in numbered["state"].items()},
        "param_groups": [
            {**group, "params": [names[index] for index in group["params"]]} for group in numbered["param_groups"]
        ],
    }
