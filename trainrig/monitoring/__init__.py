"""Watching a run without slowing it: what the progress bar shows and when values computed on the device are read on
the host (only at the steps the loggers write; tests/monitoring/test_host_reads.py holds every example to it)."""
