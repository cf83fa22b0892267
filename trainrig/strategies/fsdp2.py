"""`--trainer.strategy fsdp2`: every process holds 1/N of the parameters, gradients and optimizer state (FSDP2,
`torch.distributed.fsdp.fully_shard`), optionally times tensor parallelism over a second mesh dimension.

Lightning's `ModelParallelStrategy` builds the ("data_parallel", "tensor_parallel") device mesh and reads and
writes sharded checkpoints through torch.distributed.checkpoint, but leaves the parallelism to each
LightningModule's `configure_model`. Here the strategy applies it from what the model declares
(`trainrig.strategies.sharding`), so every example shards without code of its own; and a sharded checkpoint is
written into a hidden directory beside its target and renamed into place once every rank has written its part,
so that a reader finds the old checkpoint or the new one, whatever stops the run.
"""

import os
import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
from jsonargparse.typing import PositiveInt
from lightning.fabric.plugins.collectives.torch_collective import default_pg_timeout
from lightning.pytorch.accelerators import CPUAccelerator
from lightning.pytorch.plugins.precision import Precision
from lightning.pytorch.strategies import ModelParallelStrategy
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities import rank_zero_info
from typing_extensions import override

from trainrig.errors import UserInputError
from trainrig.resume.sharded import (
    METADATA_NAME,
    PARTIAL_SUFFIX,
    check_shards,
    hidden_sibling,
    is_sharded_checkpoint,
    replace_path,
)
from trainrig.strategies.compile import apply_compile, report_compiled
from trainrig.strategies.sharding import (
    apply_activation_checkpointing,
    apply_fully_shard,
    apply_tensor_parallel,
    mixed_precision_policy,
    model_sharding_units,
    model_tensor_parallel_plan,
)


