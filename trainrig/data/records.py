"""A split of shards read as data only: its manifest entry checked, its samples decoded by this module alone.

Whoever can write a shard folder or bucket (a colleague's folder, a copied one, a shared bucket) must not be able to
run code as whoever trains from it. LitData's own reader can: its serializers unpickle (`pickle`, `int:pickle`,
`graph`, ...) and its tree-spec reader imports the class a `data_spec` names. So nothing of a manifest reaches LitData
when shards are read. A split's entry is checked against what the project's writer (trainrig/data/shards.py, over the
streaming datamodules' records) produces, and refused in one line naming the folder otherwise:

- fields of the formats `bytes`, `str`, `int` and numpy arrays of numbers or bools (`numpy`, `no_header_numpy:N`);
  no compression, no encryption, LitData's `PyTreeLoader` layout;
- a `data_spec` of plain dicts (string keys), lists and tuples of those fields;
- chunks named by plain file names in the split's folder (`chunk-0-0.bin`), each a positive count of samples and
  bytes, the counts adding up to the split's.

`ChunkCheck` checks each chunk as it is read: its size the manifest's, its sample count and offsets its own.
"""

import json
import re
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from trainrig.errors import UserInputError

__all__ = ["RecordFormat", "check_chunk", "check_split"]

# LitData's numpy dtype numbers (litdata.streaming.serializers._NUMPY_DTYPES_MAPPING) of the dtypes that hold plain
# numbers: object, bytes, unicode and void arrays are never data the writer stores.
NUMPY_DTYPES = {
    0: np.int8,
    1: np.int16,
    2: np.int32,
    3: np.int64,
    4: np.uint8,
    5: np.uint16,
    6: np.uint32,
    7: np.uint64,
    8: np.float16,
    9: np.float32,
    10: np.float64,
    11: np.complex64,
    12: np.complex128,
    13: np.bool_,
}
CONTAINERS = {"builtins.dict", "builtins.list", "builtins.tuple"}
PLAIN_CONFIG = {"compression": None, "encryption": None, "item_loader": "PyTreeLoader"}
CHUNK_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,254}")
MAX_DEPTH = 32


def _int(data: memoryview) -> int:
    return struct.unpack("<q", data)[0]


def _bytes(data: memoryview) -> bytes:
    return bytes(data)


def _str(data: memoryview) -> str:
    return bytes(data).decode("utf-8")


def _numpy_with_header(data: memoryview) -> np.ndarray:
    """LitData's `numpy` field: dtype number, number of dimensions, each dimension (uint32 each), then the values."""
    dtype_number, dimensions = struct.unpack_from("<II", data)
    if dtype_number not in NUMPY_DTYPES or dimensions > MAX_DEPTH:
        raise ValueError(f"a numpy field of dtype number {dtype_number} and {dimensions} dimensions")
    shape = struct.unpack_from(f"<{dimensions}I", data, 8)
    return np.frombuffer(data[8 + 4 * dimensions :], NUMPY_DTYPES[dtype_number]).reshape(shape).copy()


@dataclass(frozen=True)
class NumpyWithoutHeader:
    """LitData's `no_header_numpy:N` field: the values of dtype number N, one dimension."""

    dtype: type

    def __call__(self, data: memoryview) -> np.ndarray:
        return np.frombuffer(data, self.dtype).copy()


def field_decoder(data_format: Any, folder: str):
    """The decoder of one field's format, or a refusal: only the formats the project's writer produces."""
    plain = {"int": _int, "bytes": _bytes, "str": _str, "numpy": _numpy_with_header}
    if isinstance(data_format, str) and data_format in plain:
        return plain[data_format]
    if isinstance(data_format, str) and data_format.startswith("no_header_numpy:"):
        number = data_format.removeprefix("no_header_numpy:")
        if number.isdigit() and int(number) in NUMPY_DTYPES:
            return NumpyWithoutHeader(NUMPY_DTYPES[int(number)])
    raise UserInputError(
        f"shards at {folder}: a field of format {json.dumps(data_format)[:60]}, which the project's writer never "
        "writes (only bytes, str, int and numpy arrays are read)"
    )


def _tree(node: Any, folder: str, depth: int = 0) -> tuple:
    """A `data_spec` node as plain data: ("leaf",), ("dict", keys, children), ("list"|"tuple", children)."""
    refused = UserInputError(
        f"shards at {folder}: its data_spec is not plain dicts, lists and tuples of fields (the project's writer "
        "writes no other)"
    )
    if depth > MAX_DEPTH or not isinstance(node, dict) or not isinstance(node.get("children_spec"), list):
        raise refused
    kind, context, children = node.get("type"), node.get("context"), node["children_spec"]
    if kind is None:
        if context is not None or children:
            raise refused
        return ("leaf",)
    if kind not in CONTAINERS or not isinstance(context, str):
        raise refused
    try:
        context = json.loads(context)
    except ValueError as error:
        raise refused from error
    subtrees = tuple(_tree(child, folder, depth + 1) for child in children)
    if kind != "builtins.dict":
        if context is not None:
            raise refused
        return (kind.removeprefix("builtins."), subtrees)
    if not (isinstance(context, list) and all(isinstance(k, str) for k in context) and len(context) == len(children)):
        raise refused
    return ("dict", tuple(context), subtrees)


