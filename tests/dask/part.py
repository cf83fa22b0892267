"""What the project-wide tests need to know of the Dask part (tests/helpers/parts.py reads it)."""

LAYERS = {"dask": {"errors", "launch", "registry", "resume", "strategies"}}
SECTIONS = {"dask": "trainrig.dask.DaskOptions"}
