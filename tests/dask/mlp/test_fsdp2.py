"""fsdp2 under the Dask launcher: every rank writes its shard into `--dask.checkpoint_dir`, the run trains as the
one Lightning launches, and without a shared directory it stops in one line (rank 0 could not send the shards)."""

import pytest

from tests.dask.runs import losses
from tests.helpers.mlp.tiny_mlp import mlp_args, write_mlp_settings
from tests.helpers.runs import run_cli
from tests.helpers.sharded_runs import FSDP2, shard_files, sharded_checkpoint
from tests.helpers.strategy_runs import run_ok

DASK_FSDP2 = ("--trainer.strategy", "fsdp2", "--dask.n_workers", "2")


@pytest.mark.slow  # a Dask cluster and a Lightning-launched run: about 40 s on two idle cores
def test_fsdp2_on_dask_writes_sharded_checkpoints_to_the_shared_directory_and_trains_as_lightning_launched(
    tmp_path, shapes_root
):
    settings = write_mlp_settings(tmp_path, shapes_root, epochs=2, batch_size=16)
    run_ok("fit", mlp_args(settings, tmp_path / "lightning", *FSDP2))
    run_cli(
        "fit", mlp_args(settings, tmp_path / "dask", *DASK_FSDP2, "--dask.checkpoint_dir", str(tmp_path / "shared"))
    )
    last = sharded_checkpoint(tmp_path / "shared")
    assert shard_files(last) == [".metadata", "__0_0.distcp", "__1_0.distcp", "meta.pt"]
    assert losses(tmp_path / "dask") == losses(tmp_path / "lightning")


def test_fsdp2_on_dask_without_a_shared_directory_fails_in_one_line_and_writes_nothing(tmp_path, shapes_root, capsys):
    settings = write_mlp_settings(tmp_path, shapes_root, epochs=1, batch_size=16)
    with pytest.raises(SystemExit) as exit_info:
        run_cli("fit", mlp_args(settings, tmp_path / "logs", *DASK_FSDP2))
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "error: every rank writes its part of an fsdp2 checkpoint, which rank 0 cannot send to this client: give "
        "--dask.checkpoint_dir, a directory every worker and this client can read"
    )
    assert not (tmp_path / "logs").exists()
