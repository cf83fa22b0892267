"""What the project-wide tests need to know of the shards and streaming concern (tests/helpers/parts.py reads it)."""

TOOLS = [("trainrig.data.shards", "trainrig.data.shards")]
