"""`python -m trainrig.kubernetes.pytorchjob`, the command before TrainJobs: one line naming the one that replaced it
(trainrig/errors/moved.py), instead of a job of the kind nobody asked for."""

import sys

from trainrig.errors.moved import new_path

if __name__ == "__main__":
    old = "trainrig.kubernetes.pytorchjob"
    print(
        f"error: python -m {old} has moved to python -m {new_path(old)} (add --kind PyTorchJob for the same job)",
        file=sys.stderr,
    )
    sys.exit(2)
