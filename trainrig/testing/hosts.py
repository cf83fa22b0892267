"""Several machines on this one: Linux network namespaces joined by a bridge, for tests of jobs across hosts.

Each host has its own network stack (an `eth0` with one address from the benchmarking range 198.18.0.0/15 and its
own loopback; no default route, so nothing leaves the machine), its own host name (a UTS namespace per process) and
its own working directory outside the checkout. Its `/etc/hosts` maps its own name to 127.0.1.1, as stock
Debian/Ubuntu installs do, and the other hosts' names to their addresses, as DNS would. The bridge lives in a
namespace of its own, so the machine's own network never sees the hosts.

    with EmulatedHosts(3) as hosts:
        server = hosts[0].popen(["python", "-m", "http.server", "--bind", hosts[0].address])
        hosts[1].run(["python", "-c", "..."], env={...})

Everything is removed when the block ends, also on an error or Ctrl-C, and at interpreter exit; namespaces left by
a process that was killed outright are removed by the next harness (their names carry the creating process's id).
Creating namespaces needs root: `hosts_unavailable()` says why they cannot be made, for a skip.
"""

import atexit
import functools
import os
import shutil
import signal
import subprocess
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "ldthost"
SUBNET = "198.18.0"  # a /24 in the benchmarking range, reserved for tests like this one (RFC 2544)
NETNS_CONFIG = Path("/etc/netns")  # each namespace's hosts file, where `ip netns exec NS` would look for it
SELF_ADDRESS = "127.0.1.1"
COMMAND_TIMEOUT_S = 30
IP = shutil.which("ip") or "/usr/sbin/ip"
NSENTER = shutil.which("nsenter") or "/usr/bin/nsenter"
UNSHARE = shutil.which("unshare") or "/usr/bin/unshare"
NETNS_RUN = Path("/run/netns")  # where `ip netns add` pins each namespace, for nsenter

__all__ = ["EmulatedHosts", "Host", "hosts_unavailable", "remove_leftovers"]


@functools.cache
def hosts_unavailable() -> str | None:
    """Why emulated hosts cannot be made here, or None when they can."""
    if os.geteuid() != 0:
        return "emulated hosts need root (network namespaces)"
    for tool in ("ip", "nsenter", "unshare", "hostname", "mount"):
        if shutil.which(tool) is None:
            return f"emulated hosts need `{tool}`"
    probe = f"{PREFIX}{os.getpid()}-probe"
    try:
        _ip("netns", "add", probe)
        _ip("-n", probe, "link", "add", "probe0", "type", "bridge")
    except subprocess.CalledProcessError as error:
        return f"cannot make network namespaces here: {error.stderr.strip()}"
    finally:
        subprocess.run([IP, "netns", "delete", probe], capture_output=True)
    return None


@dataclass
class Host:
    """One emulated machine: `run`/`popen` start a process on it, as `ssh host CMD` would."""

    name: str
    namespace: str
    address: str
    workdir: Path
    processes: list[subprocess.Popen] = field(default_factory=list, repr=False)

    def command(self, argv: Sequence[str]) -> list[str]:
        """`argv` run in this host's network namespace, with this host's name and its `/etc/hosts`.

        `nsenter` rather than `ip netns exec`, which remounts `/sys`: on a cgroup v1 machine the cgroup hierarchy
        then disappears and daemons that use it fail. A mount namespace of the process's own carries the
        hosts file bound over `/etc/hosts`, and a UTS namespace its host name.
        """
        hosts_file = NETNS_CONFIG / self.namespace / "hosts"
        set_up_then_run = 'hostname "$0" && mount --bind "$1" /etc/hosts && shift && exec "$@"'
        wrapper = [NSENTER, f"--net={NETNS_RUN / self.namespace}", UNSHARE, "--uts", "--mount", "--propagation"]
        wrapper += ["private", "sh", "-c", set_up_then_run, self.name, str(hosts_file)]
        return wrapper + [str(arg) for arg in argv]

    def environment(self, **variables: str) -> dict[str, str]:
        """A login's environment on this host (no variable of the test process leaks in) plus `variables`."""
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.workdir),
            "OMP_NUM_THREADS": "1",
            "PYTHONUNBUFFERED": "1",
            **variables,
        }

    def popen(self, argv: Sequence[str], env: dict[str, str] | None = None, **kwargs) -> subprocess.Popen:
        """Start `argv` on this host in its working directory; it is killed, with its children, at teardown."""
        kwargs.setdefault("cwd", self.workdir)
        process = subprocess.Popen(
            self.command(argv), env=self.environment() if env is None else env, start_new_session=True, **kwargs
        )
        self.processes.append(process)
        return process

    def lose(self) -> None:
        """Kill every process on this host at once (SIGKILL), as when the machine is lost: also those that left the
        process group they were started in (torchrun's workers)."""
        for pid in subprocess.run([IP, "netns", "pids", self.namespace], capture_output=True, text=True).stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        for process in self.processes:
            process.wait()

    def run(
        self, argv: Sequence[str], env: dict[str, str] | None = None, timeout: float = COMMAND_TIMEOUT_S, **kwargs
    ) -> subprocess.CompletedProcess:
        """Run `argv` on this host to its end; output captured as text."""
        kwargs.setdefault("cwd", self.workdir)
        return subprocess.run(
            self.command(argv),
            env=self.environment() if env is None else env,
            capture_output=True,
            text=True,
            timeout=timeout,
            start_new_session=True,
            **kwargs,
        )


