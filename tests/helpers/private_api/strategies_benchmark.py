"""What the strategies benchmark touches."""

MODULE_NAMES = {
    ("torch.distributed.pipelining.stage", "_PipelineStageBase"): "benchmarks/strategies.py (compute actions timed)",
}
