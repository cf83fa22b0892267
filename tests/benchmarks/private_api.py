"""What the GPU-defaults benchmark touches."""

MODULE_NAMES = {
    ("torch", "_dynamo"): "benchmarks/gpu_defaults.py (graphs built again between compiled runs)",
}
