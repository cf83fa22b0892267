"""Where a run's ranks meet: the network interface their collectives use, chosen so that ranks on several machines
reach each other, and the address rank 0's rendezvous store listens on, the one the ranks meet at, not every address.

gloo binds the address the host name resolves to, and on stock Debian/Ubuntu that is a loopback address
(127.0.1.1): across machines every rank then waits out the rendezvous timeout. Unless GLOO_SOCKET_IFNAME or
NCCL_SOCKET_IFNAME is set, a rank of a job that spans machines uses the interface that reaches the rendezvous
address (MASTER_ADDR, as torchrun, a cluster operator or a launcher set it: the machine of global rank 0). All
launch paths go through `cli.run`, which applies this for the duration of the run.

torch's store (a TCPStore on MASTER_PORT, in global rank 0's process) listens on every address of its machine, and
it takes any client that connects: every process on the machine, and every machine that reaches it. Here it listens
on the address MASTER_ADDR resolves to, loopback for a job on one machine (see `_store_bound`).
"""

import importlib
import ipaddress
import os
import socket
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import psutil
from torch.distributed import TCPStore
from torch.distributed.constants import default_pg_timeout

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
    """The whole run: the interface chosen for it, its rendezvous store listening only where the ranks meet, and a
    process group that cannot form reported as one line."""
    with _interface_chosen(), _store_bound():
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


@contextmanager
def _store_bound() -> Iterator[None]:
    """During a run, rank 0's rendezvous store listens on one address (`_store_address`), not on every address.

    Every strategy here forms its process group through torch's `env://` rendezvous (Lightning's
    `_init_dist_connection`), whose handler gives the store no address to listen on: torch then binds the wildcard
    (`uv_ip6_addr("::", port, ...)` in `makeWithPort`, torch/csrc/distributed/c10d/TCPStoreLibUvBackend.cpp; the
    older backend's `Socket::listen(port)` alike). A store made with `master_listen_fd` serves on a socket bound
    beforehand instead. So ahead of that handler, in rank 0's process, a store server starts on a socket bound to
    the one address, on MASTER_PORT; the handler's own store is multi-tenant (`_create_c10d_store`), and a
    multi-tenant store on a port whose server this process already runs takes that server over rather than binding
    again. Restored after the run: a launcher's worker process may run the next job with another master.
    """
    # No public way to wrap a registered scheme's handler (trainrig/resume/torchrun_restarts.py wraps it too).
    handlers = importlib.import_module("torch.distributed.rendezvous")._rendezvous_handlers
    env_handler = handlers["env"]

    def bound_store(url: str, timeout: timedelta = default_pg_timeout, **kwargs):
        server = _store_server(url, timeout)
        stores = env_handler(url, timeout=timeout, **kwargs)
        first = next(stores)
        del server  # the handler's store holds the server now
        yield first
        yield from stores

    handlers["env"] = bound_store
    try:
        yield
    finally:
        handlers["env"] = env_handler


def _store_server(url: str, timeout: timedelta) -> TCPStore | None:
    """The store server of the `env://` rendezvous at `url`, started on a socket bound to `_store_address`; None in
    every process but rank 0 (a client), under torchrun's agent (the agent serves the store) and where torch's own
    listener on every address is needed."""
    rank = parse_qs(urlparse(url).query).get("rank", [os.environ.get("RANK")])[0]
    if rank != "0" or os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True" or "MASTER_PORT" not in os.environ:
        return None
    address = _store_address(os.environ)
    if address is None:
        return None
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        listener = socket.create_server((address, int(os.environ["MASTER_PORT"])), family=family)
    except OSError:
        # Not an address of this machine (a name for a virtual or translated address): only the wildcard serves.
        # Or the port is taken: torch's own bind then reports it as it always has.
        return None
    with listener:
        server = TCPStore(
            address,
            listener.getsockname()[1],
            is_master=True,
            timeout=timeout,
            wait_for_workers=False,
            multi_tenant=True,
            master_listen_fd=listener.fileno(),
        )
        listener.detach()  # the store closes the socket with its server
    return server


def _store_address(environ: Mapping[str, str]) -> str | None:
    """The address the ranks reach rank 0's store at: MASTER_ADDR resolved as the store's clients resolve it (first
    answer first). None where no one address may serve every rank: a name that resolves to loopback on rank 0's
    machine. The job may span machines (a node's or a pod's own host name on stock Debian/Ubuntu, "localhost" as a
    cluster operator may set it on the master), which reach it by its outward address while rank 0's own client
    connects by the name, to loopback; whether it does, not every scheduler says in the environment (a batch
    scheduler's tasks may carry no WORLD_SIZE)."""
    master = environ.get("MASTER_ADDR")
    if not master:
        return None
    try:
        address = socket.getaddrinfo(master, None, type=socket.SOCK_STREAM)[0][4][0]
    except OSError:
        return None  # the rendezvous itself reports an unknown master
    if ipaddress.ip_address(address).is_loopback and not _is_address(master):
        return None
    return address


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
