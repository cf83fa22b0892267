"""Where the Kubernetes part's modules moved, for the one-line "moved" error (trainrig/errors/moved.py reads this
table without importing it); a project without the part has neither the part nor its moves."""

MOVED_MODULES = {
    "cluster": "trainrig.kubernetes",
    "trainrig.kubernetes.pytorchjob": "trainrig.kubernetes.jobs",
}
