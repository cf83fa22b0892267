"""Hostile shard folders for the data trust-boundary tests (docs/security.md, "Data"): a real shard folder changed as
someone who can write it would, each case of issue 50's table. Where LitData's own reader would run code, the payload
is tests/helpers/hostile.py's: it only appends to a marker file, so the marker's absence proves nothing ran.

    change = hostile_split(folder, "val", "pickle", marker)   # what the refusal line names
"""

import json
import shutil
import tempfile
from pathlib import Path

from tests.helpers.hostile import Payload
from trainrig.data.shards import MANIFEST

__all__ = ["CASES", "CODE_CASES", "hostile_split"]

FACTORY_MODULE = "hostile_factory"
# Each case: what it changes, and what the refusal line names.
CODE_CASES = ("pickle", "int:pickle", "graph", "tree_spec_import")  # LitData's reader would run the payload
CASES = (*CODE_CASES, "chunk_outside", "chunk_resized")


def _pickled_chunks(split_folder: Path, samples: int, marker: Path) -> dict:
    """The split rewritten by LitData's own writer with every sample's fields the payload, which it stores
    `pickle`d: its chunks replace the split's, and its index gives the manifest entry an attacker writes."""
    from litdata.streaming.writer import BinaryWriter

    with tempfile.TemporaryDirectory() as staging:
        writer = BinaryWriter(staging, chunk_bytes=1 << 20)
        for position in range(samples):
            writer[position] = {"image": Payload(marker), "label": position}
        writer.done()
        writer.merge()
        index = json.loads((Path(staging) / "index.json").read_text())
        shutil.rmtree(split_folder)
        shutil.copytree(staging, split_folder)
    chunks = [{"file": c["filename"], "samples": c["chunk_size"], "bytes": c["chunk_bytes"]} for c in index["chunks"]]
    return {"samples": samples, "chunks": chunks, "config": index["config"]}


def hostile_split(folder: Path, split: str, case: str, marker: Path) -> str:
    """Change the shard folder's `split` as `case` (one of CASES) says, keeping its `shards.json` valid JSON with the
    fingerprint and source an attacker copies. Returns what the refusal should name (the split's folder)."""
    manifest_path = Path(folder) / MANIFEST
    manifest = json.loads(manifest_path.read_text())
    info = manifest["splits"][split]
    split_folder = Path(folder) / split
    if case in ("pickle", "int:pickle", "graph"):
        info = _pickled_chunks(split_folder, info["samples"], marker)
        info["config"]["data_format"] = [case if f == "pickle" else f for f in info["config"]["data_format"]]
    elif case == "tree_spec_import":  # a defaultdict whose factory is a module in the shard folder
        (Path(folder) / f"{FACTORY_MODULE}.py").write_text(
            f"open({str(marker)!r}, 'a').write('payload ran\\n')\nmake = dict\n"
        )
        protocol, spec = json.loads(info["config"]["data_spec"])
        spec["type"] = "collections.defaultdict"
        context = {"default_factory_module": FACTORY_MODULE, "default_factory_name": "make"}
        spec["context"] = {**context, "dict_context": json.loads(spec["context"])}
        info["config"]["data_spec"] = json.dumps([protocol, spec])
    elif case == "chunk_outside":  # a chunk named out of the split's folder: any local file would be read
        info["chunks"][0]["file"] = "../" + MANIFEST
    elif case == "chunk_resized":  # a chunk changed after the manifest was written
        with (split_folder / info["chunks"][0]["file"]).open("ab") as chunk:
            chunk.write(b"\0" * 8)
    else:
        raise ValueError(f"no hostile case {case}")
    manifest["splits"][split] = info
    manifest_path.write_text(json.dumps(manifest, indent=1))
    return f"shards at {split_folder}"
