"""The staged MLP streamed from shards under the Dask launcher (tests/helpers/mlp/streamed_runs.py): the shards on a
folder every worker reads, as a shared file system holds them, and each rank reading its own share of them."""

from pathlib import Path

import pytest

from tests.helpers.mlp.streamed_runs import assert_each_sample_once, assert_streamed, write_config, write_shards
from tests.helpers.ran import assert_ran_as
from tests.helpers.strategy_runs import run_ok

DASK = ("--dask.n_workers", "2")


@pytest.fixture(scope="module")
def shared(tmp_path_factory, shapes_root) -> Path:
    """The config, and its shards written once to a folder of their own (the shared file system)."""
    folder = tmp_path_factory.mktemp("shared")
    config = write_config(folder / "streamed.yaml", folder / "shards", shapes_root)
    code, printed = write_shards(config)
    assert code == 0, printed[-3000:]
    return config


@pytest.mark.slow  # CI budget: 54-80 s on 2 busy cores, most of it the cluster's start; torchrun across hosts stays
def test_dask_ranks_stream_the_shards_from_a_shared_folder_each_sample_once_an_epoch(shared, tmp_path):
    """Two Dask workers, one rank each: every epoch deals each of the 64 training samples to exactly one rank, and
    the run's config and checkpoint show that it streamed those shards."""
    record = ["--trainer.callbacks+=tests.helpers.sample_record.RecordSamples"]
    record += [f"--trainer.callbacks.init_args.directory={tmp_path / 'samples'}"]
    log_dir = tmp_path / "logs"
    run_ok("fit", ["--config", str(shared), "--trainer.logger.init_args.save_dir", str(log_dir), *DASK, *record])
    assert_ran_as(log_dir, strategy="DDPStrategy", processes=2)
    assert_streamed(log_dir, shared.parent / "shards")
    for epoch in (0, 1):
        assert_each_sample_once(tmp_path / "samples", epoch, ranks=2)
