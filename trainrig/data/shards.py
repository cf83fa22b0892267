"""Writes an example's data set into shards, once, for streaming; opens them again for training, refusing any that
are missing, half-written or from another data set.

    python -m trainrig.data.shards write --config configs/EXAMPLE_streaming.yaml [--output DIR_OR_S3_URL]

The config is the one training streams with: its datamodule names where the shards go (`shards`) and the map-style
data set they are written from (`source`, the example's own datamodule config). LitData's chunk writer writes each
split (`train/`, `val/`) as chunks plus an `index.json`, the samples in a fixed shuffled order so that every chunk
holds every class; then every chunk is checked, whole and counted, and
`shards.json` is written last, in one piece: it is what makes the folder shards, so an interrupted write never
leaves a folder that looks whole. `shards.json` holds a fingerprint of the source data set (a sha256 of every
sample): a rerun over the same data says it is up to date and writes nothing, one over other data is refused, and a
checkpoint's data position names the shards it counts in.
"""

import argparse
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trainrig.data.location import Location, litdata_module
from trainrig.data.records import check_split
from trainrig.errors import UserInputError
from trainrig.errors.exit_status import entry_point
from trainrig.errors.options import OneLineArgumentParser

__all__ = ["ShardSource", "Shards", "main", "open_shards", "option_parser", "write_shards"]

MANIFEST = "shards.json"
MARKER = "shards.partial"  # written first: what a folder holds besides it, an earlier interrupted write left
FORMAT = 1
WRITE_SEED = 0  # the fixed shuffle that spreads every class over every chunk
DEFAULT_CHUNK_BYTES = 64 * 2**20


@dataclass
class ShardSource:
    """What a streaming datamodule hands the writer: the source's config (`identity`, compared when the shards are
    opened), what training needs to know of it (`metadata`: class names, a vocabulary) and each split's samples, each
    a dict of bytes, ints and numpy arrays."""

    identity: dict[str, Any]
    metadata: dict[str, Any]
    splits: dict[str, Sequence[dict[str, Any]]]


@dataclass
class Shards:
    """Opened shards: where they are and their manifest."""

    location: Location
    manifest: dict[str, Any]

    @property
    def fingerprint(self) -> str:
        return self.manifest["fingerprint"]

    @property
    def metadata(self) -> dict[str, Any]:
        return self.manifest["metadata"]

    def split(self, name: str) -> dict[str, Any]:
        """`samples`, `chunks` ({file, samples, bytes} each, in order) and LitData's `config` of one split."""
        return self.manifest["splits"][name]


def fingerprint_of(source: ShardSource) -> str:
    digest = hashlib.sha256(json.dumps(source.identity, sort_keys=True).encode())
    for split, records in sorted(source.splits.items()):
        digest.update(f"{split}:{len(records)}".encode())
        for record in records:
            for key, value in sorted(record.items()):
                digest.update(key.encode())
                if isinstance(value, np.ndarray):
                    digest.update(f"{value.dtype}{value.shape}".encode() + value.tobytes())
                else:
                    digest.update(value if isinstance(value, bytes) else repr(value).encode())
    return digest.hexdigest()


def read_manifest(location: Location) -> dict[str, Any] | None:
    data = location.read(MANIFEST)
    return None if data is None else json.loads(data)


def _write_split(location: Location, split: str, records: Sequence[dict[str, Any]], chunk_bytes: int) -> dict:
    """LitData's chunk writer, in this process: its `optimize()` starts worker processes, seconds each, and with more
    than one it orders the samples by worker. An object store gets the chunks after they are written locally."""
    from tqdm import tqdm

    writer_class = litdata_module("litdata.streaming.writer").BinaryWriter
    order = np.random.default_rng(WRITE_SEED).permutation(len(records)).tolist()
    target = Location(location.join(split))
    with tempfile.TemporaryDirectory() as staging:
        folder = staging if target.remote else target.url
        writer = writer_class(folder, chunk_bytes=chunk_bytes)
        for position, index in enumerate(tqdm(order, desc=f"{split} samples", unit="", file=sys.stderr)):
            writer[position] = records[index]  # the shards' sample `position` is the source's `order[position]`
        writer.done()
        writer.merge()
        if target.remote:
            for name in sorted(os.listdir(staging), key=lambda name: name == "index.json"):  # the index last
                target.upload(os.path.join(staging, name), name)
    return _verified_split(target, len(records))


def _verified_split(folder: Location, expected: int) -> dict:
    """The split's chunks and LitData's config, after checking that every chunk is there whole and that they hold
    every sample."""
    data = folder.read("index.json")
    if data is None:
        raise RuntimeError(f"LitData wrote no index.json to {folder}")
    index = json.loads(data)
    chunks = [{"file": c["filename"], "samples": c["chunk_size"], "bytes": c["chunk_bytes"]} for c in index["chunks"]]
    missing = [chunk["file"] for chunk in chunks if not folder.holds_whole(chunk["file"], chunk["bytes"])]
    counted = sum(chunk["samples"] for chunk in chunks)
    if missing or counted != expected:
        raise RuntimeError(f"{folder}: chunks {missing} are not whole, or they hold {counted} of {expected} samples")
    return {"samples": expected, "chunks": chunks, "config": index["config"]}


