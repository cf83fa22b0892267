"""How one batch runs through a pipeline, on every process of it.

1. the schedule runs forward and backward over the micro-batches; each process computes and keeps gradients for its
   own stages only (`PipelineSteps.run`);
2. the process with the last stage sends the whole batch's outputs to every process;
3. the LightningModule's own step runs with `self(inputs)` answering those outputs (`forward_returning`), so it logs
   the same metrics as on one device.
The gradients of step 1 are handed over in the strategy's `backward`, after Lightning's `zero_grad`
(`PipelineSteps.hand_over_gradients`).
"""

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

import torch
import torch.distributed as dist
from lightning.pytorch.utilities import rank_zero_warn
from torch import Tensor, nn
from torch.distributed.pipelining import PipelineStage, ScheduleDualPipeV, ScheduleGPipe, ScheduleZBVZeroBubble
from torch.distributed.pipelining.schedules import PipelineScheduleMulti, PipelineScheduleSingle

from trainrig.errors import UserInputError
from trainrig.strategies.pipeline_schedules import V_SCHEDULES, accepts_microbatches

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


class PipelineSteps:
    """Runs batches through this process's stages, with one schedule per batch shape (the stages size their buffers
    once), for one setup of the strategy."""

    def __init__(
        self,
        schedule: type[PipelineScheduleSingle | PipelineScheduleMulti],
        microbatches: int,
        loss_fn: Callable[[Tensor, Tensor], Tensor],
        stages: dict[int, nn.Module],
        owners: list[int],
        global_rank: int,
        device: torch.device,
        pipeline_group: dist.ProcessGroup,
        data_group: dist.ProcessGroup,
    ):
        """
        Args:
            schedule, microbatches, loss_fn: the strategy's options, the schedule resolved.
            stages: this process's stages by their index in the model.
            owners: the global rank running each stage of the model, in this process's pipeline.
            global_rank, device: this process's.
            pipeline_group, data_group: the processes of this pipeline, and this stage's data-parallel replicas.
        """
        self._schedule = schedule
        self._microbatches = microbatches
        self._loss_fn = loss_fn
        self._stages = stages
        self._owners = owners
        self._global_rank = global_rank
        self._device = device
        self._pipeline_group = pipeline_group
        self._data_group = data_group
        self._schedules: dict[tuple, PipelineScheduleSingle | PipelineScheduleMulti] = {}
        self._output_meta: dict[object, tuple[torch.Size, torch.dtype] | None] = {}
        self._held_grads: list[tuple[nn.Parameter, Tensor | None]] = []
        self._loss_fn_checked = False
        self._reported_batch_sizes: set[int] = set()

    @property
    def _holds_last_stage(self) -> bool:
        return len(self._owners) - 1 in self._stages

    def _microbatch_count(self, batch_size: int) -> int:
        """The largest count up to `microbatches` that divides the batch and the schedule accepts.

        1F1B accepts none below one micro-batch per stage; such a batch runs as GPipe, with the same result (DualPipeV:
        ZBVZeroBubble).
        """
        pipeline_size = dist.get_world_size(self._pipeline_group)
        counts = [c for c in range(min(self._microbatches, batch_size), 0, -1) if batch_size % c == 0]
        count = next((c for c in counts if accepts_microbatches(self._schedule, c, pipeline_size)), counts[0])
        if count != self._microbatches and batch_size not in self._reported_batch_sizes:
            self._reported_batch_sizes.add(batch_size)
            rank_zero_warn(
                f"pipeline: a batch of {batch_size} splits evenly into {count} micro-batches, not {self._microbatches}"
            )
        return count

    def _schedule_for(
        self, inputs: Tensor, training: bool
    ) -> tuple[tuple, PipelineScheduleSingle | PipelineScheduleMulti | None]:
        """The schedule for this batch's shape; None: evaluate stage by stage."""
        count = self._microbatch_count(len(inputs))
        key = (training, count, tuple(inputs.shape), inputs.dtype)
        if not training and self._schedule in V_SCHEDULES:
            return key, None
        if key not in self._schedules:
            num_stages = len(self._owners)
            stages = [
                PipelineStage(module, index, num_stages, self._device, group=self._pipeline_group)
                for index, module in self._stages.items()
            ]
            # A batch too small for the schedule (the last one, say) runs the same placement without its condition.
            schedule = self._schedule
            pipeline_size = dist.get_world_size(self._pipeline_group)
            if issubclass(schedule, PipelineScheduleSingle) and (
                not training or not accepts_microbatches(schedule, count, pipeline_size)
            ):
                schedule = ScheduleGPipe
            elif schedule is ScheduleDualPipeV and not accepts_microbatches(schedule, count, pipeline_size):
                schedule = ScheduleZBVZeroBubble
            loss_fn = self._loss_fn if training else None
            self._schedules[key] = (
                schedule(stages[0], count, loss_fn=loss_fn)
                if issubclass(schedule, PipelineScheduleSingle)
                else schedule(stages, count, loss_fn=loss_fn)
            )
        return key, self._schedules[key]

    def run(self, batch, training: bool) -> tuple[Tensor, Tensor | None]:
        """The whole batch's outputs on every process, and (training) the mean micro-batch loss on the last."""
        inputs, targets = inputs_and_targets(batch)
        key, schedule = self._schedule_for(inputs, training)
        first_stage_inputs = (inputs,) if 0 in self._stages else ()
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
        activation = inputs
        for index, owner in enumerate(self._owners):
            sender = self._owners[index - 1] if index > 0 else owner
            if self._global_rank == sender != owner:
                dist.send_object_list([(activation.shape, activation.dtype)], dst=owner)
                dist.send(activation.contiguous(), dst=owner)
            elif self._global_rank == owner != sender:
                meta = [None]
                dist.recv_object_list(meta, src=sender)
                activation = torch.empty(meta[0][0], dtype=meta[0][1], device=self._device)
                dist.recv(activation, src=sender)
            if self._global_rank == owner:
                activation = self._stages[index](activation)
        return activation if self._holds_last_stage else None

    def _synchronize_replicas(self) -> None:
        """As DDP does: each stage's gradients averaged over that stage's data-parallel replicas, and its buffers
        (batch-norm running statistics) the first replica's, which the checkpoint keeps."""
        replicas = dist.get_world_size(self._data_group)
        if replicas == 1:
            return
        for _, grad in self._held_grads:
            if grad is not None:
                dist.all_reduce(grad, group=self._data_group)
                grad.div_(replicas)
        first_replica = dist.get_global_rank(self._data_group, 0)
        for module in self._stages.values():
            for buffer in module.buffers():
                dist.broadcast(buffer, src=first_replica, group=self._data_group)

    @contextmanager
    def _new_gradients_held(self) -> Iterator[None]:
        """Lightning zeroes gradients after training_step and before backward: keep the schedule's until then."""
        params = [param for module in self._stages.values() for param in module.parameters() if param.requires_grad]
        earlier = [param.grad for param in params]
        for param in params:
            param.grad = None
        try:
            yield
        finally:
            self._held_grads = [(param, param.grad) for param in params]
            for param, grad in zip(params, earlier):
                param.grad = grad

    def hand_over_gradients(self) -> None:
        """Add the gradients the schedule computed to the parameters', as loss.backward() would have."""
        for param, grad in self._held_grads:
            if grad is not None:
                param.grad = grad if param.grad is None else param.grad + grad
        self._held_grads = []

    def _from_last_stage(self, tensor: Tensor | None, key) -> Tensor:
        """Broadcast a tensor the last stage's process holds; its shape travels once per key."""
        last = self._owners[-1]
        if key not in self._output_meta:
            meta = [(tensor.shape, tensor.dtype) if tensor is not None else None]
            dist.broadcast_object_list(meta, src=last, group=self._pipeline_group)
            self._output_meta[key] = meta[0]
        if self._output_meta[key] is None:
            raise UserInputError("pipeline needs the last stage to return a single tensor")
        shape, dtype = self._output_meta[key]
        buffer = tensor.contiguous() if tensor is not None else torch.empty(shape, dtype=dtype, device=self._device)
        dist.broadcast(buffer, src=last, group=self._pipeline_group)
        return buffer

    def check_loss_fn_once(self, pipeline_loss: Tensor | None, step_output) -> None:
        """The gradients come from loss_fn, the logged loss from training_step: they must agree (on the first step)."""
        if self._loss_fn_checked:
            return
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
