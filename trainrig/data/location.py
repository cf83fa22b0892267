"""Where shards live: a local or shared folder, or `s3://bucket/prefix` on an S3-compatible object store.

Object-store credentials and the endpoint come from the environment only (`AWS_ACCESS_KEY_ID`,
`AWS_SECRET_ACCESS_KEY`, `AWS_ENDPOINT_URL`), as boto3 reads them: none is ever written into a config, a log or a
checkpoint. LitData's clients do the transfers.
"""

import functools
import shutil
import tempfile
from pathlib import Path

from trainrig.errors import UserInputError, one_line
from trainrig.resume.atomic_io import write_atomically

__all__ = ["Location", "litdata_module"]


def litdata_module(name: str):
    """A LitData module, imported only when shards are written or read: it is the optional `streaming` extra."""
    import importlib

    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name is None or not error.name.startswith("litdata"):
            raise
        raise UserInputError("shards need LitData: pip install -e '.[streaming]'") from error


class Location:
    """A folder of files addressed by relative names, the same calls for a local path and an object-store prefix."""

    def __init__(self, url: str):
        self.url = url.rstrip("/") or "/"
        self.remote = "://" in self.url

    def __str__(self) -> str:
        return self.url

    def join(self, name: str) -> str:
        return f"{self.url}/{name}"

    def __getstate__(self) -> dict:
        """Without the object-store client: a DataLoader worker makes its own."""
        return {key: value for key, value in self.__dict__.items() if key != "_provider"}

    @functools.cached_property
    def _provider(self):
        """One client per location and process: making one costs more than a small read."""
        return litdata_module("litdata.streaming.fs_provider").S3FsProvider()

    def check_reachable(self) -> None:
        """Refuse in one line an object store this process cannot use: unreachable, a certificate it does not trust,
        no or wrong credentials, no such bucket. Asked first with a client that gives up after two tries: LitData's
        own retries for as long as 1,000 attempts take, so an unreachable store would hang a run instead of failing
        it. The line names the endpoint and the bucket, never a key."""
        if not self.remote:
            return
        import boto3
        from botocore.config import Config
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, SSLError

        bucket, _, prefix = self.url.removeprefix("s3://").partition("/")
        retries = Config(retries={"max_attempts": 2, "mode": "standard"}, connect_timeout=5, read_timeout=30)
        client = boto3.session.Session().client("s3", config=retries)
        endpoint = client.meta.endpoint_url
        try:
            client.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1)
        except NoCredentialsError as error:
            raise UserInputError(
                f"no credentials for {self.url}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment"
            ) from error
        except SSLError as error:
            raise UserInputError(
                f"the object store at {endpoint} has a certificate this machine does not trust: set AWS_CA_BUNDLE "
                "and SSL_CERT_FILE to its CA's file"
            ) from error
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code", "")
            if code in ("NoSuchBucket", "404"):
                raise UserInputError(f"no bucket {bucket} at {endpoint} (for {self.url})") from error
            if code in ("403", "AccessDenied", "Forbidden", "SignatureDoesNotMatch", "InvalidAccessKeyId"):
                raise UserInputError(
                    f"the object store at {endpoint} refused the credentials for {self.url} ({code}): check "
                    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
                ) from error
            raise
        except BotoCoreError as error:  # the endpoint unreachable: refused, timed out, no such host
            raise UserInputError(
                f"cannot reach the object store at {endpoint} for {self.url} ({one_line(error)}): check "
                "AWS_ENDPOINT_URL and the network"
            ) from error

    def read(self, name: str) -> bytes | None:
        """The file's bytes, or None when there is none."""
        if not self.remote:
            path = Path(self.url) / name
            return path.read_bytes() if path.is_file() else None
        from botocore.exceptions import ClientError

        bucket, _, prefix = self.join(name).removeprefix("s3://").partition("/")
        try:
            return self._provider.client.client.get_object(Bucket=bucket, Key=prefix)["Body"].read()
        except ClientError as error:
            if error.response["Error"]["Code"] in ("NoSuchKey", "404"):
                return None
            raise

    def write(self, name: str, data: bytes) -> None:
        """Replace one file whole: a reader sees the old content or the new (an object store replaces whole objects)."""
        if not self.remote:
            Path(self.url).mkdir(parents=True, exist_ok=True)
            write_atomically(Path(self.url) / name, data)
            return
        with tempfile.NamedTemporaryFile() as staged:
            staged.write(data)
            staged.flush()
            self.upload(staged.name, name)

    def upload(self, local_path: str, name: str) -> None:
        """Copy a local file to the object store, whole."""
        self._provider.upload_file(local_path, self.join(name))

    def remove(self, name: str) -> None:
        """Delete a file or a folder of files, if there is one."""
        if self.remote:
            self._provider.delete_file_or_directory(self.join(name))
            return
        path = Path(self.url) / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)

    def names(self) -> list[str]:
        """What the folder holds at its top level."""
        if self.remote:
            return self._listed()
        path = Path(self.url)
        return sorted(entry.name for entry in path.iterdir()) if path.is_dir() else []

    def _listed(self) -> list[str]:
        """The object store's names one level below the prefix: objects, and the prefixes that stand for folders.
        LitData's S3 provider lists nothing (`list_directory` is not implemented): its boto3 client does."""
        bucket, _, prefix = self.url.removeprefix("s3://").partition("/")
        below = f"{prefix}/" if prefix else ""
        pages = self._provider.client.client.get_paginator("list_objects_v2")
        found = set()
        for page in pages.paginate(Bucket=bucket, Prefix=below, Delimiter="/"):
            found |= {entry["Prefix"][len(below) :].rstrip("/") for entry in page.get("CommonPrefixes", [])}
            found |= {entry["Key"][len(below) :] for entry in page.get("Contents", [])}
        return sorted(found)

    def sizes(self) -> dict[str, int]:
        """The size of each file at the folder's top level, in one listing (one request per thousand objects)."""
        if not self.remote:
            path = Path(self.url)
            return (
                {entry.name: entry.stat().st_size for entry in path.iterdir() if entry.is_file()}
                if path.is_dir()
                else {}
            )
        bucket, _, prefix = self.url.removeprefix("s3://").partition("/")
        below = f"{prefix}/" if prefix else ""
        pages = self._provider.client.client.get_paginator("list_objects_v2")
        return {
            entry["Key"][len(below) :]: entry["Size"]
            for page in pages.paginate(Bucket=bucket, Prefix=below, Delimiter="/")
            for entry in page.get("Contents", [])
        }

    def holds_whole(self, name: str, size: int) -> bool:
        """Whether the file is there with all its bytes. An object store shows an object only once it is whole."""
        if self.remote:
            return self._provider.exists(self.join(name))
        path = Path(self.url) / name
        return path.is_file() and path.stat().st_size == size
