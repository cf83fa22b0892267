"""What a trained pet-name checkpoint generates: sample names, how many are real, and the held-out NLL.

    python benchmarks/pet_name_samples.py logs/lstm/version_0/checkpoints/last.ckpt [--names 2000]

Generates `--names` names (temperature 1, nothing excluded) and reports the share that are real pet
names in the data, the share that are real but held out (validation names the model never trained
on, so it did not copy them), the held-out NLL per character under the conditional the checkpoint was trained on and
samples from (its formulation: the training window, or the whole name so far through the carried state) and, for
comparison, under the other, and 10 names title-cased as the predictions file prints them.
"""

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.pet_name_quality import carried_state_nll, windowed_nll  # noqa: E402
from datamodules.pet_names import PetNamesDataModule, display_name  # noqa: E402
from lightning_modules.name_generator import NameGenerator  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint")
    parser.add_argument("--names", type=int, default=2000)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = NameGenerator.load_from_checkpoint(args.checkpoint, map_location="cpu").eval()
    data = PetNamesDataModule()
    data.setup("fit")
    names = model.generate(args.names)
    real = [name for name in names if name in set(data.names)]
    held_out = [name for name in real if name in data.held_out_names]
    print(
        f"{len(names)} names: {len(real) / len(names):.1%} are real pet names in the data, "
        f"{len(held_out) / len(names):.1%} real and held out from training"
    )
    held_out_names = sorted(data.held_out_names)
    formulation = model.hparams.formulation
    as_trained, other = (
        (carried_state_nll, windowed_nll) if formulation == "whole_names" else (windowed_nll, carried_state_nll)
    )
    print(
        f"held-out NLL per character: {as_trained(model.network, held_out_names):.3f} conditioned as trained on "
        f"{formulation} (and generated), {other(model.network, held_out_names):.3f} under the other conditional"
    )
    print("10 names: " + ", ".join(display_name(name) for name in names[:10]))


if __name__ == "__main__":
    main()
