"""The emulated-hosts harness (trainrig/testing/hosts.py): hosts reach each other and nothing else, leave nothing."""

import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from tests.helpers import ROOT
from tests.helpers.run_if import run_if
from trainrig.testing.hosts import NETNS_CONFIG, EmulatedHosts, remove_leftovers

LISTEN = textwrap.dedent(
    """
    import socket, sys
    with socket.create_server((sys.argv[1], 0)) as server:
        print(server.getsockname()[1], flush=True)
        connection, (peer, _) = server.accept()
        connection.sendall(socket.gethostname().encode())
        print(peer, flush=True)
    """
)
CONNECT = textwrap.dedent(
    """
    import errno, socket, sys
    try:
        with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5) as connection:
            print("reached", connection.recv(100).decode())
    except OSError as error:
        print(errno.errorcode.get(error.errno, error))
    """
)

OWN_ADDRESS = "import socket; print(socket.gethostbyname(socket.gethostname()))"


def namespaces() -> set[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return {line.split()[0] for line in listed.splitlines() if line}


@run_if(emulated_hosts=True)
def test_hosts_reach_each_other_by_address_and_name():
    with EmulatedHosts(3) as hosts:
        first, second, third = hosts
        server = first.popen([sys.executable, "-c", LISTEN, first.address], stdout=subprocess.PIPE, text=True)
        port = server.stdout.readline().strip()
        reached = second.run([sys.executable, "-c", CONNECT, "h1", port])
        assert reached.stdout.strip() == "reached h1", reached
        assert server.stdout.readline().strip() == second.address  # the peer's own address, not a relay's
        assert server.wait(timeout=10) == 0

        for host in hosts:
            assert host.run(["hostname"]).stdout.strip() == host.name
            own_name = host.run(
                [sys.executable, "-c", "import socket; print(socket.gethostbyname(socket.gethostname()))"]
            )
            assert own_name.stdout.strip() == "127.0.1.1"  # as on stock Debian/Ubuntu: the trap gloo falls into
            workdir = Path(host.run(["pwd"]).stdout.strip())
            assert workdir == host.workdir and not workdir.is_relative_to(ROOT)
        assert third.run(["getent", "hosts", "h2"]).stdout.split()[0] == second.address
    assert socket.gethostname() not in {"h1", "h2", "h3"}  # this machine's name is untouched


@run_if(emulated_hosts=True)
def test_nothing_but_the_hosts_is_routable():
    with EmulatedHosts(2) as hosts:
        routes = hosts[0].run(["ip", "-4", "route"]).stdout.strip()
        assert routes.splitlines() == [f"198.18.0.0/24 dev eth0 proto kernel scope link src {hosts[0].address}"]
        for outside in ("192.0.2.1", "10.0.0.1", "8.8.8.8"):
            assert hosts[0].run([sys.executable, "-c", CONNECT, outside, "9"]).stdout.strip() == "ENETUNREACH"
        this_machine = subprocess.run(["ip", "-4", "-o", "address"], capture_output=True, text=True).stdout
        assert "198.18." not in this_machine  # the bridge and the hosts' links live in namespaces of their own


@run_if(emulated_hosts=True)
def test_teardown_leaves_nothing_even_after_an_error():
    with pytest.raises(RuntimeError), EmulatedHosts(2) as hosts:
        sleeper = hosts[1].popen(["sleep", "300"])
        names = {host.namespace for host in hosts} | {hosts.switch}
        assert names <= namespaces()
        raise RuntimeError("a failing test")
    assert not names & namespaces()
    assert sleeper.poll() is not None
    assert not any(NETNS_CONFIG.glob(f"{hosts.tag}*"))
    assert not hosts.root.exists()


@run_if(emulated_hosts=True)
def test_a_killed_harness_is_cleaned_up_by_the_next():
    script = (
        "import os, signal, sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from trainrig.testing.hosts import EmulatedHosts\n"
        "hosts = EmulatedHosts(1).__enter__()\n"
        "print(hosts.tag, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    killed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    tag = killed.stdout.strip()
    assert any(name.startswith(tag) for name in namespaces())
    remove_leftovers()
    assert not any(name.startswith(tag) for name in namespaces())
    assert not any(NETNS_CONFIG.glob(f"{tag}*"))
    assert not any(Path(tempfile.gettempdir()).glob(f"{tag}*"))
