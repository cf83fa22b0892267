"""What the fsdp2 strategy needs from a model, and the techniques it applies, one `apply_*` function each.

The model lists its sharding units (`ShardedModel`, implemented without importing it) and, for tensor parallelism,
which linear layers split by columns and which by rows; it never sees a device mesh or a process group. The order
in which `FSDP2Strategy.setup` calls these functions is the one torchtitan uses: tensor parallel, activation
checkpointing, compile (`trainrig.strategies.compile.apply_compile`, where every strategy's order is explained), then
`fully_shard`.
"""

from typing import Protocol, runtime_checkable

import torch
from torch import nn

from trainrig.errors import UserInputError

# The styles a `tensor_parallel_plan()` may name, as torch.distributed.tensor.parallel builds them.
TENSOR_PARALLEL_STYLES = ("colwise", "rowwise")


@runtime_checkable
class ShardedModel(Protocol):
    """A model whose parameters can be sharded block by block."""

    def sharding_units(self) -> list[nn.Module]:
        """Submodules each gathered whole just before they compute and freed after: the blocks of the network.
        Parameters in no unit (a stem, the loss) belong to the root unit."""
        ...


@runtime_checkable
class TensorParallelModel(Protocol):
    """A model that says how its linear layers split across the tensor-parallel processes."""

    def tensor_parallel_plan(self) -> dict[str, str]:
        """{submodule name: "colwise" or "rowwise"}: a column-wise linear's output stays split over the processes,
        and the row-wise linear after it takes that split input and sums the result (Megatron's pairing)."""
        ...


def model_sharding_units(module: nn.Module) -> list[nn.Module]:
    """The units a LightningModule declares, or a UserInputError that says how to declare them."""
    if not isinstance(module, ShardedModel):
        raise UserInputError(
            f"{type(module).__name__} does not declare sharding_units(), so the fsdp2 strategy cannot shard it; "
            "implement trainrig.strategies.sharding.ShardedModel or use --trainer.strategy ddp"
        )
    units = list(module.sharding_units())
    if not units:
        raise UserInputError(
            f"{type(module).__name__}.sharding_units() returned no unit; the fsdp2 strategy needs at least one"
        )
    submodules = {id(submodule) for submodule in module.modules()}
    for unit in units:
        if id(unit) not in submodules:
            raise UserInputError(
                f"sharding unit {type(unit).__name__} returned by sharding_units() is not a submodule of "
                f"{type(module).__name__}"
            )
    return units


def model_tensor_parallel_plan(module: nn.Module, size: int) -> dict[str, str]:
    """The plan a LightningModule declares, checked, or a UserInputError naming what is missing or wrong."""
    if not isinstance(module, TensorParallelModel):
        raise UserInputError(
            f"{type(module).__name__} declares no tensor_parallel_plan(), so it cannot be split over "
            f"tensor_parallel {size} processes; set --trainer.strategy.init_args.tensor_parallel 1 or implement "
            "trainrig.strategies.sharding.TensorParallelModel"
        )
    plan = dict(module.tensor_parallel_plan())
    names = dict(module.named_modules())
    for name, style in plan.items():
        if style not in TENSOR_PARALLEL_STYLES:
            raise UserInputError(
                f"{type(module).__name__}.tensor_parallel_plan() gives {name!r} the style {style!r}; "
                f"use one of {', '.join(TENSOR_PARALLEL_STYLES)}"
            )
        if not isinstance(names.get(name), nn.Linear):
            raise UserInputError(
                f"{type(module).__name__}.tensor_parallel_plan() names {name!r}, which is not a linear layer of it"
            )
    if not plan:
        raise UserInputError(f"{type(module).__name__}.tensor_parallel_plan() is empty; it splits no layer")
    return plan


def apply_tensor_parallel(module: nn.Module, plan: dict[str, str], mesh) -> None:
    """Split each planned linear layer over the tensor-parallel mesh dimension."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    styles = {"colwise": ColwiseParallel, "rowwise": RowwiseParallel}
    parallelize_module(module, mesh, {name: styles[style]() for name, style in plan.items()})


def apply_activation_checkpointing(units: list[nn.Module]) -> None:
    """Recompute each unit's activations in the backward pass instead of keeping them: memory for compute. The
    composable form hooks the unit in place, so parameter names (and checkpoints) stay as they are."""
    from torch.distributed._composable import checkpoint

    for unit in units:
        checkpoint(unit)


def apply_fully_shard(module: nn.Module, units: list[nn.Module], mesh, reshard_after_forward: bool, **options):
    """Shard every unit, then the root (whatever no unit holds). The root is not resharded after its forward:
    its backward comes first, right after, and would gather it again."""
    from torch.distributed.fsdp import fully_shard

    for unit in units:
        fully_shard(unit, mesh=mesh, reshard_after_forward=reshard_after_forward, **options)
    fully_shard(module, mesh=mesh, reshard_after_forward=False, **options)


def mixed_precision_policy(precision: str):
    """FSDP2's policy for `--trainer.precision`: compute in bfloat16, reduce gradients and keep the sharded
    parameters and optimizer state in float32. None for full precision; a UserInputError for what cannot hold."""
    from torch.distributed.fsdp import MixedPrecisionPolicy

    if precision in ("32-true", "32"):
        return None
    if precision == "bf16-mixed":
        return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    raise UserInputError(
        f"the fsdp2 strategy trains with --trainer.precision 32-true or bf16-mixed, not {precision}; "
        "bf16-mixed keeps float32 master weights in the shards"
    )
