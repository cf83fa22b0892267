"""Hostile shard folders run no code (docs/security.md, "Data"): each case of issue 50's table, in both splits, in a
folder and in a bucket of the real S3 store, is refused in one line naming the split's folder before any sample is
read, and the payload's marker stays absent; through cli.py, exit 2 with nothing written. A chunk changed after the
check is refused as a loader worker reads it. Payloads and cases: tests/helpers/hostile_data.py."""

import contextlib
import io
import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.helpers.hostile import assert_refused
from tests.helpers.hostile_data import CASES, hostile_split
from tests.helpers.mlp.streamed_runs import write_config
from tests.helpers.run_if import run_if
from tests.helpers.runs import ROOT
from trainrig.data.location import Location
from trainrig.data.records import NUMPY_DTYPES
from trainrig.data.shards import MANIFEST, open_shards, streaming_datamodule, write_shards
from trainrig.data.streaming import ShardSamples
from trainrig.errors import UserInputError

pytestmark = run_if(packages=("litdata",))
pytest_plugins = ["tests.helpers.object_store"]


@pytest.fixture(scope="module")
def clean(tmp_path_factory, shapes_root) -> Path:
    """The shrunk MLP config over its own small shards, written by the project's writer."""
    folder = tmp_path_factory.mktemp("clean")
    config = write_config(folder / "streamed.yaml", folder / "shards", shapes_root, images_per_class=4)
    with contextlib.redirect_stderr(io.StringIO()):
        datamodule = streaming_datamodule(str(config))
        write_shards(datamodule.shard_source(), str(folder / "shards"), chunk_bytes=10000)
    return config


def hostile_copy(clean: Path, tmp_path: Path, split: str, case: str) -> tuple[Path, Path, str]:
    """A copy of the clean config and shards with `split` made hostile: the config, the marker, the expected line."""
    shutil.copytree(clean.parent / "shards", tmp_path / "shards")
    config = tmp_path / "streamed.yaml"
    config.write_text(clean.read_text().replace(str(clean.parent / "shards"), str(tmp_path / "shards")))
    marker = tmp_path / "marker"
    return config, marker, hostile_split(tmp_path / "shards", split, case, marker)


def identity(config: Path) -> dict:
    import yaml

    return yaml.safe_load(config.read_text())["data"]["init_args"]["source"]


def assert_opening_refused(url: str, source: dict, marker: Path, names: str) -> None:
    with pytest.raises(UserInputError) as refused:
        open_shards(url, source, "python -m trainrig.data.shards write")
    assert not marker.exists(), "the payload ran"
    line = str(refused.value)
    assert "\n" not in line and line.startswith(names), line


@pytest.mark.parametrize("split", ["train", "val"])
@pytest.mark.parametrize("case", CASES)
def test_a_hostile_split_is_refused_before_a_sample_is_read(clean, tmp_path, monkeypatch, split, case):
    config, marker, names = hostile_copy(clean, tmp_path, split, case)
    monkeypatch.syspath_prepend(str(tmp_path / "shards"))  # where LitData's tree-spec reader would import from
    assert_opening_refused(str(tmp_path / "shards"), identity(config), marker, names)


def test_the_checked_decoder_reads_what_litdatas_reader_reads(clean):
    """The project's own decoder gives every sample exactly as LitData's PyTreeLoader does (over the test's own,
    trusted shards): shards written before it train as they did."""
    from litdata.streaming.item_loader import PyTreeLoader
    from litdata.streaming.serializers import _get_serializers
    from litdata.utilities._pytree import treespec_loads

    shards = open_shards(str(clean.parent / "shards"), identity(clean), "")
    for split in ("train", "val"):
        samples = ShardSamples(shards, split, lambda record: record, window_chunks=2)
        config = shards.split(split)["config"]
        loader = PyTreeLoader()
        loader.setup({**config, "data_spec": treespec_loads(config["data_spec"])}, [], _get_serializers(None))
        for index in range(len(samples)):
            ours = samples.record(index)
            theirs = _litdata_record(samples, loader, index)
            theirs = {key: bytes(value) if isinstance(value, memoryview) else value for key, value in theirs.items()}
            assert ours.keys() == theirs.keys(), (split, index)
            for key, value in ours.items():  # the same types and values (LitData's bytes are a view of the chunk)
                assert type(value) is type(theirs[key]) and np.array_equal(value, theirs[key]), (split, index, key)


def _litdata_record(samples: ShardSamples, loader, index: int) -> dict:
    import bisect
    import struct

    number = bisect.bisect_right(samples.starts, index) - 1
    data = samples.chunk(number)
    begin, end = struct.unpack_from("<II", data, 4 + 4 * (index - samples.starts[number]))
    return loader.deserialize(memoryview(data)[begin:end])


