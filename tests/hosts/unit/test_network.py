"""The interface choice of trainrig/network.py on this machine; the jobs across emulated hosts (tests/hosts/) prove it
across hosts."""

import os
import socket

import psutil

from tests.helpers.run_if import missing
from trainrig.network import chosen_interface, rendezvous_network


def an_outward_address() -> tuple[str, str]:
    """(interface, IPv4 address) of an interface of this machine other than loopback."""
    for name, addresses in psutil.net_if_addrs().items():
        for entry in addresses:
            if entry.family == socket.AF_INET and not entry.address.startswith("127."):
                return name, entry.address
    missing("this machine has no interface besides loopback")


def test_a_job_on_one_machine_keeps_the_default():
    assert chosen_interface({}) is None
    assert chosen_interface({"MASTER_ADDR": "127.0.0.1", "WORLD_SIZE": "4"}) is None
    assert chosen_interface({"MASTER_ADDR": "localhost", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "4"}) is None


def test_the_interface_holding_the_rendezvous_address_is_chosen():
    interface, address = an_outward_address()
    assert chosen_interface({"MASTER_ADDR": address, "WORLD_SIZE": "2"}) == interface


def test_the_choice_lasts_for_the_run_and_leaves_the_users_setting_alone(monkeypatch):
    interface, address = an_outward_address()
    monkeypatch.setenv("MASTER_ADDR", address)
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "chosen-by-the-user")
    monkeypatch.delenv("NCCL_SOCKET_IFNAME", raising=False)
    with rendezvous_network():
        assert os.environ["GLOO_SOCKET_IFNAME"] == "chosen-by-the-user"
        assert os.environ["NCCL_SOCKET_IFNAME"] == f"={interface}"  # this interface only, not every name it prefixes
    assert os.environ["GLOO_SOCKET_IFNAME"] == "chosen-by-the-user"
    assert "NCCL_SOCKET_IFNAME" not in os.environ  # a launcher's next job in this process chooses again