class EmulatedHosts:
    """`count` hosts h1..hN at 198.18.0.1..N/24 (or `subnet`.1..N) on one bridge; a context manager that removes
    them all at exit. A test suite that runs harnesses side by side gives each kind of test a /24 of its own."""

    def __init__(self, count: int, subnet: str = SUBNET, aliases: dict[str, int] | None = None):
        """`aliases`: more names, each resolving on every host (its own included) to the address of the host at that
        index, as a cluster's DNS names a pod (`<job>-node-0-0.<job>`)."""
        self.count = count
        self.aliases = aliases or {}
        self.tag = f"{PREFIX}{os.getpid()}x{uuid.uuid4().hex[:6]}"
        self.switch = f"{self.tag}-sw"
        self.root = Path(tempfile.mkdtemp(prefix=f"{self.tag}-"))
        self.hosts = [
            Host(f"h{i}", f"{self.tag}-h{i}", f"{subnet}.{i}", self.root / f"h{i}") for i in range(1, count + 1)
        ]

    def __enter__(self) -> "EmulatedHosts":
        atexit.register(self.teardown)
        try:
            self._create()
        except BaseException:
            self.teardown()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self.teardown()
        atexit.unregister(self.teardown)

    def __getitem__(self, index: int) -> Host:
        return self.hosts[index]

    def __iter__(self):
        return iter(self.hosts)

    def __len__(self) -> int:
        return len(self.hosts)

    def _create(self) -> None:
        remove_leftovers()
        _ip("netns", "add", self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        names = "".join(f"{host.address} {host.name}\n" for host in self.hosts)
        for index, host in enumerate(self.hosts, start=1):
            _ip("netns", "add", host.namespace)
            port = f"p{index}"
            peer = ["peer", "name", port, "netns", self.switch]
            _ip("link", "add", "eth0", "netns", host.namespace, "type", "veth", *peer)
            _ip("-n", self.switch, "link", "set", port, "master", "br0", "up")
            _ip("-n", host.namespace, "address", "add", f"{host.address}/24", "dev", "eth0")
            _ip("-n", host.namespace, "link", "set", "eth0", "up")
            _ip("-n", host.namespace, "link", "set", "lo", "up")
            config = NETNS_CONFIG / host.namespace
            config.mkdir(parents=True)
            own_name_on_loopback = names.replace(f"{host.address} {host.name}\n", f"{SELF_ADDRESS} {host.name}\n")
            aliases = "".join(f"{self.hosts[index].address} {alias}\n" for alias, index in self.aliases.items())
            (config / "hosts").write_text(f"127.0.0.1 localhost\n{own_name_on_loopback}{aliases}")
            host.workdir.mkdir()

    def teardown(self) -> None:
        """Kill every process on the hosts, remove the namespaces, their /etc/netns files and working directories."""
        for host in self.hosts:
            for process in host.processes:
                _kill_group(process.pid)
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
        for namespace in [host.namespace for host in self.hosts] + [self.switch]:
            _remove_namespace(namespace)
        shutil.rmtree(self.root, ignore_errors=True)


def remove_leftovers() -> None:
    """Remove the namespaces (and their files) of harnesses whose process is gone, e.g. killed with SIGKILL."""
    listed = subprocess.run([IP, "netns", "list"], capture_output=True, text=True).stdout.split()
    configs = [path.name for path in NETNS_CONFIG.glob(f"{PREFIX}*")] if NETNS_CONFIG.is_dir() else []
    for namespace in set(name for name in listed + configs if name.startswith(PREFIX)):
        owner = namespace[len(PREFIX) :].split("x", 1)[0].split("-", 1)[0]
        if not owner.isdigit() or not _alive(int(owner)):
            _remove_namespace(namespace)
    for leftover in Path(tempfile.gettempdir()).glob(f"{PREFIX}*"):
        owner = leftover.name[len(PREFIX) :].split("x", 1)[0]
        if owner.isdigit() and not _alive(int(owner)):
            shutil.rmtree(leftover, ignore_errors=True)


def _remove_namespace(namespace: str) -> None:
    pids = subprocess.run([IP, "netns", "pids", namespace], capture_output=True, text=True).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
    subprocess.run([IP, "netns", "delete", namespace], capture_output=True)
    shutil.rmtree(NETNS_CONFIG / namespace, ignore_errors=True)
    try:
        NETNS_CONFIG.rmdir()  # only when empty: another harness may be using it
    except OSError:
        pass


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _ip(*args: str) -> None:
    subprocess.run([IP, *args], check=True, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