class FSDP2Strategy(ModelParallelStrategy):
    """Shards the model's declared units over all processes (`fully_shard`), and the linear layers its
    `tensor_parallel_plan()` names over `tensor_parallel` processes of each group.

    `--trainer.devices` x `--trainer.num_nodes` processes form a mesh of (processes / tensor_parallel) data-parallel
    groups by `tensor_parallel`; each data-parallel group sees its own share of every batch.
    """

    strategy_name = "fsdp2"
    strategy_description = (
        "parameters, gradients and optimizer state sharded over the processes (FSDP2), x tensor parallel"
    )

    def __init__(
        self,
        tensor_parallel: PositiveInt = 1,
        reshard_after_forward: bool = True,
        activation_checkpointing: bool = False,
        cpu_offload: bool = False,
        compile: bool = False,
        sharded_checkpoint: bool = True,
        process_group_backend: str | None = None,
        timeout: timedelta | None = default_pg_timeout,
    ):
        """
        Args:
            tensor_parallel: processes each planned linear layer is split over; the model must declare
                `tensor_parallel_plan()` when above 1.
            reshard_after_forward: free each unit's gathered parameters after its forward pass and gather them again
                for the backward (less memory, one more all-gather per unit).
            activation_checkpointing: recompute each unit's activations in the backward pass instead of keeping them.
            cpu_offload: keep the sharded parameters, gradients and optimizer state in CPU memory (GPU runs only).
            compile: `torch.compile` each sharding unit, after tensor parallelism and before sharding (the option
                every strategy takes: trainrig/strategies/compile.py).
            sharded_checkpoint: each process writes its shard into a checkpoint directory (loads on any number of
                processes); false: rank 0 gathers the full state into one file.
            process_group_backend: default gloo on CPU, nccl on GPU.
            timeout: for collectives, H:MM:SS.
        """
        super().__init__(
            data_parallel_size="auto",
            tensor_parallel_size=tensor_parallel,
            save_distributed_checkpoint=sharded_checkpoint,
            process_group_backend=process_group_backend,
            timeout=timeout,
        )
        self.tensor_parallel = tensor_parallel
        self.reshard_after_forward = reshard_after_forward
        self.activation_checkpointing = activation_checkpointing
        self.cpu_offload = cpu_offload
        self.compile = compile
        self._compiled: list[torch.nn.Module] = []

    @override
    def connect(self, model) -> None:
        """Check everything the options depend on before any process writes a file."""
        model_sharding_units(model)
        if self.tensor_parallel > 1:
            model_tensor_parallel_plan(model, self.tensor_parallel)
        world_size = self.world_size  # the cluster environment's: a launcher may start the processes
        if world_size % self.tensor_parallel:
            raise UserInputError(
                f"fsdp2 tensor_parallel {self.tensor_parallel} does not divide the {world_size} processes; "
                "use --trainer.devices x --trainer.num_nodes processes that are a multiple of it"
            )
        if self.cpu_offload and isinstance(self.accelerator, CPUAccelerator):
            raise UserInputError(
                "fsdp2 cpu_offload moves GPU state into CPU memory; on --trainer.accelerator cpu everything is there "
                "already: drop cpu_offload"
            )
        mixed_precision_policy(self._precision_name())
        super().connect(model)

    def _precision_name(self) -> str:
        return str(getattr(self.precision_plugin, "precision", "32-true"))

    def layout(self) -> dict:
        """What a run's checkpoints record of this mesh (trainrig/strategies/record.py)."""
        return {
            "data_parallel": self.world_size // self.tensor_parallel,
            "tensor_parallel": self.tensor_parallel,
            "compiled": bool(self._compiled),
        }

    @override
    def setup_environment(self) -> None:
        self._data_parallel_size = self.world_size // self.tensor_parallel
        super().setup_environment()

    @override
    def setup(self, trainer) -> None:
        """Lightning's checklist, with the parallelism applied here instead of in the model's `configure_model`."""
        assert self.model is not None and self.accelerator is not None
        self.accelerator.setup(trainer)
        if not self._is_sharded():
            self._parallelize()
        if not self.cpu_offload:
            self.model_to_device()  # what no unit holds: buffers of metrics
        self.barrier()
        if trainer.state.fn == TrainerFn.FITTING:
            self.setup_optimizers(trainer)
        self.setup_precision_plugin()

    def _is_sharded(self) -> bool:
        from torch.distributed.fsdp import FSDPModule

        return isinstance(self.model, FSDPModule)

    def _parallelize(self) -> None:
        module = self.lightning_module
        units = model_sharding_units(module)
        policy = mixed_precision_policy(self._precision_name())
        if policy is not None:
            self.precision_plugin = Precision()  # FSDP2 casts per unit; autocast on top would cast twice
        if not self.cpu_offload:
            module.to(self.root_device)
        if self.tensor_parallel > 1:
            plan = model_tensor_parallel_plan(module, self.tensor_parallel)
            apply_tensor_parallel(module, plan, self.device_mesh["tensor_parallel"])
        if self.activation_checkpointing:
            apply_activation_checkpointing(units)
        if self.compile:
            self._compiled = apply_compile(units)
            report_compiled("fsdp2", self._compiled)
        options: dict[str, Any] = {}
        if policy is not None:
            options["mp_policy"] = policy
        if self.cpu_offload:
            from torch.distributed.fsdp import CPUOffloadPolicy

            options["offload_policy"] = CPUOffloadPolicy()
        apply_fully_shard(module, units, self.device_mesh["data_parallel"], self.reshard_after_forward, **options)
        mesh = self.device_mesh
        rank_zero_info(
            f"fsdp2: {len(units)} sharding units over {mesh['data_parallel'].size()} process(es)"
            + (f" x tensor parallel {self.tensor_parallel}" if self.tensor_parallel > 1 else "")
        )

    @override
    def save_checkpoint(self, checkpoint: dict[str, Any], filepath, storage_options: Any | None = None) -> None:
        """Every rank writes its shard into a hidden directory beside `filepath`; rank 0 renames it into place.
        (Lightning's own writes into the target directory itself: a stop midway leaves a mix of two checkpoints.)"""
        if not self._save_distributed_checkpoint:
            super().save_checkpoint(checkpoint, filepath, storage_options)
            return
        from torch.distributed.checkpoint import save

        target = Path(self.broadcast(str(filepath)))
        staging = hidden_sibling(target, PARTIAL_SUFFIX, pid=self.broadcast(os.getpid()))
        if self.is_global_zero:  # and what a killed run left of its writes
            for left in target.parent.glob(f".{target.name}.*{PARTIAL_SUFFIX}"):
                shutil.rmtree(left, ignore_errors=True)
        self.barrier()
        shards = {"state_dict": checkpoint.pop("state_dict")}
        shards.update(
            {f"optimizer_{index}": state for index, state in enumerate(checkpoint.pop("optimizer_states", []))}
        )
        save(shards, checkpoint_id=staging)
        if self.is_global_zero:
            with open(staging / METADATA_NAME, "wb") as handle:
                torch.save(checkpoint, handle)
                handle.flush()
                os.fsync(handle.fileno())
            replace_path(staging, target)
        self.barrier()

    @override
    def load_checkpoint(self, checkpoint_path, weights_only: bool | None = None) -> dict[str, Any]:
        """Lightning loads a sharded checkpoint through torch.distributed.checkpoint, which unpickles the shards' index
        and the values that are not tensors in full: they are checked first on every rank, whoever started the run
        (cli.py checks them before anything is written, a Trainer built elsewhere does not), unless `weights_only` is
        False (the user trusts the checkpoint)."""
        path = self.broadcast(checkpoint_path)  # the one Lightning loads on every rank: rank 0's
        if weights_only is not False and is_sharded_checkpoint(path):
            check_shards(Path(path))
        return super().load_checkpoint(path, weights_only)

    @override
    def remove_checkpoint(self, filepath) -> None:
        if self.is_global_zero:
            path = Path(filepath)
            shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
