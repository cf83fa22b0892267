"""Time to quality: the two pet-name training formulations side by side, against the reference loop's one epoch.

    python benchmarks/pet_name_quality.py [--windows-epochs 2] [--threads 2] [--reference-nll NLL]

`windows` (the reference's formulation, configs/lstm_reference.yaml's, with configs/lstm.yaml's batch 512 and Adam
3e-3) predicts each character from the 8 before it, left-padded, from a zero state; `whole_names` (batch
`--whole-batch` names, Adam `--whole-lr`) predicts each once, from the whole name so far after 8 padding characters.
Each model is measured under its own conditional, the one its generator samples from: the held-out NLL per
character is then the negative log-likelihood of the held-out names under that generator, so the two compare.

Both start from the same initial weights, on the same 90% of the names (the other 10%, split by name, held out),
with PetNamesDataModule's loaders and NameGenerator's loss in a plain loop (no Trainer), so that the two pair step
by step: the side with less training time so far takes the next step, and both train through the same minutes of
this shared machine, whose speed drifts by tens of percent. `windows` trains `--windows-epochs` epochs;
`whole_names` trains for the same time. The held-out NLL is measured at steps 1, 2, 4, ..., 64 and then every
`--eval-seconds` of a side's training time; the time measuring is left out.

Targets: the held-out NLL the reference loop (benchmarks/reference_pet_names.py: its data preparation, batch
16384, Adam 1e-3) reaches after one epoch, run here first unless `--reference-nll` gives it, and the NLL `windows`
reaches at the end of its budget. Generation: names/s at batch 4096, each model with its own sampler, alternating,
`--generation-repeats` times.
"""

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import reference_pet_names as reference  # noqa: E402
from benchmarks.alternation import in_turn  # noqa: E402
from datamodules.pet_names import (  # noqa: E402
    VOCAB,
    PetNamesDataModule,
    clean_names,
    display_name,
    encode_windows,
    read_names,
)
from lightning_modules.name_generator import PAD_INDEX, NameGenerator  # noqa: E402
from models.char_lstm import CharLSTM  # noqa: E402

CONTEXT = 8
EARLY_EVALUATIONS = {1, 2, 4, 8, 16, 32, 64}


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
    """The same characters, each conditioned on the padding and the whole name before it: the whole-names
    conditional, which the carried-state generator samples from."""
    total, count = 0.0, 0
    for length in sorted({len(name) for name in names}):
        group = [name for name in names if len(name) == length]
        rows = torch.tensor([[PAD_INDEX] * CONTEXT + [VOCAB.index(c) for c in name] + [1] for name in group])
        logits = network(rows[:, :-1])[0][:, CONTEXT - 1 :]
        total += F.cross_entropy(logits.transpose(1, 2), rows[:, CONTEXT:], reduction="sum").item()
        count += rows[:, CONTEXT:].numel()
    return total / count


class Run:
    """One formulation's model, optimizer and endless shuffled batches, timed step by step."""

    def __init__(self, formulation: str, names_file: Path, batch_size: int, lr: float, initial_state: dict):
        self.formulation = formulation
        data = PetNamesDataModule(str(names_file), val_fraction=0.0, batch_size=batch_size, formulation=formulation)
        data.setup("fit")
        self.model = NameGenerator(VOCAB, formulation=formulation)
        self.model.network.load_state_dict(initial_state)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=lr)
        self.loader = data.train_dataloader()
        self.steps_per_epoch = len(self.loader)
        self.batches = self._batches()
        self.steps, self.seconds, self.curve = 0, 0.0, []  # curve: (seconds, steps, held-out NLL)

    def _batches(self):
        epoch = 0
        while True:
            self.loader.sampler.set_epoch(epoch)
            yield from self.loader
            epoch += 1

    def step(self) -> None:
        start = time.perf_counter()
        self.model.train()
        loss = self.model.batch_loss(next(self.batches))[0]
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.seconds += time.perf_counter() - start
        self.steps += 1

    def held_out_nll(self, held_out: list[str]) -> float:
        self.model.eval()
        measure = carried_state_nll if self.formulation == "whole_names" else windowed_nll
        return measure(self.model.network, held_out)

    def evaluate(self, held_out: list[str]) -> None:
        self.curve.append((self.seconds, self.steps, self.held_out_nll(held_out)))
        print(f"  {self.formulation}: step {self.steps}, {self.seconds:.1f} s, held-out NLL {self.curve[-1][2]:.3f}")

    def time_to(self, target: float) -> str:
        reached = next(((seconds, steps) for seconds, steps, nll in self.curve if nll <= target), None)
        return "not reached" if reached is None else f"{reached[0]:.1f} s (step {reached[1]})"


