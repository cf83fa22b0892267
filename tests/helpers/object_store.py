"""A real S3-compatible object store for the tests: OpenStack Swift with its `s3api` middleware, from Debian's packages.

    pytest_plugins = ["tests.helpers.object_store"]  # in the test module: its fixtures, one store per session

    def test_reads_from_the_store(object_store_credentials):
        boto3.client("s3").create_bucket(Bucket="shards")  # endpoint, keys and trust come from the environment

An in-process mock of S3 answers what its authors thought S3 answers; this is a server that real deployments run,
reached over HTTPS with S3's signatures, so a client's own behaviour (its retries, its checksums, its TLS, its errors)
is what the tests see. It is the smallest Swift that works: on 127.0.0.1, a proxy with `s3api tempauth` in its
pipeline, one object, container and account server sharing one device folder (`mount_check` off), rings of one
replica, and the memcached that tempauth refuses to work without; the proxy serves HTTPS with a self-signed
certificate that `openssl` makes for it. One tempauth user with a random key per store is the only credential: S3's
access key is `ACCOUNT:USER`. Every file (configuration, rings, certificate, stored objects, the servers' logs) sits
under the store's folder; every server is one process of its own (`workers = 0`) in a session of its own, killed when
the store closes, also after a failed test, and sent SIGKILL by the kernel if the test process dies first.

Debian 12's `swift-proxy`, `swift-object`, `swift-container`, `swift-account` (2.30) and `memcached`; the servers
run on the system's Python 3 (`/usr/bin/python3`), whose `swift` package they import. Swift keeps the object server's
metadata in extended attributes, so the folder must be on a file system with user xattrs.
`object_store_unavailable()` says what is missing, for a skip.
"""

import ctypes
import functools
import os
import pwd
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["ObjectStore", "object_store", "object_store_credentials", "object_store_unavailable"]

SWIFT_SERVERS = ("account", "container", "object")
COMMANDS = (*(f"swift-{kind}-server" for kind in (*SWIFT_SERVERS, "proxy")), "memcached", "openssl")
SWIFT_PYTHON = "/usr/bin/python3"  # the interpreter of Debian's python3-swift, which the servers run on
PACKAGES = "apt-get install swift-proxy swift-object swift-container swift-account memcached openssl"
START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 10
DEVICE = "d1"
ACCOUNT = "trainrig"
USER = "tests"
# Swift's own region name for s3api (its `location` option's default); clients sign requests for it.
REGION = "us-east-1"
PR_SET_PDEATHSIG = 1

# Rings of one partition power 0, one replica: every account, container and object on the one device.
BUILD_RINGS = """\
import sys
from swift.common.ring import RingBuilder
swift_dir, device = sys.argv[1], sys.argv[2]
for server_port in sys.argv[3:]:
    server, port = server_port.split("=")
    builder = RingBuilder(0, 1, 1)
    builder.add_dev({"region": 1, "zone": 1, "ip": "127.0.0.1", "port": int(port), "device": device, "weight": 1})
    builder.rebalance()
    builder.get_ring().save(f"{swift_dir}/{server}.ring.gz")
"""

COMMON = """\
[DEFAULT]
bind_ip = 127.0.0.1
bind_port = {port}
workers = 0
user = {user}
swift_dir = {root}
"""
TLS = """\
cert_file = {certificate}
key_file = {key}
"""
BACKEND = """\
devices = {root}/devices
mount_check = false

[pipeline:main]
pipeline = {kind}-server

[app:{kind}-server]
use = egg:swift#{kind}
"""
# s3api ahead of tempauth (it checks the order); slo lets it take multipart uploads; memcache ("cache") is required by
# tempauth; the proxy creates an account on its first write.
PROXY = """\
[pipeline:main]
pipeline = catch_errors gatekeeper healthcheck proxy-logging cache listing_formats s3api tempauth copy slo dlo \
versioned_writes proxy-logging proxy-server

[app:proxy-server]
use = egg:swift#proxy
account_autocreate = true

[filter:s3api]
use = egg:swift#s3api
location = {region}

[filter:tempauth]
use = egg:swift#tempauth
user_{account}_{user} = {key} .admin

[filter:cache]
use = egg:swift#memcache
memcache_servers = 127.0.0.1:{memcached_port}

[filter:catch_errors]
use = egg:swift#catch_errors

[filter:gatekeeper]
use = egg:swift#gatekeeper

[filter:healthcheck]
use = egg:swift#healthcheck

[filter:proxy-logging]
use = egg:swift#proxy_logging

[filter:listing_formats]
use = egg:swift#listing_formats

[filter:copy]
use = egg:swift#copy

[filter:slo]
use = egg:swift#slo

[filter:dlo]
use = egg:swift#dlo

[filter:versioned_writes]
use = egg:swift#versioned_writes
"""


