"""What trainrig/data/ and its tests touch of LitData's private names."""

MODULE_NAMES = {
    ("litdata.streaming.serializers", "_get_serializers"): (
        "the hostile-shard tests in tests/data/ (LitData's own decoding, against trainrig/data/records.py's)"
    ),
    ("litdata.utilities._pytree", "treespec_loads"): "the hostile-shard tests in tests/data/ (a private module)",
    ("litdata.streaming.serializers", "_NUMPY_DTYPES_MAPPING"): (
        "trainrig/data/records.py (NUMPY_DTYPES numbers the dtypes as LitData does; checked by a test)"
    ),
}
