"""The pet names streamed from shards (configs/lstm_streaming.yaml over 200 of the shipped names): the shards hold the
examples the names file gives, batched the same way, and the streaming config trains the name generator."""

import contextlib
import io

import pytest
import torch
import yaml

from datamodules.pet_names import PetNamesDataModule, keep_batch
from datamodules.streaming_pet_names import batch_of_examples
from tests.helpers.runs import ROOT, read_metrics, run_cli
from trainrig.data import shards


def streaming_config(tmp_path, formulation: str):
    names = tmp_path / "names.txt"
    names.write_text("\n".join((ROOT / "data" / "pet_names.txt").read_text().splitlines()[:200]))
    config = yaml.safe_load((ROOT / "configs" / "lstm_streaming.yaml").read_text())
    source = {"names_path": str(names), "context_length": 8, "formulation": formulation}
    config["data"]["init_args"] |= {"shards": str(tmp_path / "shards"), "batch_size": 64}
    config["data"]["init_args"]["source"]["init_args"] = source
    path = tmp_path / "streamed.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    with contextlib.redirect_stderr(io.StringIO()):
        shards.main(["write", "--config", str(path), "--chunk-bytes", "4000"])
    return path, source


@pytest.mark.parametrize("formulation", ["windows", "whole_names"])
def test_the_shards_hold_the_examples_of_the_names_file_batched_the_same_way(tmp_path, formulation):
    path, source = streaming_config(tmp_path, formulation)
    streamed = shards.streaming_datamodule(str(path))
    streamed.setup("fit")
    from_file = PetNamesDataModule(**source)
    from_file.setup("fit")
    assert (streamed.context_length, streamed.formulation) == (8, formulation)
    for split, examples in (("train", from_file.train_examples), ("val", from_file.val_examples)):
        samples = getattr(streamed, f"{split}_set")
        # The shards keep the examples in another order: sample `index` is the one the shards' order put there.
        loader = torch.utils.data.DataLoader(samples, batch_size=len(samples), collate_fn=batch_of_examples)
        inputs, targets = next(iter(loader))
        expected = keep_batch(examples.__getitems__(list(range(len(examples)))))
        assert sorted(map(tuple, torch.cat([inputs, targets], 1).tolist())) == sorted(
            map(tuple, torch.cat(expected, 1).tolist())
        ), f"{split} examples differ"


def test_the_streaming_config_trains_the_name_generator(tmp_path):
    path, _ = streaming_config(tmp_path, "windows")
    args = ["--config", str(path), "--trainer.max_epochs", "1", "--trainer.limit_train_batches", "2"]
    args += [
        "--trainer.log_every_n_steps",
        "1",
        "--trainer.enable_progress_bar",
        "false",
        "--trainer.logger.init_args.save_dir",
        str(tmp_path / "logs"),
    ]
    run_cli("fit", args)
    logged = {key for row in read_metrics(tmp_path / "logs") for key, value in row.items() if value}
    assert {"train/loss", "val/loss", "val/perplexity"} <= logged
