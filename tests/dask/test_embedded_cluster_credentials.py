"""The launcher's embedded cluster takes only its own client and workers: during a real run, another process on this
machine cannot run code in the workers without the cluster's credentials (tests/dask/strangers.py)."""

import json
import logging

import pytest

from tests.helpers.runs import EXAMPLE_CONFIGS, run_cli, small_run_args


@pytest.mark.timeout(300)
def test_a_client_without_the_embedded_clusters_credentials_is_refused_during_a_run(tmp_path, shapes_root, caplog):
    report, marker = tmp_path / "report.json", tmp_path / "ran"
    strangers = ["--trainer.callbacks+=tests.dask.strangers.Strangers", "--trainer.callbacks.init_args.report"]
    strangers += [str(report), "--trainer.callbacks.init_args.marker", str(marker)]
    caplog.set_level(logging.INFO, logger="trainrig.dask")

    run_cli("fit", small_run_args(EXAMPLE_CONFIGS[-1], tmp_path, shapes_root, "--dask.n_workers", "2", *strangers))

    found = json.loads(report.read_text())
    outcomes = found["outcomes"]
    assert found["scheduler"].startswith("tls://127.0.0.1:"), found
    assert outcomes["plain tcp"].startswith("CommClosedError"), outcomes
    assert outcomes["credentials of its own"].startswith("FatalCommClosedError: TLS certificate"), outcomes
    assert not list(tmp_path.glob("ran-[01]")), "a stranger ran code in the workers"
    assert outcomes["the cluster's credentials"] == "ran" and (tmp_path / "ran-2").is_file(), outcomes
    ranks = [record.getMessage() for record in caplog.records if " on worker " in record.getMessage()]
    assert len(ranks) == 2 and all(" on worker tls://127.0.0.1:" in line for line in ranks), ranks
