"""`--trainer.strategy pipeline`: one process per stage, micro-batches flowing through them (GPipe or 1F1B).

Built on torch.distributed.pipelining over the process group Lightning's DDP launch creates
(gloo on CPU, nccl on GPU). While stage 2 works on micro-batch 1, stage 1 already works on
micro-batch 2, so K stages are idle only a fraction (K-1)/(M+K-1) of the time for M micro-batches.

How a step runs, on every process:
1. the schedule runs forward and backward over the micro-batches; each process computes and
   keeps gradients for its own stage only;
2. the last stage sends the whole batch's outputs to every process;
3. the LightningModule's own `training_step` (or validation/test/predict step) runs with
   `self(inputs)` answering those outputs, so it logs the same metrics as on one device.
The gradients of step 1 are handed over in `backward`, after Lightning's `zero_grad`.

Convention the LightningModule follows (the examples here do): a batch is `(inputs, targets, ...)`
or just `inputs`, the steps call `self(inputs)` once, and `loss_fn(outputs, targets)` is the loss
`training_step` computes (checked on the first step).
"""

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import timedelta

import torch
import torch.distributed as dist
from lightning.fabric.plugins.collectives.torch_collective import default_pg_timeout
from lightning.fabric.utilities.apply_func import move_data_to_device
from lightning.fabric.utilities.optimizer import _optimizers_to_device
from lightning.pytorch import LightningModule
from lightning.pytorch.strategies import DDPStrategy
from lightning.pytorch.strategies.launchers import _SubprocessScriptLauncher
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities import rank_zero_info, rank_zero_warn
from torch import Tensor, nn
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
from torch.nn import functional as F

from errors import UserInputError
from strategies.stages import StageElsewhere, model_stages, replace_submodule

