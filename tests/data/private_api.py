"""What trainrig/data/ touches of LitData's private names."""

MODULE_NAMES = {
    ("litdata.streaming.serializers", "_get_serializers"): "trainrig/data/streaming.py (decoding a stored sample)",
    ("litdata.utilities._pytree", "treespec_loads"): "trainrig/data/streaming.py (a private module)",
}
