"""What the host-read counter touches (tests/monitoring/host_reads.py): the op every host read of a tensor's value
goes through, torch's dispatch-mode module (`TorchDispatchMode`, which torch documents but keeps there), and the
caller's frame, which says whether the data loader or an optimizer's step counter made the read."""

import sys

import torch

MODULE_NAMES = {
    ("torch.utils", "_python_dispatch"): "tests/monitoring/host_reads.py (TorchDispatchMode)",
}

ATTRIBUTES = [
    ("torch.ops.aten", lambda: torch.ops.aten, "_local_scalar_dense", "tests/monitoring/host_reads.py"),
    ("sys", lambda: sys, "_getframe", "tests/monitoring/host_reads.py (who made a read)"),
]