def reference_one_epoch_nll(train: list[str], held_out: list[str], initial_state: dict) -> float:
    torch.manual_seed(1)
    model = reference.ReferenceModel()
    model.load_state_dict({key.replace("head.", "fc."): value for key, value in initial_state.items()})
    start = time.perf_counter()
    reference.train_one_epoch(model, reference.PrefixDataset(train))
    network = CharLSTM(len(VOCAB))
    network.load_state_dict({key.replace("fc.", "head."): value for key, value in model.state_dict().items()})
    nll = windowed_nll(network.eval(), held_out)
    print(f"reference loop: one epoch in {time.perf_counter() - start:.1f} s, held-out NLL {nll:.3f}", flush=True)
    return nll


def names_per_second(run: Run, count: int) -> float:
    start = time.perf_counter()
    run.model.generate(count)
    return count / (time.perf_counter() - start)


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--windows-epochs", type=float, default=2.0)
    parser.add_argument("--whole-batch", type=int, default=64)
    parser.add_argument("--whole-lr", type=float, default=3e-3)
    parser.add_argument("--eval-seconds", type=float, default=10.0)
    parser.add_argument("--reference-nll", type=float, help="skip the reference loop's epoch (about 2.5 minutes)")
    parser.add_argument("--generation-repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
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
    reference_nll = args.reference_nll or reference_one_epoch_nll(train, held_out, initial_state)

    with tempfile.TemporaryDirectory() as folder:
        names_file = Path(folder) / "names.txt"
        names_file.write_text("\n".join(train) + "\n")
        windows = Run("windows", names_file, 512, 3e-3, initial_state)
        whole = Run("whole_names", names_file, args.whole_batch, args.whole_lr, initial_state)
    windows_steps = round(args.windows_epochs * windows.steps_per_epoch)
    next_evaluation = {run: args.eval_seconds for run in (windows, whole)}
    started = time.perf_counter()
    while windows.steps < windows_steps or whole.seconds < windows.seconds:
        run = windows if windows.steps < windows_steps and windows.seconds <= whole.seconds else whole
        run.step()
        if run.seconds >= next_evaluation[run]:
            next_evaluation[run] += args.eval_seconds
            run.evaluate(held_out)
        elif run.steps in EARLY_EVALUATIONS:
            run.evaluate(held_out)
    for run in (windows, whole):
        if run.curve[-1][1] != run.steps:
            run.evaluate(held_out)
    print(f"training and measuring took {time.perf_counter() - started:.0f} s")

    rates = {windows: [], whole: []}
    for repeat in range(args.generation_repeats):
        for run in in_turn((windows, whole), repeat):
            torch.manual_seed(repeat)
            rates[run].append(names_per_second(run, 4096))
    demanding = windows.curve[-1][2]
    print(f"\nwindows: {args.windows_epochs:g} epochs of {windows.steps_per_epoch} steps (batch 512, Adam 3e-3)")
    print(
        f"whole_names: the same training time, {whole.steps / whole.steps_per_epoch:.2f} epochs of "
        f"{whole.steps_per_epoch} steps (batch {args.whole_batch} names, Adam {args.whole_lr:g})\n"
    )
    rows = [
        ("training time (s)", *(f"{run.seconds:.1f}" for run in (windows, whole))),
        ("steps", windows.steps, whole.steps),
        ("one epoch (s)", *(f"{run.seconds / run.steps * run.steps_per_epoch:.0f}" for run in (windows, whole))),
        ("held-out NLL per character at the end", *(f"{run.curve[-1][2]:.3f}" for run in (windows, whole))),
        (
            f"time to the reference's one-epoch NLL, {reference_nll:.3f}",
            windows.time_to(reference_nll),
            whole.time_to(reference_nll),
        ),
        (f"time to windows' final NLL, {demanding:.3f}", windows.time_to(demanding), whole.time_to(demanding)),
        (
            f"names/s, batch 4096, median (range) of {args.generation_repeats}",
            spread(rates[windows]),
            spread(rates[whole]),
        ),
    ]
    print("| measure | windows | whole_names |\n|---|---:|---:|")
    for row in rows:
        print("| " + " | ".join(map(str, row)) + " |")
    for run in (windows, whole):
        torch.manual_seed(0)
        print(f"{run.formulation}, 10 names: " + ", ".join(display_name(name) for name in run.model.generate(10)))


if __name__ == "__main__":
    main()