def test_a_chunk_changed_after_the_check_is_refused_in_the_loader_worker(clean, tmp_path):
    """The manifest passed; then a chunk grows (swapped in between): the worker that reads it refuses it."""
    config, _, _ = hostile_copy(clean, tmp_path, "train", "chunk_outside")  # only to copy; the manifest put back
    shutil.copy(clean.parent / "shards" / MANIFEST, tmp_path / "shards" / MANIFEST)
    shards = open_shards(str(tmp_path / "shards"), identity(config), "")
    samples = ShardSamples(shards, "train", lambda record: record["label"], window_chunks=1)
    first = json.loads((tmp_path / "shards" / MANIFEST).read_text())["splits"]["train"]["chunks"][0]["file"]
    with (tmp_path / "shards" / "train" / first).open("ab") as chunk:
        chunk.write(b"\0" * 8)
    loader = torch.utils.data.DataLoader(samples, batch_size=len(samples), num_workers=1)
    with pytest.raises(UserInputError, match=f"shards at {tmp_path / 'shards' / 'train'}: chunk {first} is"):
        next(iter(loader))


@pytest.mark.parametrize(
    ("subcommand", "split"), [("validate", "val"), pytest.param("fit", "train", marks=pytest.mark.slow)]
)
def test_cli_refuses_pickled_fields_in_one_line_and_writes_nothing(clean, tmp_path, subcommand, split):
    """Issue 50's first two rows through cli.py: the training split for `fit`, the validation split for `validate`."""
    config, marker, names = hostile_copy(clean, tmp_path, split, "pickle")
    logs = tmp_path / "logs"
    command = ["cli.py", subcommand, "--config", str(config), "--trainer.logger.init_args.save_dir", str(logs)]
    assert_refused(command, marker, [tmp_path], names)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("subcommand", "split", "case"),
    [("test", "val", "pickle"), ("predict", "val", "pickle"), ("validate", "val", "tree_spec_import")]
    + [("validate", "val", "graph"), ("validate", "val", "int:pickle"), ("fit", "val", "pickle")],
)
def test_cli_refuses_every_subcommand_and_case(clean, tmp_path, subcommand, split, case):
    """The rest of the table through cli.py; the tree-spec case with the shard folder importable, as the default
    `data/shards/NAME` under the checkout is."""
    trained = []
    if subcommand == "predict":  # which needs a trained model: one step on the clean shards
        fit = ["cli.py", "fit", "--config", str(clean), "--trainer.max_steps", "1"]
        subprocess.run(
            [sys.executable, *fit, "--trainer.logger.init_args.save_dir", str(tmp_path / "trained")], cwd=ROOT
        )
        trained = ["--ckpt_path", str(next((tmp_path / "trained").rglob("last.ckpt")))]
    config, marker, names = hostile_copy(clean, tmp_path, split, case)
    logs = tmp_path / "logs"
    command = ["cli.py", subcommand, "--config", str(config), "--trainer.logger.init_args.save_dir", str(logs)]
    command += trained
    environment = {"PYTHONPATH": str(tmp_path / "shards")}
    assert_refused(command, marker, [tmp_path], names, environment=environment)


def test_a_hostile_bucket_is_refused_before_a_sample_is_read(clean, tmp_path, object_store_credentials):
    """A pickled field, an importing data_spec and a chunk named outside its folder, in a bucket of the real S3 store:
    the same checks, the line naming the bucket's split (the other cases share these checks; uploads are slow)."""
    import boto3

    bucket = f"hostile-{uuid.uuid4().hex[:12]}"
    boto3.session.Session().client("s3").create_bucket(Bucket=bucket)
    for case in ("pickle", "tree_spec_import", "chunk_outside"):
        case_folder = tmp_path / case.replace(":", "-")
        case_folder.mkdir()
        config, marker, _ = hostile_copy(clean, case_folder, "train", case)
        url = f"s3://{bucket}/{case_folder.name}"
        shards = case_folder / "shards"
        for path in sorted(shards.glob("*.*")) + sorted((shards / "train").iterdir()):  # what is read first
            Location(url).upload(str(path), str(path.relative_to(shards)))
        assert_opening_refused(url, identity(config), marker, f"shards at {url}/train")


def test_the_decoder_numbers_numpy_dtypes_as_litdata_does():
    from litdata.streaming.serializers import _NUMPY_DTYPES_MAPPING

    assert {number: np.dtype(dtype) for number, dtype in NUMPY_DTYPES.items()} == {
        number: dtype for number, dtype in _NUMPY_DTYPES_MAPPING.items() if number in NUMPY_DTYPES
    }
