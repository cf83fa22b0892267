"""Time to quality: how long the template's pet-name training takes to reach what the reference's reaches in an epoch.

    python benchmarks/pet_name_quality.py [--threads 2] [--eval-every 5] [--max-minutes 10]

Both train the same 4 x 128 LSTM from the same initial weights on the same 90% of the names; the
other 10% (split by name, seeded) are held out. The quality measure is the held-out NLL per
character, each character (and the stop) predicted once, conditioned as training and generation
condition it: the last 8 characters, left-padded, from a zero state.

1. The reference loop (benchmarks/reference_pet_names.py: its data preparation, batch 16384,
   Adam 1e-3) trains one epoch; its held-out NLL is the target, its wall time the baseline.
2. The template (configs/lstm.yaml's batch 512 and Adam 3e-3, the Lightning Trainer and
   PetNamesDataModule) trains until its held-out NLL reaches the target, measured every
   `--eval-every` steps; the time spent measuring is left out of its wall time.

Also printed: for the template's model at the end, the held-out NLL when each character is
conditioned on the whole name so far through the carried LSTM state instead (what generation
did before), which shows what that mismatch cost.
"""

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lightning.pytorch import Callback, Trainer  # noqa: E402

from benchmarks import reference_pet_names as reference  # noqa: E402
from datamodules.pet_names import VOCAB, PetNamesDataModule, clean_names, encode_windows, read_names  # noqa: E402
from lightning_modules.name_generator import PAD_INDEX, NameGenerator  # noqa: E402
from models.char_lstm import CharLSTM  # noqa: E402

CONTEXT = 8


@torch.no_grad()
def windowed_nll(network: CharLSTM, names: list[str]) -> float:
    """Mean NLL of every character and stop of `names`, each from its training window's last position."""
    inputs, targets = encode_windows(names, CONTEXT)
    total, count = 0.0, 0
    for start in range(0, len(inputs), 65536):
        logits = network(inputs[start : start + 65536].long())[0][:, -1]
        batch_targets = targets[start : start + 65536, -1].long()
        total += F.cross_entropy(logits, batch_targets, reduction="sum").item()
        count += len(batch_targets)
    return total / count


@torch.no_grad()
def carried_state_nll(network: CharLSTM, names: list[str]) -> float:
    """The same characters, each conditioned on the padding and the whole name before it through the LSTM state."""
    total, count = 0.0, 0
    for length in sorted({len(name) for name in names}):
        group = [name for name in names if len(name) == length]
        rows = torch.tensor([[PAD_INDEX] * CONTEXT + [VOCAB.index(c) for c in name] + [1] for name in group])
        logits = network(rows[:, :-1])[0][:, CONTEXT - 1 :]
        total += F.cross_entropy(logits.transpose(1, 2), rows[:, CONTEXT:], reduction="sum").item()
        count += rows[:, CONTEXT:].numel()
    return total / count


class StopAtTarget(Callback):
    """Measures the held-out NLL every `every` steps; stops training once it reaches `target`."""

    def __init__(self, held_out: list[str], target: float, every: int):
        self.held_out, self.target, self.every = held_out, target, every
        self.measuring_seconds, self.reached = 0.0, None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step % self.every:
            return
        start = time.perf_counter()
        pl_module.eval()
        nll = windowed_nll(pl_module.network, self.held_out)
        pl_module.train()
        self.measuring_seconds += time.perf_counter() - start
        print(f"  template step {trainer.global_step}: held-out NLL {nll:.3f}", flush=True)
        if nll <= self.target:
            self.reached = (trainer.global_step, nll)
            trainer.should_stop = True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--max-minutes", type=float, default=10)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    names, _ = clean_names(read_names(Path("data/pet_names.txt")))
    distinct = sorted(set(names))
    random.Random(0).shuffle(distinct)
    held_out_set = set(distinct[: len(distinct) // 10])
    held_out = sorted(held_out_set)
    train = [name for name in names if name not in held_out_set]
    torch.manual_seed(0)
    initial_state = CharLSTM(len(VOCAB)).state_dict()

    torch.manual_seed(1)
    model = reference.ReferenceModel()
    model.load_state_dict({key.replace("head.", "fc."): value for key, value in initial_state.items()})
    start = time.perf_counter()
    dataset = reference.PrefixDataset(train)
    prepared = time.perf_counter()
    reference.train_one_epoch(model, dataset)
    reference_seconds = time.perf_counter() - start
    network = CharLSTM(len(VOCAB))
    network.load_state_dict({key.replace("fc.", "head."): value for key, value in model.state_dict().items()})
    target = windowed_nll(network.eval(), held_out)
    print(
        f"reference: one epoch in {reference_seconds:.1f} s ({prepared - start:.1f} s of it preparing data), "
        f"held-out NLL {target:.3f}: the target",
        flush=True,
    )

    torch.manual_seed(1)
    template = NameGenerator(VOCAB, optimizer=lambda params: torch.optim.Adam(params, lr=3e-3))
    template.network.load_state_dict(initial_state)
    stop = StopAtTarget(held_out, target, args.eval_every)
    with tempfile.TemporaryDirectory() as folder:
        names_file = Path(folder) / "names.txt"
        names_file.write_text("\n".join(train) + "\n")
        trainer = Trainer(
            max_time={"minutes": args.max_minutes},
            accelerator="cpu",
            devices=1,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            limit_val_batches=0,
            num_sanity_val_steps=0,
            callbacks=[stop],
        )
        start = time.perf_counter()
        trainer.fit(template, PetNamesDataModule(str(names_file), val_fraction=0.0, batch_size=512))
        template_seconds = time.perf_counter() - start - stop.measuring_seconds
    if stop.reached is None:
        print(f"template: target not reached in {args.max_minutes} minutes")
        return
    step, nll = stop.reached
    print(f"template: held-out NLL {nll:.3f} at step {step} (batch 512), {template_seconds:.1f} s")
    print(f"time to the reference's one-epoch quality: {reference_seconds / template_seconds:.1f}x faster")
    template.eval()
    print(
        f"template model, held-out NLL per character: {windowed_nll(template.network, held_out):.3f} conditioned as "
        f"trained, {carried_state_nll(template.network, held_out):.3f} through the carried state"
    )


if __name__ == "__main__":
    main()
