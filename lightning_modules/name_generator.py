"""The LSTM example: a character-level language model that invents pet names."""

from typing import Literal

import torch
from jsonargparse.typing import ClosedUnitInterval, PositiveFloat, PositiveInt
from lightning.pytorch import LightningModule
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from lightning.pytorch.trainer.states import TrainerFn
from torch import nn
from torch.nn import functional as F
from torchmetrics.text import Perplexity
from typing_extensions import override

from lightning_modules.optimization import check_optimizer, configure_optimization
from models.char_lstm import CharLSTM
from trainrig.errors import UserInputError

PAD_INDEX, STOP_INDEX = 0, 1
# Sampling again in place of dropped names gives up after this many rounds (a model that only repeats).
MAX_SAMPLING_ROUNDS = 100


class NameGenerator(LightningModule):
    """Learns P(next character | previous ones), on fixed windows or on whole names; generates names one character
    at a time under the same conditional.

    Logs `train/loss` and `val/loss` (cross-entropy per predicted character, padding
    excluded) and `train/perplexity`, `val/perplexity`. Prediction returns generated names.
    """

    def __init__(
        self,
        vocab: str,
        context_length: PositiveInt = 8,
        formulation: Literal["windows", "whole_names"] = "windows",
        hidden_size: PositiveInt = 128,
        num_layers: PositiveInt = 4,
        dropout: ClosedUnitInterval = 0.0,
        temperature: PositiveFloat = 1.0,
        max_name_length: PositiveInt = 30,
        exclude_training_names: bool = True,
        optimizer: OptimizerCallable = torch.optim.Adam,
        scheduler: LRSchedulerCallable | None = None,
    ):
        """
        Args:
            vocab: characters in index order, padding first and stop second; linked from the datamodule.
            context_length: window length, or padding before whole names, the model is trained on; linked from the
                datamodule.
            formulation: `windows` or `whole_names`, what the datamodule trains on; linked from it. Generation
                conditions on the same: the last `context_length` characters, or the whole name so far.
            temperature: >1 gives wilder names, <1 safer ones.
            max_name_length: generation stops here when no stop character came.
            exclude_training_names: drop generated names that occur in the training data.

        The last three are generation settings, not hyper-parameters: the checkpoint does not record them, so
        LightningCLI does not put a trained model's values over the ones given to `cli.py predict`.
        """
        super().__init__()
        if len(vocab) < 3:
            raise UserInputError(f"vocab must hold padding, stop and at least one character, got {vocab!r}")
        check_optimizer(optimizer)
        self.save_hyperparameters(
            ignore=["optimizer", "scheduler", "temperature", "max_name_length", "exclude_training_names"]
        )
        self.temperature, self.max_name_length = temperature, max_name_length
        self.exclude_training_names = exclude_training_names
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.network = CharLSTM(len(vocab), hidden_size, num_layers, dropout)
        self.val_perplexity = Perplexity(ignore_index=PAD_INDEX)
        self.known_names: set[str] = set()

    def sharding_units(self) -> list[nn.Module]:
        return self.network.sharding_units()

    def forward(self, chars: torch.Tensor) -> torch.Tensor:
        return self.network(chars)[0]

    def batch_loss(self, batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The mean loss over the batch's characters that are not padding, the logits and the targets; the steps
        and the benchmarks' plain loops share it.

        The characters are flattened into one list: cross-entropy over (batch, classes, length) takes CUDA's 2-d
        kernel, which has no deterministic implementation, so `--trainer.deterministic true` refused it on a GPU.
        """
        inputs, targets = batch
        logits = self(inputs)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=PAD_INDEX)
        return loss, logits, targets

    def samples_in(self, batch) -> torch.Tensor:
        """What a training sample is here, for the throughput a run logs (trainrig/monitoring/throughput.py): a
        character predicted, padding left out. A tensor on the batch's device, read only at log steps."""
        return (batch[1] != PAD_INDEX).sum()

    def training_step(self, batch, batch_idx):
        loss, _, targets = self.batch_loss(batch)
        # Not `prog_bar=True`: a host read at every step (lightning_modules/classification.py says why).
        self.log("train/loss", loss, batch_size=len(targets))
        self.log("train/perplexity", loss.exp(), batch_size=len(targets))
        return loss

    def validation_step(self, batch, batch_idx):
        loss, logits, targets = self.batch_loss(batch)
        self.val_perplexity.update(logits, targets)
        self.log("val/loss", loss, prog_bar=True, sync_dist=True, batch_size=len(targets))

    @override
    def on_validation_epoch_end(self) -> None:
        """The metric object is logged once, at the epoch's end, as the image classifiers log theirs."""
        self.log("val/perplexity", self.val_perplexity, prog_bar=True)

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        """Outside fit, the weights decide the conditional to sample from: `cli.py predict` links the config's data
        formulation over the checkpoint's, and a model trained on whole names must still generate from the carried
        state (checkpoints from before the option trained on windows)."""
        fitting = self._trainer is not None and self.trainer.state.fn == TrainerFn.FITTING
        if not fitting:
            self.hparams.formulation = checkpoint["hyper_parameters"].get("formulation", "windows")

    def on_predict_start(self) -> None:
        datamodule = self.trainer.datamodule
        self.known_names = set(datamodule.names) if self.exclude_training_names and datamodule is not None else set()

    def predict_step(self, batch, batch_idx) -> list[str]:
        """`batch` holds one (index, seed) row per name to generate (`PetNamesDataModule.predict_dataloader`): as
        many new names, sampling again in place of empty and already known ones (training names, with
        `exclude_training_names`). Each name's draws come from its own seed, so the names are the same whichever
        process, batch or number of processes samples them. Every process samples as many rounds as the one that
        needs most (one name kept going where it needs none), since a sharded model's forwards are collective."""
        draws = [torch.Generator().manual_seed(seed) for seed in batch[:, 1].tolist()]
        names: list[str | None] = [None] * len(draws)
        for _ in range(MAX_SAMPLING_ROUNDS):
            rows = [row for row, name in enumerate(names) if name is None] or [0]
            uniforms = torch.stack([torch.rand(self.max_name_length, generator=draws[row]) for row in rows])
            for row, name in zip(rows, self.names_from(uniforms)):
                if names[row] is None and name and name not in self.known_names:
                    names[row] = name
            missing = torch.tensor(names.count(None), device=self.device)
            if self.trainer.strategy.reduce(missing, reduce_op="sum") == 0:
                return names
        raise UserInputError(
            f"{names.count(None)} of {len(names)} sampled names are still not new after {MAX_SAMPLING_ROUNDS} "
            "rounds; the model mostly repeats training names or stops at once: raise "
            "--model.init_args.temperature or set --model.init_args.exclude_training_names false"
        )

    def generate(self, num_names: int, generator: torch.Generator | None = None) -> list[str]:
        """`num_names` names, lower-case as learned (`datamodules.pet_names.display_name` title-cases them), drawn
        from `generator` (the global one when None)."""
        return self.names_from(torch.rand(num_names, self.max_name_length, generator=generator))

    def names_from(self, uniforms: torch.Tensor) -> list[str]:
        """One name per row of uniform numbers in [0, 1): each character drawn with the row's number for its
        position, so that a row gives the same name whatever rows share its batch."""
        samples, lengths = self.network.sample(
            uniforms,
            PAD_INDEX,
            STOP_INDEX,
            self.hparams.context_length,
            self.temperature,
            carry_state=self.hparams.formulation == "whole_names",
        )
        vocab = self.hparams.vocab
        return ["".join(vocab[i] for i in row[:length]) for row, length in zip(samples.tolist(), lengths.tolist())]

    def configure_optimizers(self):
        return configure_optimization(self, self.optimizer, self.scheduler)
