"""A job on an existing Dask cluster over TLS across emulated hosts (trainrig/testing/hosts.py): a CA, and a certificate
and key of its own for the scheduler, each worker and the client, made here with the openssl command; the client
takes its TLS settings from Dask's configuration (environment variables). A client whose certificate another CA
signed is refused.
"""

import re
import shutil
import subprocess
from pathlib import Path

from tests.dask.hosts import start_dask
from tests.helpers.installed import installed_python
from tests.helpers.run_if import run_if
from tests.helpers.runs import ROOT, read_metrics, small_run_args
from trainrig.testing.hosts import EmulatedHosts, Host

RUN_TIMEOUT_S = 180
OPENSSL = shutil.which("openssl")
PROBE_TIMEOUT_S = 5
CONNECT = "import sys; from distributed import Client; Client(sys.argv[1], timeout={timeout}).close()"


def tls_options(role: str) -> list[str]:
    return ["--tls-ca-file", f"{role}/ca.pem", "--tls-cert", f"{role}/cert.pem", "--tls-key", f"{role}/key.pem"]


def openssl(directory: Path, *args: str) -> None:
    subprocess.run([OPENSSL, *args], cwd=directory, check=True, capture_output=True, timeout=30)


def certificate_authority(directory: Path) -> Path:
    """A CA valid for a day: ca.pem (to share) and ca-key.pem (to keep) in `directory`."""
    directory.mkdir(parents=True)
    key = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    subject = f"/CN={directory.name}"
    openssl(directory, "req", "-x509", *key, "-keyout", "ca-key.pem", "-out", "ca.pem", "-days", "1", "-subj", subject)
    return directory


def give_certificate(authority: Path, host: Host, role: str, trusted: Path | None = None) -> None:
    """What the host needs to play `role`, in `<role>/` of its directory: the CA's certificate (of `trusted` when
    given), and a certificate the CA signed for it, with its key."""
    directory = host.workdir / role
    directory.mkdir()
    key = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    openssl(directory, "req", *key, "-keyout", "key.pem", "-out", "request.csr", "-subj", f"/CN={role}")
    signing = ("-CA", authority / "ca.pem", "-CAkey", authority / "ca-key.pem", "-CAcreateserial")
    openssl(directory, "x509", "-req", "-in", "request.csr", *map(str, signing), "-out", "cert.pem", "-days", "1")
    shutil.copy((trusted or authority) / "ca.pem", directory / "ca.pem")


def client_environment(host: Host, role: str, **settings: str) -> dict[str, str]:
    """The client's TLS settings as Dask reads them from its configuration (`distributed.comm.*`)."""
    files = {"TLS__CA_FILE": "ca.pem", "TLS__CLIENT__CERT": "cert.pem", "TLS__CLIENT__KEY": "key.pem"}
    variables = {f"DASK_DISTRIBUTED__COMM__{name}": f"{role}/{file}" for name, file in files.items()}
    return host.environment(
        **variables, **{f"DASK_DISTRIBUTED__COMM__{name}": value for name, value in settings.items()}
    )


@run_if(executables=("openssl",), emulated_hosts=True)
def test_job_on_an_existing_cluster_over_tls_across_hosts(tmp_path):
    python = installed_python()
    with EmulatedHosts(3) as hosts:
        client_host, *worker_hosts = hosts
        authority = certificate_authority(tmp_path / "authority")
        for host, role in ((client_host, "scheduler"), (client_host, "client"), *((h, "worker") for h in worker_hosts)):
            give_certificate(authority, host, role)
        # Trusts the cluster's CA, but holds a certificate of another one.
        give_certificate(certificate_authority(tmp_path / "other"), client_host, "stranger", trusted=authority)
        scheduler, _, _ = start_dask(
            python, client_host, worker_hosts, "tls", scheduler=tls_options("scheduler"), worker=tls_options("worker")
        )

        probe = [python, "-c", CONNECT.format(timeout=PROBE_TIMEOUT_S), scheduler]
        stranger = client_host.run(probe, env=client_environment(client_host, "stranger"))
        # Refused in the handshake: the client sees the server's alert (SSLError) or, under TLS 1.3 where the server
        # checks the client's certificate after the client has finished, the connection closed (SSLEOFError).
        refusal = re.search(r"SSL\w*Error", stranger.stderr.splitlines()[-1])
        assert stranger.returncode != 0 and refusal, stranger.stderr[-2000:]

        shutil.copy(ROOT / "configs" / "mlp.yaml", client_host.workdir / "mlp.yaml")
        args = small_run_args("mlp.yaml", Path("logs"), Path("shapes"))
        args[args.index("--config") + 1] = "mlp.yaml"
        command = [python, ROOT / "cli.py", "fit", *args, "--dask.address", scheduler, "--dask.n_workers", "2"]
        command += [
            "--trainer.strategy",
            "ddp",
            "--trainer.strategy.init_args.timeout",
            "0:01:00",
        ]
        env = client_environment(client_host, "client", REQUIRE_ENCRYPTION="True")
        result = client_host.run(command, env=env, timeout=RUN_TIMEOUT_S)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        assert f"on worker tls://{worker_hosts[0].address}:" in result.stdout + result.stderr
        assert [row for row in read_metrics(client_host.workdir / "logs") if row.get("train/loss")]
        assert list((client_host.workdir / "logs").rglob("last.ckpt")), "the checkpoint came back over TLS"