SCHEDULES = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}
# Relative difference above which loss_fn and training_step disagree for real, not by float rounding.
LOSS_FN_TOLERANCE = 1e-3


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
    """Stage i of the model trains in process i; a micro-batch schedule keeps the stages busy together."""

    strategy_name = "pipeline"

    def __init__(
        self,
        schedule: str = "GPipe",
        microbatches: int = 4,
        loss_fn: Callable[[Tensor, Tensor], Tensor] = F.cross_entropy,
        process_group_backend: str | None = None,
        timeout: timedelta = default_pg_timeout,
    ):
        """
        Args:
            schedule: GPipe (all forwards, then all backwards) or 1F1B (alternates once the pipe is
                full, so fewer micro-batches' activations are alive at a time). Same result.
            microbatches: micro-batches per batch. More means a smaller idle fraction but smaller
                matrix products; a batch that does not divide evenly uses the largest divisor below.
            loss_fn: the loss of one micro-batch, `loss_fn(outputs, targets)`; must equal the loss the
                LightningModule's training_step computes (checked on the first step).
            process_group_backend: gloo or nccl; unset picks gloo on CPU and nccl on GPUs.
            timeout: how long the rendezvous and every send, receive or collective wait for the other stages.
        """
        super().__init__(process_group_backend=process_group_backend, timeout=timeout, start_method="popen")
        self.schedule = schedule
        self.microbatches = microbatches
        self.loss_fn = loss_fn
        self._stage_module: nn.Module | None = None
        self._parameter_names: list[str] = []
        self._state_keys: list[str] = []
        self._schedules: dict[tuple, ScheduleGPipe | Schedule1F1B] = {}
        self._output_meta: dict[object, tuple[torch.Size, torch.dtype] | None] = {}
        self._held_grads: list[tuple[nn.Parameter, Tensor | None]] = []
        self._loss_fn_checked = False
        self._reported_batch_sizes: set[int] = set()

    @property
    def distributed_sampler_kwargs(self) -> dict:
        """Every stage must see the same batch, so the sampler acts as if there were one process."""
        return {"num_replicas": 1, "rank": 0}

    @property
    def is_last_stage(self) -> bool:
        return self.global_rank == self.world_size - 1

    def _configure_launcher(self) -> None:
        self._launcher = _CheckFirstLauncher(
            self._check_setup, self.cluster_environment, self.num_processes, self.num_nodes
        )

    def connect(self, model) -> None:
        self._check_setup(model)
        super().connect(model)

    def _check_setup(self, model) -> None:
        """Raise a UserInputError for a setup that cannot work, before any process group exists."""
        if self.schedule.lower() not in SCHEDULES:
            raise UserInputError(f"pipeline schedule {self.schedule!r} is unknown; choose GPipe or 1F1B")
        if self.microbatches < 1:
            raise UserInputError(f"pipeline microbatches must be at least 1, got {self.microbatches}")
        stages = model_stages(model, self.strategy_name)
        if len(stages) != self.world_size:
            fix = f"set --trainer.devices {len(stages)}"
            fix += f" (under the Dask launcher --dask.n_workers {len(stages)})"  # cookiecutter: only with dask
            raise UserInputError(
                f"pipeline runs one process per stage, but the model has {len(stages)} stages and the trainer starts "
                f"{self.world_size} process(es); {fix} or change the model's number of stages"
            )
        in_stages = {id(param) for stage in stages for param in stage.parameters()}
        outside = [name for name, param in model.named_parameters() if id(param) not in in_stages]
        if outside:
            raise UserInputError(
                f"pipeline trains only parameters inside stages(), but {type(model).__name__} also has {outside[:3]}"
            )
        if getattr(self.precision_plugin, "scaler", None) is not None:
            raise UserInputError("pipeline cannot use a gradient scaler (precision 16-mixed); use bf16-mixed or 32")

    def setup(self, trainer) -> None:
        """Keep only this process's stage, then set up as DDP would, minus the DDP wrapper."""
        self.accelerator.setup(trainer)
        module = self.lightning_module
        stages = model_stages(module, self.strategy_name)
        if self._stage_module is None:
            self._parameter_names = [name for name, _ in module.named_parameters()]
            self._state_keys = list(module.state_dict())
        self._stage_module = stages[self.global_rank]
        for index, stage in enumerate(stages):
            if index != self.global_rank:
                replace_submodule(module, stage, StageElsewhere(index, f"process {index}"))
        self.model = self.precision_plugin.convert_module(self.model)
        self.model_to_device()
        fitting = trainer.state.fn == TrainerFn.FITTING
        if fitting:
            self.setup_optimizers(trainer)
        self.setup_precision_plugin()
        if fitting:
            _optimizers_to_device(self.optimizers, self.root_device)
        rank_zero_info(
            f"pipeline: {self.world_size} stages, {self.schedule}, {self.microbatches} micro-batches per batch"
        )

    def _microbatch_count(self, batch_size: int) -> int:
        count = next(c for c in range(min(self.microbatches, batch_size), 0, -1) if batch_size % c == 0)
        if count != self.microbatches and batch_size not in self._reported_batch_sizes:
            self._reported_batch_sizes.add(batch_size)
            rank_zero_warn(
                f"pipeline: a batch of {batch_size} splits evenly into {count} micro-batches, not {self.microbatches}"
            )
        return count

    def _schedule_for(self, inputs: Tensor, training: bool) -> tuple[tuple, ScheduleGPipe | Schedule1F1B]:
        """One schedule per batch shape: the stages size their send and receive buffers once."""
        count = self._microbatch_count(len(inputs))
        key = (training, count, tuple(inputs.shape), inputs.dtype)
        if key not in self._schedules:
            stage = PipelineStage(self._stage_module, self.global_rank, self.world_size, self.root_device)
            if not training:
                self._schedules[key] = ScheduleGPipe(stage, count)
            else:
                # 1F1B needs at least one micro-batch per stage; with fewer it is GPipe anyway.
                schedule_class = SCHEDULES[self.schedule.lower()] if count >= self.world_size else ScheduleGPipe
                self._schedules[key] = schedule_class(stage, count, loss_fn=self.loss_fn)
        return key, self._schedules[key]

    def _run_pipeline(self, batch, training: bool) -> tuple[Tensor, Tensor | None]:
        """The whole batch's outputs on every process, and (training) the mean micro-batch loss on the last."""
        inputs, targets = inputs_and_targets(batch)
        key, schedule = self._schedule_for(inputs, training)
        first_stage_inputs = (inputs,) if self.global_rank == 0 else ()
        loss = None
        if training:
            if targets is None:
                raise UserInputError("pipeline training needs batches of (inputs, targets)")
            losses: list[Tensor] = []
            with self._new_gradients_held():
                outputs = schedule.step(
                    *first_stage_inputs,
                    target=targets if self.is_last_stage else None,
                    losses=losses if self.is_last_stage else None,
                )
            if self.is_last_stage:
                loss = torch.stack(losses).mean().detach()
        else:
            outputs = schedule.step(*first_stage_inputs)
        return self._from_last_stage(
            outputs.detach() if self.is_last_stage and isinstance(outputs, Tensor) else None, key
        ), loss

    @contextmanager
    def _new_gradients_held(self) -> Iterator[None]:
        """Lightning zeroes gradients after training_step and before backward: keep the schedule's until then."""
        params = [param for param in self._stage_module.parameters() if param.requires_grad]
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
        """Broadcast a tensor the last stage holds; its shape travels once per key."""
        last = self.world_size - 1
        if key not in self._output_meta:
            meta = [(tensor.shape, tensor.dtype) if tensor is not None else None]
            dist.broadcast_object_list(meta, src=last)
            self._output_meta[key] = meta[0]
        if self._output_meta[key] is None:
            raise UserInputError("pipeline needs the last stage to return a single tensor")
        shape, dtype = self._output_meta[key]
        buffer = tensor.contiguous() if tensor is not None else torch.empty(shape, dtype=dtype, device=self.root_device)
        dist.broadcast(buffer, src=last)
        return buffer

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

    def validation_step(self, *args, **kwargs):
        return self._evaluation_step("validation_step", self.precision_plugin.val_step_context, *args, **kwargs)

    def test_step(self, *args, **kwargs):
        return self._evaluation_step("test_step", self.precision_plugin.test_step_context, *args, **kwargs)

    def predict_step(self, *args, **kwargs):
        return self._evaluation_step("predict_step", self.precision_plugin.predict_step_context, *args, **kwargs)

    def _gather_on_first_process(self, part: dict) -> list[dict] | None:
        parts = [None] * self.world_size if self.global_rank == 0 else None
        dist.gather_object(part, parts, dst=0)
        return parts

    def lightning_module_state_dict(self) -> dict[str, Tensor]:
        """Every stage's weights, in the single-device order, so any strategy can load the checkpoint."""
        local = move_data_to_device(self.lightning_module.state_dict(), "cpu")
        parts = self._gather_on_first_process(local)
        if parts is None:
            return local
        merged = {key: value for part in parts for key, value in part.items()}
        ordered = {key: merged.pop(key) for key in self._state_keys if key in merged}
        return {**ordered, **merged}

    def optimizer_state(self, optimizer) -> dict:
        """Every stage's optimizer state, numbered as the single-device optimizer numbers its parameters."""
        optimizer = getattr(optimizer, "_optimizer", optimizer)
        names = {id(param): name for name, param in self.lightning_module.named_parameters()}
        local_names = [names[id(param)] for group in optimizer.param_groups for param in group["params"]]
        state = optimizer.state_dict()
        part = {
            "state": {local_names[index]: move_data_to_device(value, "cpu") for index, value in state["state"].items()},
            "param_groups": [
                {**_hyperparameters(group), "params": [local_names[index] for index in group["params"]]}
                for group in state["param_groups"]
            ],
        }
        parts = self._gather_on_first_process(part)
        if parts is None:
            return {}
        position = {name: index for index, name in enumerate(self._parameter_names)}
        groups = [
            {
                **group,
                "params": sorted(
                    position[name] for stage_part in parts for name in stage_part["param_groups"][index]["params"]
                ),
            }
            for index, group in enumerate(parts[0]["param_groups"])
        ]
        merged_state = {position[name]: value for stage_part in parts for name, value in stage_part["state"].items()}
        return {"state": dict(sorted(merged_state.items())), "param_groups": groups}

    def load_optimizer_state_dict(self, checkpoint) -> None:
        """Pick this stage's entries out of a full (single-device numbered) optimizer state."""
        position = {name: index for index, name in enumerate(self._parameter_names)}
        names = {id(param): name for name, param in self.lightning_module.named_parameters()}
        for optimizer, full in zip(self.optimizers, checkpoint["optimizer_states"]):
            local_state, local_groups, local_index = {}, [], 0
            for group, full_group in zip(optimizer.param_groups, full["param_groups"]):
                indices = []
                for param in group["params"]:
                    full_index = position[names[id(param)]]
                    if full_index in full["state"]:
                        local_state[local_index] = full["state"][full_index]
                    indices.append(local_index)
                    local_index += 1
                local_groups.append({**_hyperparameters(full_group), "params": indices})
            optimizer.load_state_dict({"state": local_state, "param_groups": local_groups})


class _CheckFirstLauncher(_SubprocessScriptLauncher):
    """Checks the model before starting the other processes, so a bad setup fails once, in one line."""

    def __init__(self, check: Callable[[LightningModule], None], *args):
        super().__init__(*args)
        self._check = check

    def launch(self, function, *args, trainer=None, **kwargs):
        if args and isinstance(args[0], LightningModule):
            self._check(args[0])
        return super().launch(function, *args, trainer=trainer, **kwargs)


def _hyperparameters(param_group: dict) -> dict:
    return {key: value for key, value in param_group.items() if key not in ("params", "param_names")}