@functools.cache
def object_store_unavailable() -> str | None:
    """Why an object store cannot be started here, or None when it can."""
    lacking = [command for command in COMMANDS if shutil.which(command) is None]
    if lacking:
        return f"an S3-compatible object store needs {', '.join(lacking)} ({PACKAGES})"
    with tempfile.NamedTemporaryFile(dir=tempfile.gettempdir()) as probe:
        try:
            os.setxattr(probe.name, "user.trainrig", b"1")
        except OSError as error:
            return f"Swift's object server needs user extended attributes, which {tempfile.gettempdir()} lacks: {error}"
    return None


class ObjectStore:
    """Swift with S3's API on 127.0.0.1, its files under `root`; a context manager that stops every server and leaves
    `root` when the block ends, also on an error."""

    def __init__(self, root: Path):
        self.root = root
        self.access_key = f"{ACCOUNT}:{USER}"
        self.secret_key = secrets.token_hex(16)
        self.certificate = root / "certificate.pem"
        self.port = 0
        self._servers: dict[str, subprocess.Popen] = {}

    @property
    def endpoint_url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def pids(self) -> list[int]:
        """The servers' process ids."""
        return [server.pid for server in self._servers.values()]

    def environment(self) -> dict[str, str]:
        """The variables that point S3 clients at this store: its endpoint, its one user's keys, S3's region, its
        certificate as the one to trust (boto3 reads `AWS_CA_BUNDLE`; obstore, which LitData moves chunks with, the
        system's store or `SSL_CERT_FILE`; obstore refuses plain http, as LitData never allows it), checksums as the
        store takes them; and no shared configuration files, so that a developer's `~/.aws` never takes part."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_CA_BUNDLE": str(self.certificate),
            "SSL_CERT_FILE": str(self.certificate),
            # boto3 >= 1.36 sends uploads over https as aws-chunked with a trailing checksum, which Swift 2.30 refuses
            # ("NotImplemented"); this asks for checksums only where S3 requires them, as before.
            "AWS_REQUEST_CHECKSUM_CALCULATION": "when_required",
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        }

    def __enter__(self) -> "ObjectStore":
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _start(self) -> None:
        (self.root / "devices" / DEVICE).mkdir(parents=True)
        (self.root / "logs").mkdir()
        ports = dict(zip(("proxy", "memcached", *SWIFT_SERVERS), _free_ports(2 + len(SWIFT_SERVERS)), strict=True))
        self.port = ports["proxy"]
        memcached = ["memcached", "--listen=127.0.0.1", f"--port={ports['memcached']}", "--udp-port=0"]
        as_root = ["--user=root"] if os.geteuid() == 0 else []  # memcached refuses root unless told so
        self._launch("memcached", [*memcached, "--memory-limit=16", *as_root])
        user = pwd.getpwuid(os.geteuid()).pw_name  # Swift's servers switch to `user`: stay who we are
        for kind in SWIFT_SERVERS:
            config = COMMON.format(port=ports[kind], user=user, root=self.root)
            config += BACKEND.format(root=self.root, kind=kind)
            self._launch(kind, [f"swift-{kind}-server", self._write(f"{kind}-server.conf", config), "--verbose"])
        rings = [f"{kind}={ports[kind]}" for kind in SWIFT_SERVERS]
        built = subprocess.run(
            [SWIFT_PYTHON, "-c", BUILD_RINGS, self.root, DEVICE, *rings], capture_output=True, text=True, check=False
        )
        if built.returncode != 0:
            raise RuntimeError(f"Swift's rings could not be built: {built.stderr[-2000:]}")
        key = self.root / "key.pem"
        self._certify(key)
        proxy = COMMON.format(port=self.port, user=user, root=self.root)
        proxy += TLS.format(certificate=self.certificate, key=key)
        proxy += PROXY.format(
            region=REGION, account=ACCOUNT, user=USER, key=self.secret_key, memcached_port=ports["memcached"]
        )
        self._launch("proxy", ["swift-proxy-server", self._write("proxy-server.conf", proxy), "--verbose"])
        self._wait_until_serving(ports)

    def _certify(self, key: Path) -> None:
        """A self-signed certificate for 127.0.0.1 and its key; the certificate is also what clients trust. Not a CA's:
        rustls refuses a CA's certificate presented by a server."""
        request = ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        request += ["-keyout", key, "-out", self.certificate, "-days", "2", "-subj", "/CN=127.0.0.1"]
        request += ["-addext", "subjectAltName=IP:127.0.0.1", "-addext", "basicConstraints=critical,CA:FALSE"]
        made = subprocess.run(request, capture_output=True, text=True, check=False)
        if made.returncode != 0:
            raise RuntimeError(f"openssl could not make the store's certificate: {made.stderr[-2000:]}")

    def _write(self, name: str, text: str) -> Path:
        path = self.root / name
        path.write_text(text)
        path.chmod(0o600)  # the proxy's holds the key
        return path

    def _launch(self, name: str, argv: list) -> None:
        with (self.root / "logs" / f"{name}.log").open("wb") as log:
            self._servers[name] = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_killed_with_the_tests,
            )

    def _wait_until_serving(self, ports: dict[str, int]) -> None:
        """Until every server accepts connections and the proxy answers its health check; a server that exits meanwhile
        or a deadline is an error with the logs' tails."""
        deadline = time.monotonic() + START_TIMEOUT_S
        waiting = set(self._servers)
        while waiting:
            for name in sorted(waiting):
                if self._servers[name].poll() is not None:
                    raise RuntimeError(f"the object store's {name} server exited at start:\n{self._logs()}")
                if _accepts(ports[name]) and (name != "proxy" or self._healthy()):
                    waiting.discard(name)
            if waiting and time.monotonic() > deadline:
                raise RuntimeError(f"the object store's {', '.join(sorted(waiting))} did not start:\n{self._logs()}")
            time.sleep(0.05)

    def _healthy(self) -> bool:
        trusting = ssl.create_default_context(cafile=self.certificate)
        try:
            with urllib.request.urlopen(f"{self.endpoint_url}/healthcheck", timeout=5, context=trusting) as response:
                return response.status == 200
        except OSError:
            return False

    def _logs(self) -> str:
        return "\n".join(
            f"== {path.name}\n{path.read_text(errors='replace')[-1500:]}"
            for path in sorted((self.root / "logs").glob("*.log"))
        )

    def close(self) -> None:
        """Stop every server (each one's whole session), and wait for them."""
        for server in self._servers.values():
            try:
                os.killpg(server.pid, signal.SIGKILL)
            except ProcessLookupError:  # exited already
                pass
        for server in self._servers.values():
            server.wait(timeout=STOP_TIMEOUT_S)
        self._servers.clear()


def _killed_with_the_tests() -> None:
    """SIGKILL when the process that started the server dies, even by SIGKILL: no server outlives its tests."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _free_ports(count: int) -> list[int]:
    """`count` distinct ports that nothing listens on now, all held open until every one is chosen."""
    probes = [socket.socket() for _ in range(count)]
    try:
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [probe.getsockname()[1] for probe in probes]
    finally:
        for probe in probes:
            probe.close()


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


@pytest.fixture(scope="session")
def object_store(tmp_path_factory) -> Iterator[ObjectStore]:
    """One object store for the test session, started by the first test that asks for it (a few seconds)."""
    # Here, not at the top: a process that only runs a store need not import torch, which run_if's module does.
    from tests.helpers.run_if import missing

    if (reason := object_store_unavailable()) is not None:
        missing(reason)
    with ObjectStore(tmp_path_factory.mktemp("object-store")) as store:
        yield store


@pytest.fixture
def object_store_credentials(object_store, monkeypatch) -> ObjectStore:
    """The store's endpoint and keys in this test's environment only, where S3 clients find them."""
    for name, value in object_store.environment().items():
        monkeypatch.setenv(name, value)
    return object_store
