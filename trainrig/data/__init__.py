"""Data sets larger than a machine: an example's data written once into shards (`shards.py`), streamed back in a
chunk-local order that resumes exactly on any number of processes (`streaming.py`). LitData (the `streaming` extra)
writes and reads the chunks; it is imported only when shards are written or read."""
