"""Pet-name pipeline against the reference tutorial's approach, side by side in one run.

    python benchmarks/pet_names.py [--repeats 3] [--epoch-fraction 0.25] [--threads 2] [--measures epoch]

Reports medians over repeats for data preparation (full data), one training epoch (same
model, batch size 16384, Adam 1e-3, same initial weights) and name generation (same trained
weights), with the template/reference ratio. The epoch and generation are paired: each repeat
runs reference and template one after the other, in alternating order (reference first, then
template first), and the ratio is the median of the per-repeat ratios, with their range, so that
drifting machine speed hits both sides alike. Generation runs the template's model in float32 and
in bfloat16 (what `predict --trainer.precision bf16-true` does), the reference in float32;
generation without `epoch` in --measures uses untrained weights.
Targets: prep >= 30x, generation >= 100x, epoch time <= the reference's.
"""

import argparse
import copy
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lightning.pytorch import Trainer  # noqa: E402

from benchmarks import reference_pet_names as reference  # noqa: E402
from benchmarks.alternation import in_turn  # noqa: E402
from benchmarks.epoch_timer import EpochTimer  # noqa: E402
from datamodules.pet_names import VOCAB, CharWindows, PetNamesDataModule, clean_names, encode_windows, read_names  # noqa: E402
from lightning_modules.name_generator import NameGenerator  # noqa: E402

BATCH_SIZE = 16384
MEASURES = ("prep", "epoch", "generation")


def call_seconds(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def median_seconds(function, repeats: int) -> float:
    return statistics.median(call_seconds(function) for _ in range(repeats))


def template_epoch(names_file: Path, initial_state: dict) -> tuple[float, NameGenerator]:
    model = NameGenerator(VOCAB)
    model.network.load_state_dict(initial_state)
    timer = EpochTimer()
    trainer = Trainer(
        max_epochs=1,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        callbacks=[timer],
    )
    trainer.fit(model, PetNamesDataModule(str(names_file), val_fraction=0.0, batch_size=BATCH_SIZE))
    return timer.seconds, model


def reference_epoch(names: list[str], initial_state: dict) -> tuple[float, reference.ReferenceModel]:
    model = reference.ReferenceModel()
    model.load_state_dict({key.replace("head.", "fc."): value for key, value in initial_state.items()})
    dataset = reference.PrefixDataset(names)
    start = time.perf_counter()
    reference.train_one_epoch(model, dataset, BATCH_SIZE)
    return time.perf_counter() - start, model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--epoch-fraction", type=float, default=0.25, help="share of the names (the same for both) in the timed epoch"
    )
    parser.add_argument("--reference-names", type=int, default=100, help="names the reference generates per repeat")
    parser.add_argument(
        "--template-names", type=int, default=4096, help="names the template generates per repeat, in one batch"
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--measures", default=",".join(MEASURES), help="comma-separated subset of prep,epoch,generation (default: all)"
    )
    args = parser.parse_args()
    measures = args.measures.split(",")
    if unknown := set(measures) - set(MEASURES):
        parser.error(f"unknown measures {sorted(unknown)}; choose from {','.join(MEASURES)}")
    torch.set_num_threads(args.threads)
    names, _ = clean_names(read_names(Path("data/pet_names.txt")))
    rows = []

    if "prep" in measures:
        ref_prep = median_seconds(lambda: reference.format_training_data(names), args.repeats)
        our_prep = median_seconds(lambda: CharWindows(*encode_windows(names, reference.WINDOW)), args.repeats)
        rows.append((f"data preparation, {len(names)} names (s)", ref_prep, our_prep, ref_prep / our_prep, ""))

    torch.manual_seed(0)
    initial_state = NameGenerator(VOCAB).network.state_dict()
    reference_model, template_model = reference.ReferenceModel(), NameGenerator(VOCAB)
    template_model.network.load_state_dict(initial_state)
    if "epoch" in measures:
        epoch_names = names[: int(len(names) * args.epoch_fraction)]
        with tempfile.TemporaryDirectory() as folder:
            names_file = Path(folder) / "names.txt"
            names_file.write_text("\n".join(epoch_names) + "\n")
            ref_epochs, our_epochs = [], []
            for repeat in range(args.repeats):
                for side in in_turn(("reference", "template"), repeat):
                    # The same shuffles every repeat, so generation uses the same weights whatever --repeats is.
                    torch.manual_seed(1)
                    if side == "reference":
                        seconds, reference_model = reference_epoch(epoch_names, initial_state)
                        ref_epochs.append(seconds)
                    else:
                        seconds, template_model = template_epoch(names_file, initial_state)
                        our_epochs.append(seconds)
        ratios = [ref / ours for ref, ours in zip(ref_epochs, our_epochs)]
        rows.append(
            (
                f"one training epoch, {len(epoch_names)} names (s)",
                statistics.median(ref_epochs),
                statistics.median(our_epochs),
                statistics.median(ratios),
                f"{min(ratios):.2f} to {max(ratios):.2f}",
            )
        )
    if "generation" not in measures:
        print_rows(rows, args)
        return

    reference_model.load_state_dict(
        {key.replace("head.", "fc."): value for key, value in template_model.network.state_dict().items()}
    )
    reference_model.eval()
    template_model.eval()
    bf16_model = copy.deepcopy(template_model).to(torch.bfloat16)
    np.random.seed(0)
    ref_rates, our_rates, bf16_rates = [], [], []
    sides = {
        "reference": (
            ref_rates,
            args.reference_names,
            lambda: [reference.generate_name(reference_model) for _ in range(args.reference_names)],
        ),
        "float32": (our_rates, args.template_names, lambda: template_model.generate(args.template_names)),
        "bf16-true": (bf16_rates, args.template_names, lambda: bf16_model.generate(args.template_names)),
    }
    for repeat in range(args.repeats):
        for rates, count, generate in in_turn(sides.values(), repeat):
            rates.append(count / call_seconds(generate))
    for label, rates in (("float32", our_rates), ("bf16-true", bf16_rates)):
        ratios = [ours / ref for ours, ref in zip(rates, ref_rates)]
        rows.append(
            (
                f"name generation, {label}, batches of {args.template_names} (names/s)",
                statistics.median(ref_rates),
                statistics.median(rates),
                statistics.median(ratios),
                f"{min(ratios):.1f} to {max(ratios):.1f}",
            )
        )
    print_rows(rows, args)


def print_rows(rows: list[tuple], args: argparse.Namespace) -> None:
    print(f"\ntorch {torch.__version__}, {args.threads} threads, medians of {args.repeats} repeats\n")
    print("| measure | reference | template | speed-up, median of the repeats | its range |")
    print("|---|---:|---:|---:|---:|")
    for label, ref_value, our_value, ratio, spread in rows:
        print(f"| {label} | {ref_value:.3g} | {our_value:.3g} | {ratio:.2f}x | {spread} |")


if __name__ == "__main__":
    main()
