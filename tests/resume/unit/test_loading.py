"""What the project's runs write is loadable with `weights_only=True`: a value given on the command line for an
argument annotated with a jsonargparse type (`--model.init_args.num_stages 4`, a PositiveInt) is saved in the
hyper-parameters as that type (the emulated-hosts fsdp2 run found it)."""

import torch
from jsonargparse.typing import ClosedUnitInterval, NotEmptyStr, PositiveFloat, PositiveInt

from trainrig.resume.loading import load_checkpoint


def test_hyper_parameters_parsed_into_jsonargparse_types_load_weights_only(tmp_path):
    saved = {
        "hyper_parameters": {
            "num_stages": PositiveInt(4),
            "hidden_sizes": (PositiveInt(32), PositiveInt(16)),
            "lr": PositiveFloat(0.01),
            "dropout": ClosedUnitInterval(0.5),
            "name": NotEmptyStr("shapes"),
        }
    }
    torch.save(saved, tmp_path / "last.ckpt")
    assert load_checkpoint(tmp_path / "last.ckpt") == saved
    assert torch.load(tmp_path / "last.ckpt", weights_only=True) == saved  # Lightning's own load, too
