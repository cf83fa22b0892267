"""A real SLURM cluster on emulated hosts: munged, slurmctld on the first host, one slurmd on each of the others.

    with SlurmCluster(nodes=2) as cluster:
        job = cluster.submit(Path("job.sbatch"), cwd=project, PATH=...)
        cluster.wait_for(job, "COMPLETED")

Debian's `slurm-wlm` and `munge` packages, as root. Each daemon runs on its emulated host (trainrig/testing/hosts.py:
its own network namespace, host name and `/etc/hosts`); all of them share this machine's file system, as cluster
nodes share a network file system, so a job's run directory is visible from every node and from the test. One
munged, with a key and socket of this cluster's own, serves every daemon and client command. Timers are short
(`slurm.conf` below) so that a requeued job runs again within seconds instead of minutes.

`SlurmCluster(accounting=True)` adds job accounting, as production clusters have it: a MariaDB server and slurmdbd
on the controller's host, so that `sacct` answers (tools such as submitit read finished jobs' states with it). It
costs a few seconds of start-up (the database's first initialisation), so only tests that need sacct ask for it.

`slurm_unavailable()` says what is missing, for a skip.
"""

import functools
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from trainrig.testing.hosts import EmulatedHosts, Host, hosts_unavailable

__all__ = ["SlurmCluster", "slurm_unavailable"]

SUBNET = "198.18.1"  # SLURM's own /24, so that its harnesses never share addresses with other emulated hosts
DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "squeue", "sacct")
ACCOUNTING_DAEMONS = ("slurmdbd", "sacctmgr", "mariadbd", "mariadb-install-db", "mariadb")
# How long a daemon that runs may take to be ready. No bound on a loaded machine's pace: a daemon that exits ends
# the wait at once; this catches one that runs but never answers.
START_TIMEOUT_S = 300
QUIET = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}  # the daemons log to files under the root
# Seconds: how long a finished job stays listed (MinJobAge, the default: tests read finished jobs' states), between
# SIGTERM and SIGKILL (KillWait: SLURM's default, so that a requeued job's tasks on a loaded machine finish their
# checkpoint; processes that exit sooner end it sooner), and before a node that stopped answering counts as down
# (SlurmdTimeout, default 300: short, for the lost-node tests; a slurmd, a C daemon, answers its pings within
# milliseconds even on a saturated machine).
MIN_JOB_AGE_S = 300
KILL_WAIT_S = 30
SLURMD_TIMEOUT_S = 10
# A requeued job is held for AuthInfo's cred_expire (default 120 s) before it may start again, and pending jobs are
# scheduled every sched_interval (default 60 s) besides on submissions and job ends.
REQUEUE_DELAY_S = 5
SCHEDULE_INTERVAL_S = 2

