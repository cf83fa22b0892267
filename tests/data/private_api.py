"""What trainrig/data/ and its tests touch of LitData's private names."""

MODULE_NAMES = {
    ("litdata.streaming.serializers", "_get_serializers"): (
        "tests/data/mlp/test_hostile_shards.py (LitData's own decoding, against trainrig/data/records.py's)"
    ),
    ("litdata.utilities._pytree", "treespec_loads"): "tests/data/mlp/test_hostile_shards.py (a private module)",
    ("litdata.streaming.serializers", "_NUMPY_DTYPES_MAPPING"): (
        "trainrig/data/records.py (NUMPY_DTYPES numbers the dtypes as LitData does; checked by a test)"
    ),
}