def _leaves(tree: tuple) -> int:
    return 1 if tree[0] == "leaf" else sum(_leaves(child) for child in tree[-1])


def _built(tree: tuple, values) -> Any:
    """The sample: `tree` filled with the decoded fields, taken in order from the iterator `values`."""
    if tree[0] == "leaf":
        return next(values)
    children = [_built(child, values) for child in tree[-1]]
    if tree[0] == "dict":
        return dict(zip(tree[1], children))
    return children if tree[0] == "list" else tuple(children)


class RecordFormat:
    """How one split's records are decoded: its fields' decoders and the plain tree they fill. Plain data, so a
    DataLoader worker gets it checked already; it never hands a byte to LitData."""

    def __init__(self, config: Any, folder: str):
        if not isinstance(config, dict) or any(config.get(key) != value for key, value in PLAIN_CONFIG.items()):
            raise UserInputError(
                f"shards at {folder}: compressed, encrypted or of another layout than the project's writer writes"
            )
        formats = config.get("data_format")
        if not isinstance(formats, list) or not formats:
            raise UserInputError(f"shards at {folder}: its data_format is not a list of field formats")
        self.decoders = [field_decoder(data_format, folder) for data_format in formats]
        try:
            protocol, spec = json.loads(config.get("data_spec"))
        except (TypeError, ValueError) as error:
            raise UserInputError(f"shards at {folder}: its data_spec is not LitData's tree spec") from error
        self.tree = _tree(spec, folder) if protocol == 1 else None
        if self.tree is None or _leaves(self.tree) != len(self.decoders):
            raise UserInputError(f"shards at {folder}: its data_spec does not hold its {len(formats)} fields")
        self.sizes = struct.Struct(f"<{len(self.decoders)}I")
        flat = self.tree[0] == "dict" and all(child == ("leaf",) for child in self.tree[2])
        self.flat_keys = self.tree[1] if flat else None  # what every writer of this project stores: one dict

    def decode(self, item: memoryview) -> Any:
        """One stored item: the fields' sizes (uint32 each), then the fields (LitData's PyTreeLoader layout)."""
        offset = self.sizes.size
        values = []
        for size, decoder in zip(self.sizes.unpack_from(item), self.decoders):
            values.append(decoder(item[offset : offset + size]))
            offset += size
        if self.flat_keys is not None:
            return dict(zip(self.flat_keys, values))
        return _built(self.tree, iter(values))


def check_split(info: Any, folder: str) -> RecordFormat:
    """A manifest's split entry checked as data (the module's docstring says what); its records' format."""
    if not isinstance(info, dict) or not isinstance(info.get("chunks"), list) or not info["chunks"]:
        raise UserInputError(f"shards at {folder}: the manifest lists no chunks")
    for chunk in info["chunks"]:
        name = chunk.get("file") if isinstance(chunk, dict) else None
        if not isinstance(name, str) or not CHUNK_NAME.fullmatch(name):
            raise UserInputError(
                f"shards at {folder}: chunk {json.dumps(name)[:80]} is not a plain file name in the split's folder"
            )
        counts = [chunk.get("samples"), chunk.get("bytes")]
        if not all(type(count) is int and count > 0 for count in counts):
            raise UserInputError(f"shards at {folder}: chunk {name} has no positive count of samples and bytes")
    total = sum(chunk["samples"] for chunk in info["chunks"])
    if info.get("samples") != total:
        raise UserInputError(
            f"shards at {folder}: its chunks hold {total} samples, the manifest says {info.get('samples')}"
        )
    return RecordFormat(info.get("config"), folder)


def check_chunk(data: bytes, name: str, samples: int, size: int, folder: str) -> None:
    """A chunk as read agrees with the manifest: `size` bytes, `samples` items, offsets rising within it. Refused
    in one line otherwise (a changed, cut or swapped chunk)."""
    problem = None
    if len(data) != size:
        problem = f"is {len(data)} bytes, the manifest says {size}"
    elif struct.unpack_from("<I", data)[0] != samples or len(data) < 4 * (samples + 2):
        problem = f"does not hold the manifest's {samples} samples"
    else:
        offsets = np.frombuffer(data, "<u4", samples + 1, 4)
        if offsets[0] < 4 * (samples + 2) or offsets[-1] > size or np.any(np.diff(offsets.astype(np.int64)) < 0):
            problem = "has offsets outside it"
    if problem is not None:
        raise UserInputError(f"shards at {folder}: chunk {name} {problem}")
