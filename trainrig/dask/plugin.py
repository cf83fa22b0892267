"""`--dask.*`: the same job on the workers of a Dask cluster (this package); Dask is imported only for such a run."""

import yaml

from trainrig.dask import DaskOptions, dask_requested


def add_arguments(parser) -> None:
    parser.add_class_arguments(DaskOptions, "dask")


def checkpoint_root(config) -> str | None:
    return config.dask.checkpoint_dir if dask_requested(config.dask) else None


def run_elsewhere(cli, job) -> bool:
    """With `--dask.*` set, the Dask workers build and run everything; this process only launches them.

    Without a subcommand (`run=False`, as the benchmarks build a trainer) there is nothing to launch.
    """
    if cli.subcommand is None or not dask_requested(cli.config[cli.subcommand].dask):
        return False
    from trainrig.dask.launch import launch

    resolved = yaml.safe_load(cli.parser.dump(cli.config, skip_unset=False))[cli.subcommand]
    launch(job, cli.subcommand, resolved)
    return True
