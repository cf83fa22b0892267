"""The MLP's shards written to an S3-compatible object store (a real server, tests/helpers/object_store.py) and
trained from there, the credentials only in the environment: none of them lands in a file the run writes."""

import contextlib
import io

import boto3
import yaml

from tests.helpers.run_if import run_if
from tests.helpers.runs import ROOT
from tests.helpers.strategy_runs import run_processes
from trainrig.data import shards

pytestmark = run_if(packages=("boto3", "litdata"))
pytest_plugins = ["tests.helpers.object_store"]


def test_shards_written_to_a_bucket_train_the_mlp_and_no_credential_is_written(
    object_store_credentials, tmp_path, shapes_root
):
    boto3.session.Session().client("s3").create_bucket(Bucket="mlp-shards")
    config = yaml.safe_load((ROOT / "configs" / "mlp_streaming.yaml").read_text())
    config["model"]["init_args"]["hidden_sizes"] = [32]
    config["data"]["init_args"] |= {"shards": "s3://mlp-shards/mlp", "batch_size": 8}
    config["data"]["init_args"]["source"]["init_args"] = {"root": str(shapes_root), "images_per_class": 8}
    path = tmp_path / "bucket.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    with contextlib.redirect_stderr(io.StringIO()):
        shards.main(["write", "--config", str(path), "--chunk-bytes", "10000"])
    stored = boto3.session.Session().client("s3").list_objects_v2(Bucket="mlp-shards", Prefix="mlp/")["Contents"]
    assert "mlp/shards.json" in {entry["Key"] for entry in stored}

    args = ["--config", str(path), "--trainer.max_epochs", "1", "--trainer.limit_train_batches", "2"]
    args += ["--trainer.num_sanity_val_steps", "0", "--trainer.logger.init_args.save_dir", str(tmp_path / "logs")]
    code, output = run_processes("fit", args)
    assert code == 0, output[-3000:]
    written = [file for file in (tmp_path / "logs").rglob("*") if file.is_file()]
    assert any(file.name == "last.ckpt" for file in written)
    for secret in (object_store_credentials.secret_key, object_store_credentials.access_key):
        assert secret not in output
        assert not [file for file in written if secret.encode() in file.read_bytes()], "a credential was written"
