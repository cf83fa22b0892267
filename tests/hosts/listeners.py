"""A test helper the ranks import by class path: where rank 0's rendezvous store listens while the run trains."""

import json
import os
import socket
from pathlib import Path

import psutil
from lightning.pytorch import Callback


def store_listeners(port: int) -> list[str]:
    """The addresses this process listens on at `port`, as `address:port`."""
    return sorted(
        f"{connection.laddr.ip}:{connection.laddr.port}"
        for connection in psutil.Process().net_connections("inet")
        if connection.status == psutil.CONN_LISTEN and connection.laddr.port == port
    )


def outward_addresses() -> list[str]:
    """This machine's IPv4 addresses other than loopback: where its neighbours reach it."""
    return [
        entry.address
        for addresses in psutil.net_if_addrs().values()
        for entry in addresses
        if entry.family == socket.AF_INET and not entry.address.startswith("127.")
    ]


def answers(address: str, port: int) -> bool:
    try:
        socket.create_connection((address, port), timeout=5).close()
    except OSError:
        return False
    return True


class StoreListeners(Callback):
    """At the start of training, rank 0 writes to `report` where its process listens on MASTER_PORT (the store), and
    whether the store answers at each outward address of this machine."""

    def __init__(self, report: str):
        self.report = report

    def on_train_start(self, trainer, pl_module) -> None:
        if trainer.global_rank != 0:
            return
        port = int(os.environ["MASTER_PORT"])
        reached = {address: answers(address, port) for address in outward_addresses()}
        found = {"port": port, "listeners": store_listeners(port), "outward": reached}
        Path(self.report).write_text(json.dumps(found))
