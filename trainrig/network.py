"""The network interface a rank's collectives use, chosen so that ranks on several machines reach each other.

gloo binds the address the host name resolves to, and on stock Debian/Ubuntu that is a loopback address
(127.0.1.1): across machines every rank then waits out the rendezvous timeout. Unless GLOO_SOCKET_IFNAME or
NCCL_SOCKET_IFNAME is set, a rank of a job that spans machines uses the interface that reaches the rendezvous
address (MASTER_ADDR, as torchrun, a cluster operator or a launcher set it: the machine of global rank 0). All
launch paths go through `cli.run`, which applies this for the duration of the run.
"""

import ipaddress
import os
import socket
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import psutil

from trainrig.errors import lost_peer, one_line

__all__ = ["RanksCannotConnect", "chosen_interface", "rendezvous_network"]

INTERFACE_VARIABLES = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")
IPV4_ROUTES = Path("/proc/net/route")
DISCARD_PORT = 9  # any port: a UDP connect() sends nothing, it only asks the kernel for the route


class RanksCannotConnect(RuntimeError):
    """The ranks of a job could not form their process group; the message says where this rank listened."""


def chosen_interface(environ: Mapping[str, str]) -> str | None:
    """The interface that reaches MASTER_ADDR from this machine, or None where the default choice is right.

    None for a job on one machine (the master at a loopback address, or every rank on this machine) and for a
    master whose name resolves to loopback on a machine with no default route and several interfaces.
    """
    master = environ.get("MASTER_ADDR")
    if not master:
        return None
    try:
        source = _source_address_towards(master)
    except OSError:
        return None  # the rendezvous itself reports an unknown or unreachable master
    if not ipaddress.ip_address(source).is_loopback:
        return _interface_holding(source)
    if _is_address(master) or not _spans_machines(environ):
        return None
    # This machine is the master, known by a name that resolves to loopback (its host name, or "localhost" as a
    # cluster operator may set it on the master): the other machines reach it through its outward interface.
    return _outward_interface()


@contextmanager
def rendezvous_network() -> Iterator[None]:
    """The whole run: the interface chosen for it, and a process group that cannot form reported as one line."""
    with _interface_chosen():
        try:
            yield
        except Exception as error:
            if lost_peer(error) is not None and not _process_group_formed():
                raise unreachable_ranks(error) from error
            raise


@contextmanager
def _interface_chosen() -> Iterator[None]:
    """Set GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME (those the user left unset) to `chosen_interface` during a run.

    The variables are restored afterwards: a launcher's worker process may run the next job, with another master.
    """
    interface = chosen_interface(os.environ)
    unset = [name for name in INTERFACE_VARIABLES if name not in os.environ]
    if interface is not None:
        # NCCL reads a name as a prefix ("eth1" also selects "eth10"); "=" asks for exactly this interface.
        os.environ.update({name: interface if name.startswith("GLOO") else f"={interface}" for name in unset})
    try:
        yield
    finally:
        if interface is not None:
            for name in unset:
                os.environ.pop(name, None)


def _process_group_formed() -> bool:
    distributed = sys.modules.get("torch.distributed")
    return distributed is not None and distributed.is_available() and distributed.is_initialized()


def unreachable_ranks(error: BaseException) -> RanksCannotConnect:
    """One line for a process group that could not form: where this rank listened and what to set."""
    interface = os.environ.get("GLOO_SOCKET_IFNAME")
    if interface is not None:
        bound = f"{_address_of(interface)} (GLOO_SOCKET_IFNAME={interface})"
    else:
        bound = f"{_host_name_address()} (the address of host name {socket.gethostname()!r})"
    master = f"{os.environ.get('MASTER_ADDR', '?')}:{os.environ.get('MASTER_PORT', '?')}"
    return RanksCannotConnect(
        f"the ranks could not connect ({type(error).__name__}: {one_line(error)}): this rank listened on {bound}, "
        f"the rendezvous is at {master}; set GLOO_SOCKET_IFNAME (NCCL_SOCKET_IFNAME on GPUs) to the interface that "
        "reaches the other machines"
    )


def _source_address_towards(host: str) -> str:
    family, _, _, _, address = socket.getaddrinfo(host, DISCARD_PORT, socket.AF_INET, socket.SOCK_DGRAM)[0]
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        probe.connect(address)
        return probe.getsockname()[0]


def _interface_holding(address: str) -> str | None:
    for name, addresses in psutil.net_if_addrs().items():
        if any(entry.family == socket.AF_INET and entry.address == address for entry in addresses):
            return name
    return None


def _outward_interface() -> str | None:
    """The default route's interface, else the only interface that is up, not loopback and has an IPv4 address."""
    if IPV4_ROUTES.is_file():
        for line in IPV4_ROUTES.read_text().splitlines()[1:]:
            fields = line.split()
            if len(fields) > 1 and fields[1] == "00000000":
                return fields[0]
    stats = psutil.net_if_stats()
    candidates = [
        name
        for name, addresses in psutil.net_if_addrs().items()
        if name in stats
        and stats[name].isup
        and any(
            entry.family == socket.AF_INET and not ipaddress.ip_address(entry.address).is_loopback
            for entry in addresses
        )
    ]
    return candidates[0] if len(candidates) == 1 else None


def _spans_machines(environ: Mapping[str, str]) -> bool:
    """More ranks in the job than on this machine (torchrun sets LOCAL_WORLD_SIZE; one rank a pod otherwise)."""
    return int(environ.get("WORLD_SIZE", "1")) > int(environ.get("LOCAL_WORLD_SIZE", "1"))


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _address_of(interface: str) -> str:
    addresses = psutil.net_if_addrs().get(interface, [])
    return next((entry.address for entry in addresses if entry.family == socket.AF_INET), f"no address on {interface}")


def _host_name_address() -> str:
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "an unresolvable host name"
