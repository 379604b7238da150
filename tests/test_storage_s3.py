"""The conformance suite on S3 (moto_server on 127.0.0.1) through obstore."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from litdata_io import Storage, get_storage
from litdata_io.testing import StorageConformance, StorageFactory
from tests.support.servers import S3Server

pytestmark = pytest.mark.cloud


class TestS3Storage(StorageConformance):
    @pytest.fixture
    def storage_factory(self, s3_server: S3Server, s3_bucket: str) -> StorageFactory:
        def make(**options: object) -> Storage:
            return get_storage(
                f"s3://{s3_bucket}/some/prefix",
                storage_options={**s3_server.storage_options(), **options},
            )

        return make

    @pytest.fixture
    def secrets(self, s3_server: S3Server) -> list[str]:
        return [s3_server.secret_key]

    def test_objects_land_under_the_prefix(self, storage: Storage, s3_server: S3Server, s3_bucket: str) -> None:
        storage.put("k.bin", b"v")
        keys = [item["Key"] for item in s3_server.client().list_objects_v2(Bucket=s3_bucket)["Contents"]]
        assert keys == ["some/prefix/k.bin"]


_AWS_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_ENDPOINT",
)


@pytest.fixture
def clean_aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    for var in _AWS_ENV:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    return monkeypatch


def test_environment_credentials_need_no_options(
    clean_aws_env: pytest.MonkeyPatch, s3_server: S3Server, s3_bucket: str
) -> None:
    clean_aws_env.setenv("AWS_ACCESS_KEY_ID", s3_server.access_key)
    clean_aws_env.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret_key)
    clean_aws_env.setenv("AWS_ENDPOINT_URL", s3_server.endpoint)  # http://: allow_http follows from it
    clean_aws_env.setenv("AWS_REGION", s3_server.region)
    s3_server.client().put_object(Bucket=s3_bucket, Key="env/a.bin", Body=b"from env")
    storage = get_storage(f"s3://{s3_bucket}/env")
    assert storage.get("a.bin") == b"from env"
    assert s3_server.secret_key.encode() not in pickle.dumps(storage)  # the worker reads the env itself


def test_session_options_profile(
    clean_aws_env: pytest.MonkeyPatch, s3_server: S3Server, s3_bucket: str, tmp_path: Path
) -> None:
    (tmp_path / "credentials").write_text(
        f"[moto]\naws_access_key_id = {s3_server.access_key}\naws_secret_access_key = {s3_server.secret_key}\n"
    )
    (tmp_path / "config").write_text(
        f"[profile moto]\nregion = {s3_server.region}\nendpoint_url = {s3_server.endpoint}\n"
    )
    clean_aws_env.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    clean_aws_env.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    storage = get_storage(f"s3://{s3_bucket}/profiled", session_options={"profile_name": "moto"})
    storage.put("a.bin", b"via profile")
    assert storage.get("a.bin") == b"via profile"
    assert s3_server.secret_key.encode() not in pickle.dumps(storage)
