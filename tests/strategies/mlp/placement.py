"""Where a run put each stage of a staged model, and where each stage's input was sent: read from the run itself.

`StagePlacement` is a callback a test adds by class path; its records stand beside the run in `directory`:
`stages.json` (each stage's input shapes and devices, its parameters' shapes and devices, from forward pre-hooks
registered after the strategy's own, on the first training batch) and `moves.json` (each `Tensor.to` the run asked
for during that batch and the strategy's set-up: the tensor's shape and the device asked for, which keeps the index
a CPU tensor drops, so `cpu:1` tells a move to a second stand-in device apart from a move to the first).
"""

import json
from pathlib import Path

import torch
from lightning.pytorch import Callback
from torch.overrides import TorchFunctionMode

__all__ = ["StagePlacement", "placement_of"]


class _Moves(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.moves: list[tuple[list[int], str]] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.Tensor.to:
            asked = [value for value in (*args[1:], kwargs.get("device")) if isinstance(value, torch.device | str)]
            if asked:
                self.moves.append((list(args[0].shape), str(torch.device(asked[0]))))
        return func(*args, **kwargs)


class StagePlacement(Callback):
    def __init__(self, directory: str):
        self.directory = Path(directory)
        self._moves = _Moves()
        self._stages: list[dict] = []
        self._hooks = []

    def setup(self, trainer, pl_module, stage) -> None:
        self._moves.__enter__()  # before the strategy moves the model: Lightning sets up callbacks first

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if batch_idx != 0:
            return
        for stage in pl_module.stages():
            record = {"parameters": [(list(p.shape), str(p.device)) for p in stage.parameters()], "inputs": []}
            self._stages.append(record)
            self._hooks.append(stage.register_forward_pre_hook(_recorder(record)))

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if batch_idx != 0:
            return
        self._moves.__exit__(None, None, None)
        for hook in self._hooks:
            hook.remove()
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "stages.json").write_text(json.dumps(self._stages))
        (self.directory / "moves.json").write_text(json.dumps(self._moves.moves))


def _recorder(record: dict):
    def hook(module, inputs):
        record["inputs"] += [(list(x.shape), str(x.device)) for x in inputs if torch.is_tensor(x)]

    return hook


def placement_of(directory: Path) -> tuple[list[dict], list[tuple[list[int], str]]]:
    """The stages and moves a run with `StagePlacement(directory)` recorded."""
    stages = json.loads((directory / "stages.json").read_text())
    moves = [(shape, device) for shape, device in json.loads((directory / "moves.json").read_text())]
    return stages, moves