def write_shards(source: ShardSource, output: str, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> str:
    """Write `source` into shards at `output` unless they are there already; returns the fingerprint."""
    location = Location(output)
    location.check_reachable()
    fingerprint = fingerprint_of(source)
    manifest = read_manifest(location)
    if manifest is not None:
        if manifest.get("fingerprint") != fingerprint:
            raise UserInputError(
                f"{location} holds shards of another data set (fingerprint {manifest.get('fingerprint', '?')[:12]}, "
                f"this one {fingerprint[:12]}); write to another --output or delete it first"
            )
        print(f"{location} is up to date (fingerprint {fingerprint[:12]})", file=sys.stderr)
        return fingerprint
    present = location.names()
    if present and MARKER not in present:
        raise UserInputError(f"{location} is not empty and holds no shards; write to a new or empty folder")
    location.write(MARKER, b"an interrupted shard write; the next write clears it\n")
    splits = {}
    for split, records in source.splits.items():
        location.remove(split)
        splits[split] = _write_split(location, split, records, chunk_bytes)
    manifest = {
        "format": FORMAT,
        "fingerprint": fingerprint,
        "source": source.identity,
        "metadata": source.metadata,
        "splits": splits,
    }
    location.write(MANIFEST, json.dumps(manifest, indent=1).encode())
    location.remove(MARKER)
    print(f"wrote shards to {location} (fingerprint {fingerprint[:12]})", file=sys.stderr)
    return fingerprint


def open_shards(url: str, identity: dict[str, Any], how_to_write: str) -> Shards:
    """The shards at `url`, refused in one line when missing, half-written or written from another source."""
    location = Location(url)
    location.check_reachable()
    manifest = read_manifest(location)
    if manifest is None:
        state = "half-written (the write was interrupted)" if MARKER in location.names() else "missing"
        raise UserInputError(f"shards at {location} are {state}; write them with {how_to_write}")
    if manifest.get("format") != FORMAT:
        raise UserInputError(f"shards at {location} are of format {manifest.get('format')}, not {FORMAT}")
    if manifest.get("source") != identity:
        raise UserInputError(
            f"shards at {location} were written from another data set ({json.dumps(manifest.get('source'))}); "
            f"point the config at its own shards or write them with {how_to_write}"
        )
    check_manifest(location, manifest)
    return Shards(location, manifest)


def check_manifest(location: Location, manifest: dict[str, Any]) -> None:
    """Everything training takes from a manifest is plain data of the shape the writer gives it, each split's chunks
    and fields checked as data only (trainrig/data/records.py), and each chunk there with the manifest's size (one
    listing per split, in a bucket too): a hostile manifest is refused here, in one line, before any sample is read."""
    splits = manifest.get("splits")
    fingerprint = manifest.get("fingerprint")
    if not isinstance(fingerprint, str) or not isinstance(manifest.get("metadata"), dict) or not splits:
        raise UserInputError(f"shards at {location}: {MANIFEST} lacks its fingerprint, metadata or splits")
    if not isinstance(splits, dict) or not set(splits) <= {"train", "val"}:
        raise UserInputError(f"shards at {location}: {MANIFEST} names other splits than train and val")
    for split, info in splits.items():
        check_split(info, location.join(split))
        present = Location(location.join(split)).sizes()
        for chunk in info["chunks"]:
            if present.get(chunk["file"]) != chunk["bytes"]:
                raise UserInputError(
                    f"shards at {location.join(split)}: chunk {chunk['file']} is missing or not the manifest's "
                    f"{chunk['bytes']} bytes"
                )


def option_parser() -> argparse.ArgumentParser:
    parser = OneLineArgumentParser(
        prog="python -m trainrig.data.shards",
        description="Write the data set of a streaming config's `source` into shards for streaming.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    write = commands.add_parser("write", help="write the shards (again: a no-op when they are up to date)")
    write.add_argument("--config", required=True, help="a streaming config (configs/*_streaming.yaml)")
    write.add_argument("--output", help="a folder or s3://bucket/prefix (default: the config's data.init_args.shards)")
    write.add_argument(
        "--chunk-bytes", type=int, default=DEFAULT_CHUNK_BYTES, help="bytes per chunk, the unit of reading"
    )
    return parser


def streaming_datamodule(config_path: str):
    """The config's datamodule, built as the CLI builds it (its options checked the same way)."""
    from lightning.pytorch import LightningDataModule

    from trainrig.errors.options import ShortErrorArgumentParser

    try:
        import yaml

        with open(config_path) as handle:
            data = (yaml.safe_load(handle) or {}).get("data")
    except OSError as error:
        raise UserInputError(f"--config {config_path}: {error.strerror}") from error
    parser = ShortErrorArgumentParser()
    parser.add_subclass_arguments(LightningDataModule, "data", required=True)
    datamodule = parser.instantiate(parser.parse_object({"data": data})).data
    if not hasattr(datamodule, "shard_source"):
        raise UserInputError(f"--config {config_path}: its datamodule {type(datamodule).__name__} does not stream")
    return datamodule


@entry_point
def main(argv: list[str] | None = None) -> None:
    options = option_parser().parse_args(sys.argv[1:] if argv is None else argv)
    datamodule = streaming_datamodule(options.config)
    if options.chunk_bytes < 1:
        raise UserInputError(f"--chunk-bytes must be at least 1, got {options.chunk_bytes}")
    write_shards(datamodule.shard_source(), options.output or datamodule.hparams.shards, options.chunk_bytes)


if __name__ == "__main__":
    main()
