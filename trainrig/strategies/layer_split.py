"""`--trainer.strategy layer_split`: the reference's model parallelism, one process, stage i on device i.

Only one stage computes at a time (no micro-batching): this fits a model that is too big for
one device, it does not make training faster. `pipeline` is the version that overlaps stages.
"""

from functools import partial

import torch
from lightning.fabric.utilities.apply_func import move_data_to_device
from lightning.pytorch.accelerators import CPUAccelerator, CUDAAccelerator
from lightning.pytorch.strategies import SingleDeviceStrategy
from lightning.pytorch.utilities import rank_zero_info
from torch import nn
from typing_extensions import override

from trainrig.errors import UserInputError
from trainrig.strategies.compile import apply_compile, report_compiled
from trainrig.strategies.stages import model_stages, stages_set_aside


def existing_device(name: str) -> torch.device:
    """`name` as a device, or a UserInputError when this machine does not have it."""
    try:
        device = torch.device(name)
    except RuntimeError as error:
        raise UserInputError(
            f"layer_split device {name!r} is not a device name (expected e.g. cpu, cuda:0, cuda:1)"
        ) from error
    if device.type == "cuda":
        count = torch.cuda.device_count()
        index = 0 if device.index is None else device.index
        if index >= count:
            raise UserInputError(
                f"layer_split device {name!r} does not exist: this machine has {count} CUDA device(s); list "
                "existing devices or leave devices unset"
            )
    elif device.type == "mps" and not torch.backends.mps.is_available():
        raise UserInputError(f"layer_split device {name!r} does not exist on this machine")
    elif device.type not in ("cpu", "cuda", "mps"):
        raise UserInputError(f"layer_split does not support device type {device.type!r}; use cpu, cuda or mps")
    return device


def _inputs_to(device: torch.device, module: nn.Module, args: tuple, kwargs: dict):
    return move_data_to_device(args, device), move_data_to_device(kwargs, device)


class LayerSplitStrategy(SingleDeviceStrategy):
    """Places stage i of the model on `devices[i]` and moves activations between them in forward.

    Everything that is not a stage (metrics, the loss) sits on the last stage's device, which is
    also where Lightning puts each batch: labels meet the output there, and the first stage
    pulls its input over to its own device. Lightning's own whole-module move is replaced.
    """

    strategy_name = "layer_split"
    strategy_description = "one process, stage i of the model on device i (the reference's model parallelism)"

    def __init__(self, devices: list[str] | None = None, compile: bool = False):
        """
        Args:
            devices: one device per stage, e.g. [cuda:0, cuda:1]. Unset: one GPU per stage when
                the trainer runs on CUDA, otherwise every stage on the cpu.
            compile: `torch.compile` each stage once it is on its device (trainrig/strategies/compile.py).
        """
        super().__init__(device="cpu")
        self.devices = devices
        self.compile = compile
        self._compiled: list[nn.Module] = []
        self.stage_devices: list[torch.device] = []
        self._stages: list[nn.Module] = []
        self._hooks = []

    def layout(self) -> dict:
        """What a run's checkpoints record of this split (trainrig/strategies/record.py)."""
        return {"devices": [str(device) for device in self.stage_devices], "compiled": bool(self._compiled)}

    @override
    def connect(self, model) -> None:
        """Check the devices here rather than in __init__, where the CLI would bury the message in a traceback."""
        stages = model_stages(model, self.strategy_name)
        devices = (
            [existing_device(name) for name in self.devices] if self.devices else self._default_devices(len(stages))
        )
        if len(stages) != len(devices):
            raise UserInputError(
                f"layer_split got {len(devices)} device(s) {[str(d) for d in devices]} for a model with "
                f"{len(stages)} stages; "
                "list one device per stage or change the model's number of stages"
            )
        accelerator_type = (
            "cuda"
            if isinstance(self.accelerator, CUDAAccelerator)
            else "cpu"
            if isinstance(self.accelerator, CPUAccelerator)
            else None
        )
        if accelerator_type is not None and devices[-1].type != accelerator_type:
            raise UserInputError(
                f"layer_split puts the last stage (and the loss) on {devices[-1]}, but the trainer runs on "
                f"{accelerator_type}; "
                f"make the last device a {accelerator_type} device or set --trainer.accelerator {devices[-1].type}"
            )
        self._stages, self.stage_devices = stages, devices
        self._root_device = devices[-1]
        super().connect(model)

    def _default_devices(self, num_stages: int) -> list[torch.device]:
        if isinstance(self.accelerator, CUDAAccelerator):
            available = torch.cuda.device_count()
            if available < num_stages:
                raise UserInputError(
                    f"layer_split puts each of the model's {num_stages} stages on its own GPU by default, but "
                    f"this machine has {available}; "
                    "list the devices in the strategy's devices (e.g. [cuda:0, cuda:0]) or change the "
                    "model's number of stages"
                )
            return [torch.device("cuda", index) for index in range(num_stages)]
        if isinstance(self.accelerator, CPUAccelerator):
            return [torch.device("cpu")] * num_stages
        raise UserInputError(
            f"layer_split has no default placement for {type(self.accelerator).__name__}; list the strategy's devices"
        )

    @override
    def model_to_device(self) -> None:
        module = self.lightning_module
        with stages_set_aside(module, self._stages):
            module.to(self.root_device)
        for stage, device in zip(self._stages, self.stage_devices):
            stage.to(device)
            self._hooks.append(stage.register_forward_pre_hook(partial(_inputs_to, device), with_kwargs=True))
        rank_zero_info(
            "layer_split: " + ", ".join(f"stage {i} on {device}" for i, device in enumerate(self.stage_devices))
        )
        if self.compile and not self._compiled:
            self._compiled = apply_compile(self._stages)
            report_compiled("layer_split", self._compiled)

    @override
    def load_optimizer_state_dict(self, checkpoint) -> None:
        """torch puts each state tensor on its parameter's device; Lightning's default would pull all onto one."""
        for optimizer, state in zip(self.optimizers, checkpoint["optimizer_states"]):
            optimizer.load_state_dict(state)

    @override
    def teardown(self) -> None:
        for hook in self._hooks:
            hook.remove()
        self._hooks.clear()
        super().teardown()
