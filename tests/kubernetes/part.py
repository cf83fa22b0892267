"""What the project-wide tests need to know of the Kubernetes part (tests/helpers/parts.py reads it)."""

LAYERS = {"kubernetes": {"errors", "launch", "strategies"}}
TOOLS = [("trainrig.kubernetes.jobs", "trainrig.kubernetes.request")]
