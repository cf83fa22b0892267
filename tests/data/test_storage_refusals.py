"""Storage a run cannot use is one line before anything is read or written (`open_shards`, a run's first touch of
its shards; the writer asks the same `check_reachable` first): an object store that is unreachable, has a certificate
this machine does not trust, gets no or wrong credentials, or has no such bucket. Against the real S3 store of
tests/helpers/object_store.py; the line never holds a key."""

import socket
import uuid

import pytest

from tests.helpers.run_if import run_if
from trainrig.data.location import Location
from trainrig.data.shards import open_shards
from trainrig.errors import UserInputError

pytestmark = run_if(packages=("boto3", "litdata"))
pytest_plugins = ["tests.helpers.object_store"]


def refusal(url: str, store) -> str:
    with pytest.raises(UserInputError) as refused:
        open_shards(url, identity={}, how_to_write="python -m trainrig.data.shards write")
    line = str(refused.value)
    assert "\n" not in line and store.secret_key not in line and store.access_key not in line
    return line


@pytest.fixture
def bucket(object_store_credentials) -> str:
    import boto3

    name = f"reachable-{uuid.uuid4().hex[:12]}"  # one store serves the session
    boto3.session.Session().client("s3").create_bucket(Bucket=name)
    return f"s3://{name}/shards"


def test_a_bucket_the_credentials_reach_passes(bucket, object_store_credentials):
    Location(bucket).check_reachable()


def test_wrong_or_no_credentials_are_one_line(bucket, object_store_credentials, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "0" * 32)
    assert "refused the credentials" in refusal(bucket, object_store_credentials)
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    assert refusal(bucket, object_store_credentials).startswith(f"no credentials for {bucket}")


def test_a_missing_bucket_is_one_line(object_store_credentials):
    assert refusal("s3://no-such-bucket/shards", object_store_credentials).startswith("no bucket no-such-bucket at")


def test_an_untrusted_certificate_is_one_line(bucket, object_store_credentials, monkeypatch):
    monkeypatch.delenv("AWS_CA_BUNDLE")
    monkeypatch.delenv("SSL_CERT_FILE")
    assert "does not trust" in refusal(bucket, object_store_credentials)


def test_an_unreachable_store_is_one_line_within_seconds(bucket, object_store_credentials, monkeypatch):
    """A port nothing listens on: LitData's own client would retry for as long as 1,000 attempts take."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"https://127.0.0.1:{port}")
    assert refusal(bucket, object_store_credentials).startswith(
        f"cannot reach the object store at https://127.0.0.1:{port}"
    )
