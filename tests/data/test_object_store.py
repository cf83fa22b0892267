"""The object store that streamed data is read from in the tests is a real S3 server (Swift with its s3api middleware,
tests/helpers/object_store.py): S3 clients reach it with nothing but the environment, LitData streams shards from it,
it refuses wrong credentials, and its servers never outlive the tests."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.run_if import run_if
from tests.helpers.runs import ROOT

pytestmark = run_if(packages=("boto3", "litdata"))
pytest_plugins = ["tests.helpers.object_store"]

# Starts a store, says its servers' process ids, and waits to be killed.
STORE_IN_A_PROCESS = """\
import sys, tempfile, time
from pathlib import Path
from tests.helpers.object_store import ObjectStore
with ObjectStore(Path(tempfile.mkdtemp(dir=sys.argv[1])) / "store") as store:
    print(*store.pids, flush=True)
    time.sleep(600)
"""


def test_a_bucket_keeps_lists_and_returns_an_object(object_store_credentials):
    """Bucket, put, list, get with a client given nothing: endpoint, keys and the certificate to trust all come from
    the environment; the bytes land in a file of Swift's object server."""
    s3 = _s3()
    s3.create_bucket(Bucket="objects")
    body = os.urandom(64)
    s3.put_object(Bucket="objects", Key="folder/sample.bin", Body=body)
    listed = s3.list_objects_v2(Bucket="objects", Prefix="folder/")["Contents"]
    assert [(entry["Key"], entry["Size"]) for entry in listed] == [("folder/sample.bin", 64)]
    assert s3.get_object(Bucket="objects", Key="folder/sample.bin")["Body"].read() == body
    stored = (object_store_credentials.root / "devices").rglob("*.data")
    assert any(path.read_bytes() == body for path in stored)


def test_litdata_streams_shards_from_a_bucket(object_store_credentials, tmp_path):
    """A LitData-optimized folder in s3://bucket/prefix, read whole by `StreamingDataset` (the index through boto3,
    the chunks through obstore) in a shuffled order."""
    from litdata import StreamingDataset
    from litdata.streaming import Cache

    written = tmp_path / "written"
    cache = Cache(str(written), chunk_size=4)
    for index in range(10):
        cache[index] = {"index": index, "name": f"pet-{index}"}
    cache.done()
    cache.merge()
    s3 = _s3()
    s3.create_bucket(Bucket="shards")
    for path in written.iterdir():
        s3.upload_file(str(path), "shards", f"names/{path.name}")

    dataset = StreamingDataset("s3://shards/names", cache_dir=str(tmp_path / "read"), shuffle=True, seed=3)
    items = list(dataset)
    assert sorted(item["index"] for item in items) == list(range(10))
    assert [item["index"] for item in items] != list(range(10))
    assert all(item["name"] == f"pet-{item['index']}" for item in items)


def test_wrong_credentials_are_refused(object_store_credentials, monkeypatch):
    """A wrong secret key is refused (403, SignatureDoesNotMatch): the store checks S3 signatures, so a test of a
    wrong-credentials message meets a real refusal."""
    from botocore.exceptions import ClientError

    _s3().create_bucket(Bucket="guarded")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "0" * 32)
    with pytest.raises(ClientError) as refused:
        _s3().list_objects_v2(Bucket="guarded")
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert refused.value.response["Error"]["Code"] == "SignatureDoesNotMatch"


def test_the_servers_end_with_the_process_that_started_them(object_store, tmp_path):
    """kill -9 of the process that started a store (another than the session's) ends each of its servers too (the
    kernel's parent-death signal), where no `finally` runs."""
    starter = subprocess.Popen(
        [sys.executable, "-c", STORE_IN_A_PROCESS, tmp_path], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        servers = [int(pid) for pid in starter.stdout.readline().split()]
    finally:
        starter.kill()
        starter.wait()
    assert len(servers) == 5
    deadline = time.monotonic() + 10
    while (alive := [pid for pid in servers if _alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in alive:  # a failure leaves no server behind
        os.kill(pid, signal.SIGKILL)
    assert not alive


def _s3():
    """A client of the environment as it is now (boto3's default session keeps the credentials it first read)."""
    import boto3

    return boto3.session.Session().client("s3")


def _alive(pid: int) -> bool:
    """Whether the process runs; a zombie (ended, not yet reaped by whoever adopted it) does not."""
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return status.rsplit(")", 1)[1].split()[0] != "Z"
