"""Launchers run the same cli.py job as several processes somewhere else, such as the workers of a Dask cluster;
one package per launcher."""
