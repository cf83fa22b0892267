"""The Kubernetes part in a training process: `--trainer.strategy ddp_elastic`, the strategy of elastic PyTorchJobs
(elastic.py), registered by name as trainrig/strategies registers its own. The job generator (jobs.py) needs none of
it."""


def add_arguments(parser) -> None:
    """Registers the name while the CLI builds its parser, before `--trainer.strategy` is read."""
    from trainrig.kubernetes import elastic
    from trainrig.strategies import register_strategies

    register_strategies(elastic)
