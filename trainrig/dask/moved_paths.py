"""Where the Dask launcher part's modules moved, for the one-line "moved" error (trainrig/errors/moved.py reads this
table without importing it); a project without the part has neither the part nor its moves."""

MOVED_MODULES = {
    "launchers.dask": "trainrig.dask",
    "cli_extensions.dask": "trainrig.dask.plugin",
    "trainrig.dask.worker.DaskRankEnvironment": "trainrig.dask.rank_environment.DaskRankEnvironment",
    "trainrig.dask.worker.MetricsToClient": "trainrig.dask.results_to_client.MetricsToClient",
    "trainrig.dask.worker.CheckpointsToClient": "trainrig.dask.results_to_client.CheckpointsToClient",
}
