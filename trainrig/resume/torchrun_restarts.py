"""Workers that torchrun restarts (`--max-restarts`) meet in a store of their own attempt, not among dead keys.

By default every worker's process group is a client of the elastic agent's store, kept across restarts, and torch
2.14 no longer prefixes its keys by restart attempt (torch/distributed/rendezvous.py, `_create_c10d_store`: "We create
a new TCPStore for every retry"; the c10d rendezvous keeps one). A restarted worker may then read the dead attempt's
gloo addresses and fail with "Connection refused". This wraps the `env://` rendezvous, which Lightning's DDP uses, so
that each attempt's keys live under `attempt_<TORCHELASTIC_RESTART_COUNT>/`, as earlier torch releases did.

That count is each agent's own: on several machines it differs between them (an agent restarts its workers without
counting when another machine's failure starts a new round, and a replaced machine's agent starts from 0). There the
agents must give every round a store of its own, `TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`, and a worker that would
share the agent's store across machines with restarts enabled stops at once with that fix.
`test_torchrun_restarts_a_killed_worker...` in tests/resume/ and the torchrun tests across hosts in tests/hosts/ pin
the behaviour.
"""

import importlib
import os

from torch.distributed import PrefixStore

from trainrig.errors import UserInputError

__all__ = ["separate_restart_attempts"]


def separate_restart_attempts() -> None:
    """Install the per-attempt `env://` rendezvous in a process that torchrun restarted; elsewhere do nothing."""
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return  # not under torchrun, or each round has a store of its own
    if int(os.environ.get("GROUP_WORLD_SIZE", "1")) > 1 and int(os.environ.get("TORCHELASTIC_MAX_RESTARTS", "0")):
        raise UserInputError(
            "torchrun restarts across machines need a store per attempt: set TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 "
            "in torchrun's environment on every machine"
        )
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
