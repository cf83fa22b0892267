"""A mistake in the Dask launcher's options gives one clear line naming it, at once, and writes nothing."""

import socket

from tests.helpers.runs import EXAMPLE_CONFIGS, small_run_args
from tests.helpers.user_errors import failing_run
from trainrig.dask.cluster import check_not_refused


def test_a_refused_dask_address_fails_at_once_naming_it(tmp_path, capsys):
    """Nothing listens at the port: Dask's client would retry for its 60 s timeout."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{probe.getsockname()[1]}"
    error = failing_run(capsys, "fit", small_run_args(EXAMPLE_CONFIGS[0], tmp_path) + ["--dask.address", address])
    assert error == (
        f"error: nothing listens at --dask.address {address} (connection refused); start the scheduler there or fix "
        "the address\n"
    )
    assert not any(tmp_path.iterdir())


def test_an_address_that_accepts_but_does_not_answer_is_left_to_the_clients_timeout():
    """A listener that never speaks Dask is not refused: the client waits for it (its timeout, not checked here)."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        check_not_refused(f"tcp://127.0.0.1:{silent.getsockname()[1]}")


def test_a_replacement_timeout_of_zero_fails_at_once_naming_it(tmp_path, capsys):
    args = small_run_args(EXAMPLE_CONFIGS[0], tmp_path) + ["--dask.n_workers", "2", "--dask.replacement_timeout", "0"]
    error = failing_run(capsys, "fit", args)
    assert error == "error: --dask.replacement_timeout must be more than 0 s, got 0.0\n"
    assert not any(tmp_path.iterdir())