SLURM_CONF = """\
ClusterName=trainrig
SlurmctldHost={controller}({controller_address})
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket},cred_expire={requeue_delay}
SlurmctldPort={controller_port}
SlurmdPort={node_port}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/spool/%n/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/spool/%n/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
{accounting}
JobCompType=jobcomp/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
SchedulerParameters=sched_interval={sched_interval}
ReturnToService=2
JobRequeue=0
MinJobAge={min_job_age}
KillWait={kill_wait}
SlurmdTimeout={slurmd_timeout}
InactiveLimit=0
MessageTimeout=10
{nodes}
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""
NO_ACCOUNTING = "AccountingStorageType=accounting_storage/none"
# AccountingStoragePass names the munge socket for connections to slurmdbd (else the system's default socket).
ACCOUNTING = """\
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost={controller}
AccountingStoragePort={dbd_port}
AccountingStoragePass={munge_socket}"""
SLURMDBD_CONF = """\
AuthType=auth/munge
AuthInfo=socket={munge_socket}
DbdHost={controller}
DbdAddr={controller_address}
DbdPort={dbd_port}
SlurmUser=root
LogFile={root}/slurmdbd.log
PidFile={root}/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={database_port}
StorageUser=slurm
StoragePass={database_password}
StorageLoc=slurm_acct_db
"""
DBD_PORT = 6819
DATABASE_PORT = 3306  # on the controller host's own loopback


@functools.cache
def slurm_unavailable(accounting: bool = False) -> str | None:
    """Why a SLURM cluster (with `accounting`) cannot be started here, or None when it can."""
    missing = [daemon for daemon in DAEMONS if shutil.which(daemon) is None]
    if missing:
        return f"a SLURM cluster needs {', '.join(missing)} (apt-get install slurm-wlm munge)"
    missing = [daemon for daemon in ACCOUNTING_DAEMONS if shutil.which(daemon) is None] if accounting else []
    if missing:
        return f"SLURM accounting needs {', '.join(missing)} (apt-get install slurmdbd mariadb-server)"
    return hosts_unavailable()


class SlurmCluster:
    """A controller host and `nodes` compute hosts with `cpus` CPUs each, partition `debug`; a context manager that
    stops every daemon and job and removes the hosts when the block ends, also on an error."""

    def __init__(self, nodes: int = 2, cpus: int = 2, subnet: str = SUBNET, accounting: bool = False):
        self.hosts = EmulatedHosts(nodes + 1, subnet=subnet)
        self.root = self.hosts.root / "slurm"
        self.conf = self.root / "slurm.conf"
        self.munge_socket = self.root / "munge" / "munge.socket"
        self.cpus = cpus
        self.accounting = accounting
        self._munged: subprocess.Popen | None = None

    @property
    def controller(self) -> Host:
        return self.hosts[0]

    @property
    def nodes(self) -> list[Host]:
        return list(self.hosts)[1:]

    def __enter__(self) -> "SlurmCluster":
        self.hosts.__enter__()
        try:
            self._start()
        except BaseException:
            self.teardown()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self.teardown()

    def environment(self, **variables: str) -> dict[str, str]:
        """The environment of a client command (sbatch, scontrol) pointed at this cluster."""
        return self.controller.environment(SLURM_CONF=str(self.conf), **variables)

    def _start(self) -> None:
        (self.root / "state").mkdir(parents=True)
        for node in self.nodes:
            (self.root / "spool" / node.name).mkdir(parents=True)
        self._start_munge()
        node_lines = "\n".join(
            f"NodeName={node.name} NodeAddr={node.address} CPUs={self.cpus} State=UNKNOWN" for node in self.nodes
        )
        self.conf.write_text(
            SLURM_CONF.format(
                controller=self.controller.name,
                controller_address=self.controller.address,
                munge_socket=self.munge_socket,
                controller_port=6817,
                node_port=6818,
                root=self.root,
                min_job_age=MIN_JOB_AGE_S,
                kill_wait=KILL_WAIT_S,
                slurmd_timeout=SLURMD_TIMEOUT_S,
                requeue_delay=REQUEUE_DELAY_S,
                sched_interval=SCHEDULE_INTERVAL_S,
                nodes=node_lines,
                accounting=ACCOUNTING.format(
                    controller=self.controller.name, dbd_port=DBD_PORT, munge_socket=self.munge_socket
                )
                if self.accounting
                else NO_ACCOUNTING,
            )
        )
        if self.accounting:
            self._start_accounting()
        daemons = [self.controller.popen(["slurmctld", "-D", "-i", "-f", self.conf], env=self.environment(), **QUIET)]
        daemons += [self.start_slurmd(node) for node in self.nodes]
        self._until(self._all_idle, "the SLURM nodes did not become idle", daemons, self.root / "slurmctld.log")

    def _start_munge(self) -> None:
        """A munged of this cluster's own (key, socket), run as the munge user as the package runs it."""
        munge_dir = self.munge_socket.parent
        munge_dir.mkdir(parents=True)
        key = munge_dir / "munge.key"
        key.write_bytes(os.urandom(128))
        shutil.chown(munge_dir, "munge", "munge")
        shutil.chown(key, "munge", "munge")
        munge_dir.chmod(0o755)  # clients reach the socket through it
        key.chmod(0o400)
        for parent in (self.root, self.hosts.root):
            parent.chmod(0o755)
        # On the controller's host, so that it ends with the hosts, also after a test process killed outright.
        self._munged = self.controller.popen(
            [
                "runuser",
                "-u",
                "munge",
                "--",
                "munged",
                "--foreground",
                f"--key-file={key}",
                f"--socket={self.munge_socket}",
                f"--pid-file={munge_dir / 'munged.pid'}",
                f"--log-file={munge_dir / 'munged.log'}",
                f"--seed-file={munge_dir / 'munged.seed'}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            self._until(self.munge_socket.exists, "munged did not start", [self._munged], munge_dir / "munged.log")
        except RuntimeError as error:  # what munged said before it had a log file, when it exited
            said = self._munged.stderr.read()[-2000:] if self._munged.poll() is not None else ""
            raise RuntimeError(f"{error}{said}") from None

    def _start_accounting(self) -> None:
        """MariaDB on the controller host's loopback, a database user for slurmdbd, and slurmdbd beside slurmctld;
        slurmctld registers the cluster in it when it starts."""
        database = self.root / "mariadb"
        socket = database / "mariadb.sock"
        install = ["mariadb-install-db", "--no-defaults", "--user=root", f"--datadir={database / 'data'}"]
        install += ["--auth-root-authentication-method=socket", "--skip-test-db", "--skip-name-resolve"]
        result = subprocess.run(install, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"mariadb-install-db failed: {result.stderr[-2000:]}")
        server = ["mariadbd", "--no-defaults", "--user=root", f"--datadir={database / 'data'}", f"--socket={socket}"]
        server += ["--bind-address=127.0.0.1", f"--port={DATABASE_PORT}", f"--pid-file={database / 'mariadb.pid'}"]
        server += [f"--log-error={database / 'mariadb.log'}", "--skip-log-bin", "--innodb-buffer-pool-size=16M"]
        mariadb = self.controller.popen(server, **QUIET)
        password = os.urandom(12).hex()
        grant = (
            f"CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '{password}';"
            "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
        )
        grant_command = ["mariadb", "--no-defaults", f"--socket={socket}", "-e", grant]
        self._until(
            lambda: self.controller.run(grant_command).returncode == 0,
            "MariaDB did not start",
            [mariadb],
            database / "mariadb.log",
        )
        dbd_conf = self.root / "slurmdbd.conf"
        dbd_conf.write_text(
            SLURMDBD_CONF.format(
                munge_socket=self.munge_socket,
                controller=self.controller.name,
                controller_address=self.controller.address,
                dbd_port=DBD_PORT,
                root=self.root,
                database_port=DATABASE_PORT,
                database_password=password,
            )
        )
        dbd_conf.chmod(0o600)  # slurmdbd refuses a configuration others can read: it holds the password
        # slurmdbd reads the slurmdbd.conf beside SLURM_CONF's file.
        slurmdbd = self.controller.popen(["slurmdbd", "-D"], env=self.environment(), **QUIET)
        self._until(
            lambda: self.client(["sacctmgr", "--noheader", "list", "cluster"], check=False).returncode == 0,
            "slurmdbd did not start",
            [slurmdbd],
            self.root / "slurmdbd.log",
        )

    def _until(self, ready: Callable[[], bool], what: str, daemons: list[subprocess.Popen], log: Path):
        """Wait until `ready()`, for as long as every one of `daemons` runs (however slowly a loaded machine starts
        them), up to START_TIMEOUT_S; else an error naming `what`, with the tail of `log`."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ready():
            exited = [daemon.args for daemon in daemons if daemon.poll() is not None]
            if exited or time.monotonic() > deadline:
                tail = log.read_text()[-3000:] if log.exists() else ""
                why = f"exited: {exited}" if exited else f"not ready after {START_TIMEOUT_S} s"
                raise RuntimeError(f"{what} ({why})\n{tail}")
            time.sleep(0.2)

    def start_slurmd(self, node: Host) -> subprocess.Popen:
        """Start (or restart, after a node was lost) the slurmd of `node`."""
        return node.popen(["slurmd", "-D", "-N", node.name, "-f", self.conf], env=self.environment(), **QUIET)

    def _all_idle(self) -> bool:
        states = self.client(["sinfo", "--noheader", "--format=%n %t"], check=False).stdout
        lines = [line.split() for line in states.splitlines() if line.strip()]
        return len(lines) == len(self.nodes) and all(state == "idle" for _, state in lines)

    def client(self, argv: list[str], check: bool = True, **kwargs) -> subprocess.CompletedProcess:
        """A SLURM client command run on the controller host (as on a login node)."""
        result = self.controller.run(argv, env=kwargs.pop("env", None) or self.environment(), **kwargs)
        if check and result.returncode != 0:
            raise RuntimeError(f"{' '.join(map(str, argv))} failed: {result.stderr.strip()}")
        return result

    def submit(self, script: Path, cwd: Path, **variables: str) -> int:
        """`sbatch` the script from `cwd` with the client environment plus `variables` (which the job inherits, as
        sbatch passes the submitting shell's environment); the job's id."""
        result = self.client(["sbatch", "--parsable", script], cwd=cwd, env=self.environment(**variables))
        return int(result.stdout.strip().split(";")[0])

    def job(self, job_id: int) -> dict[str, str]:
        """`scontrol show job` as a dict (JobState, RestartCnt, ExitCode, NodeList, ...); empty once it is gone."""
        result = self.client(["scontrol", "--oneliner", "show", "job", str(job_id)], check=False)
        fields = {}
        for item in result.stdout.split():
            key, _, value = item.partition("=")
            fields.setdefault(key, value)
        return fields

    def wait_for(self, job_id: int, *states: str, timeout: float = 180) -> dict[str, str]:
        """Wait until the job is in one of `states` (e.g. COMPLETED, FAILED); its fields then."""
        deadline = time.monotonic() + timeout
        fields: dict[str, str] = {}
        while time.monotonic() < deadline:
            fields = self.job(job_id)
            if fields.get("JobState") in states:
                return fields
            time.sleep(0.3)
        raise TimeoutError(f"job {job_id} not {'/'.join(states)} after {timeout:.0f} s: {fields}")

    def teardown(self) -> None:
        """Stop every daemon and job (every process on the hosts) and remove the hosts and the cluster's files."""
        self.hosts.__exit__(None, None, None)
