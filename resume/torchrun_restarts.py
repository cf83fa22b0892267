"""Workers that torchrun restarts (`--max-restarts`) meet in a store of their own attempt, not among dead keys.

Under torchrun every worker's process group is a client of the elastic agent's store, and torch 2.14 no longer
prefixes its keys by restart attempt (torch/distributed/rendezvous.py, `_create_c10d_store`: "We create a new
TCPStore for every retry"; the c10d rendezvous keeps one). A restarted worker may then read the dead attempt's gloo
addresses and fail with "Connection refused". This wraps the `env://` rendezvous, which Lightning's DDP uses, so that
each attempt's keys live under `attempt_<TORCHELASTIC_RESTART_COUNT>/`, as earlier torch releases did.
`tests/test_resume.py::test_torchrun_restarts_a_killed_worker...` pins the behaviour.
"""

import importlib
import os

from torch.distributed import PrefixStore

__all__ = ["separate_restart_attempts"]


def separate_restart_attempts() -> None:
    """Install the per-attempt `env://` rendezvous in a process that torchrun restarted; elsewhere do nothing."""
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    if attempt == "0":
        return
    # No public way to replace a registered scheme's handler (the package attribute of that name is a function).
    handlers = importlib.import_module("torch.distributed.rendezvous")._rendezvous_handlers
    if getattr(handlers["env"], "attempt", None) == attempt:
        return
    env_handler = handlers["env"]

    def per_attempt(url: str, **kwargs):
        for store, rank, world_size in env_handler(url, **kwargs):
            yield PrefixStore(f"attempt_{attempt}/", store), rank, world_size

    per_attempt.attempt = attempt
    handlers["env"] = per_attempt
