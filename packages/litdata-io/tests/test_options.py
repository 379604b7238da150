"""storage_options/session_options in the forms LitData users write, and AWS profile files."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import botocore
import botocore.config
import pytest

from litdata_io import get_storage
from litdata_io._storage._aws_config import ca_bundle, read_profile, s3_client_config
from litdata_io._storage._obstore import ObstoreStorage
from litdata_io._storage._options import normalize_options, parse_connection_string
from litdata_io._storage._secret import Secret

KEY, SECRET, TOKEN = "AKIAEXAMPLEKEY", "example/secret+value", "example-session-token"


def test_boto3_style_keys() -> None:
    options = normalize_options(
        "s3",
        {
            "aws_access_key_id": KEY,
            "aws_secret_access_key": SECRET,
            "aws_session_token": TOKEN,
            "endpoint_url": "http://127.0.0.1:9000",
            "region_name": "eu-west-1",
        },
    )
    assert options.provider == "s3" and options.backend == "obstore"
    assert options.config == {"endpoint": "http://127.0.0.1:9000", "region": "eu-west-1"}
    assert options.merged()["secret_access_key"] == SECRET
    assert options.client == {"allow_http": True}  # an http:// endpoint needs it with obstore
    text = repr(options)
    assert SECRET not in text and KEY not in text and TOKEN not in text and "***" in text


def test_upper_case_and_s3fs_forms() -> None:
    upper = normalize_options(
        "s3", {"AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET, "S3_ENDPOINT_URL": "https://minio.local"}
    )
    s3fs = normalize_options(
        "s3", {"key": KEY, "secret": SECRET, "client_kwargs": {"endpoint_url": "https://minio.local"}}
    )
    assert (
        upper.merged()
        == s3fs.merged()
        == {
            "access_key_id": KEY,
            "secret_access_key": SECRET,
            "endpoint": "https://minio.local",
        }
    )
    assert upper.client == {}


def test_unsigned_access_in_every_spelling() -> None:
    config = botocore.config.Config(
        retries={"max_attempts": 7, "mode": "adaptive"}, signature_version=botocore.UNSIGNED
    )
    from_config = normalize_options("s3", {"config": config})
    assert from_config.config == {"skip_signature": True}
    assert from_config.settings.max_retries == 7
    for options in (
        {"anon": True},
        {"unsigned": True},
        {"config": {"signature_version": "unsigned"}},
        {"anon": "true"},
    ):
        assert normalize_options("s3", options).config == {"skip_signature": True}
    assert normalize_options("s3", {"anon": False}).config == {"skip_signature": False}


def test_botocore_config_addressing_and_timeouts() -> None:
    config = botocore.config.Config(s3={"addressing_style": "virtual"}, read_timeout=5, region_name="us-west-2")
    options = normalize_options("s3", {"config": config})
    assert options.config == {"virtual_hosted_style_request": True, "region": "us-west-2"}
    assert options.settings.timeout == 5.0


def test_conflicting_spellings_are_an_error() -> None:
    with pytest.raises(ValueError, match="aws_access_key_id.*AWS_ACCESS_KEY_ID|AWS_ACCESS_KEY_ID.*aws_access_key_id"):
        normalize_options("s3", {"aws_access_key_id": "a", "AWS_ACCESS_KEY_ID": "b"})
    same = normalize_options("s3", {"aws_access_key_id": "a", "AWS_ACCESS_KEY_ID": "a"})
    assert same.merged() == {"access_key_id": "a"}


def test_unknown_key_names_itself_and_the_way_out() -> None:
    with pytest.raises(ValueError, match=r"'bogus'.*backend='fsspec'"):
        normalize_options("s3", {"bogus": 1})
    with pytest.raises(ValueError, match="backend"):
        normalize_options("s3", {"backend": "rust"})
    with pytest.raises(ValueError, match=r"storage_options\['backend'\]='python'.*obstore now serves every process"):
        normalize_options("s3", {"backend": "python"})


def test_session_options_yield_to_storage_options() -> None:
    options = normalize_options(
        "s3", {"region_name": "eu-central-1"}, {"profile_name": "dev", "region_name": "us-east-2"}
    )
    assert options.profile == "dev"
    assert options.config == {"region": "eu-central-1"}
    assert normalize_options("s3", None, {"region_name": "us-east-2"}).config == {"region": "us-east-2"}


def test_r2_needs_an_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("R2_ENDPOINT_URL", "R2_ACCOUNT_ID", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ValueError, match="R2_ACCOUNT_ID"):
        normalize_options("r2", {})
    monkeypatch.setenv("R2_ACCOUNT_ID", "abc123")
    options = normalize_options("r2", {})
    assert options.config == {"region": "auto", "endpoint": "https://abc123.r2.cloudflarestorage.com"}
    explicit = normalize_options("r2", {"endpoint_url": "https://x.r2.cloudflarestorage.com", "region_name": "wnam"})
    assert explicit.config == {"endpoint": "https://x.r2.cloudflarestorage.com", "region": "wnam"}


def test_gcs_project_and_token_forms(tmp_path: Path) -> None:
    assert normalize_options("gs", {"project": "p"}).config == {"project": "p"}
    assert normalize_options("gs", {"token": "anon"}).config == {"skip_signature": True}
    assert normalize_options("gs", {"token": "google_default"}).config == {}
    key_file = tmp_path / "sa.json"
    assert normalize_options("gs", {"token": str(key_file)}).config == {"application_credentials": str(key_file)}
    as_dict = normalize_options("gs", {"token": {"type": "service_account", "private_key": "PRIVATE"}})
    assert "PRIVATE" not in repr(as_dict) and "PRIVATE" in as_dict.merged()["service_account_key"]
    emulator = normalize_options("gs", {"endpoint_url": "http://127.0.0.1:4443", "anon": True})
    assert emulator.config == {"base_url": "http://127.0.0.1:4443", "skip_signature": True}
    assert emulator.client == {"allow_http": True}
    with pytest.raises(ValueError, match="token"):
        normalize_options("gs", {"token": 3.5})


def test_gcs_emulator_requests_are_anonymous_unless_a_credential_option_says_otherwise() -> None:
    environ = {"STORAGE_EMULATOR_HOST": "127.0.0.1:4443"}
    anonymous = normalize_options("gs", {}, environ=environ)
    assert (anonymous.backend, anonymous.merged()) == (
        "fsspec",
        {"endpoint_url": "http://127.0.0.1:4443", "token": "anon"},
    )
    for name in ("anon", "unsigned", "skip_signature"):  # each spelling of the same option is the user's choice
        signed = normalize_options("gs", {name: False}, environ=environ)
        assert signed.merged() == {"endpoint_url": "http://127.0.0.1:4443", name: False}, name


def test_azure_account_url_and_credential() -> None:
    options = normalize_options(
        "azure", {"account_url": "https://acct.blob.core.windows.net", "credential": "bXlrZXk="}
    )
    assert options.config == {"account_name": "acct"}
    assert options.merged() == {"account_name": "acct", "account_key": "bXlrZXk="}
    sas = normalize_options(
        "azure", {"account_url": "https://acct.blob.core.windows.net", "credential": "?sv=1&sig=abc"}
    )
    assert sas.merged()["sas_key"] == "sv=1&sig=abc"
    emulator = normalize_options(
        "azure", {"account_url": "http://127.0.0.1:10000/devstoreaccount1", "account_key": "k"}
    )
    assert emulator.config == {
        "endpoint": "http://127.0.0.1:10000/devstoreaccount1",
        "account_name": "devstoreaccount1",
    }
    assert emulator.client == {"allow_http": True}


def test_azure_token_source_settings() -> None:
    options = normalize_options(
        "azure",
        {
            "azure_msi_endpoint": "http://127.0.0.1:9/msi/token",
            "object_id": "oid",
            "authority_host": "https://login.microsoftonline.us",
            "federated_token_file": "/var/run/token",
            "use_azure_cli": "false",
        },
    )
    assert options.config == {
        "msi_endpoint": "http://127.0.0.1:9/msi/token",
        "object_id": "oid",
        "authority_host": "https://login.microsoftonline.us",
        "federated_token_file": "/var/run/token",
        "use_azure_cli": False,
    }


def test_azure_sdk_managed_identity_endpoint_reaches_obstore(monkeypatch: pytest.MonkeyPatch) -> None:
    """App Service's IDENTITY_ENDPOINT (or MSI_ENDPOINT) becomes obstore's msi_endpoint; obstore's own names win."""
    for name in ("AZURE_MSI_ENDPOINT", "AZURE_IDENTITY_ENDPOINT", "MSI_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("IDENTITY_ENDPOINT", "http://127.0.0.1:9/app-service")
    options = {"account_name": "acct", "endpoint": "http://127.0.0.1:9/acct"}

    def msi_endpoint() -> str | None:
        storage = get_storage("azure://c/p", options)
        assert isinstance(storage, ObstoreStorage)
        return storage._client().config.get("msi_endpoint")

    assert msi_endpoint() == "http://127.0.0.1:9/app-service"
    monkeypatch.setenv("AZURE_MSI_ENDPOINT", "http://127.0.0.1:9/obstore")
    assert msi_endpoint() in (None, "http://127.0.0.1:9/obstore")  # left to obstore, which reads its own


def test_azure_credential_objects_and_connection_strings() -> None:
    class NamedKey:  # the shape of azure.core.credentials.AzureNamedKeyCredential
        class named_key:
            name, key = "acct", "s3cr3t"

    assert normalize_options("azure", {"credential": NamedKey()}).merged() == {
        "account_name": "acct",
        "account_key": "s3cr3t",
    }
    text = "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=a2V5;EndpointSuffix=core.windows.net"
    assert parse_connection_string(text) == {"account_name": "acct", "account_key": "a2V5"}
    assert parse_connection_string("UseDevelopmentStorage=true") == {"use_emulator": "true"}
    custom = parse_connection_string("AccountName=a;SharedAccessSignature=?sig=x;BlobEndpoint=http://h:1/a/")
    assert custom == {"account_name": "a", "sas_key": "sig=x", "endpoint": "http://h:1/a"}
    options = normalize_options("azure", {"connection_string": text})
    assert "a2V5" not in repr(options) and options.merged()["account_key"] == "a2V5"
    with pytest.raises(ValueError, match="credential"):
        normalize_options("azure", {"credential": object()})


def test_hf_and_http_options() -> None:
    hf = normalize_options("hf", {"token": "hf_secret", "revision": "v1"})
    assert hf.backend == "fsspec" and hf.config == {"revision": "v1"} and "hf_secret" not in repr(hf)
    http = normalize_options("https", {"headers": {"Authorization": "Bearer t0ken", "X-Trace": "1"}})
    assert "t0ken" not in repr(http) and http.client["default_headers"]["X-Trace"] == "1"


def test_io_settings_from_env_and_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITDATA_IO_MAX_RETRIES", "3")
    monkeypatch.setenv("LITDATA_IO_RETRY_DEADLINE", "12.5")
    monkeypatch.setenv("LITDATA_IO_PARALLEL_THRESHOLD", "1MiB")
    settings = normalize_options("s3", {"max_retries": 5}).settings
    assert (settings.max_retries, settings.retry_deadline, settings.parallel_threshold) == (5, 12.5, 1024 * 1024)
    monkeypatch.setenv("LITDATA_IO_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="LITDATA_IO_TIMEOUT"):
        normalize_options("s3", {})
    monkeypatch.delenv("LITDATA_IO_TIMEOUT")
    with pytest.raises(ValueError, match="max_retries"):
        normalize_options("s3", {"max_retries": -1})


def test_secret_wrapper() -> None:
    secret = Secret("hunter2")
    assert repr(secret) == str(secret) == "'***'" and f"{secret}" == "'***'"
    assert pickle.loads(pickle.dumps(secret)).reveal() == "hunter2"  # a worker needs it to connect
    assert Secret(secret) == secret


# -- AWS profiles ---------------------------------------------------------------------------------
@pytest.fixture
def aws_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_REGION",
                "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT",
                "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_DEFAULT_PROFILE", "AWS_ROLE_ARN",
                "AWS_EC2_METADATA_SERVICE_ENDPOINT", "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE",
                "AWS_EC2_METADATA_DISABLED", "AWS_METADATA_ENDPOINT"):  # fmt: skip
        monkeypatch.delenv(var, raising=False)
    (tmp_path / "credentials").write_text(
        "[default]\naws_access_key_id = DEFAULTKEY\naws_secret_access_key = default-secret\n\n"
        "[dev]\naws_access_key_id = DEVKEY\naws_secret_access_key = dev-secret-value\naws_session_token = devtoken\n"
    )
    (tmp_path / "config").write_text(
        "[default]\nregion = us-west-1\n\n[profile dev]\nregion = eu-north-1\nendpoint_url = http://127.0.0.1:9\n"
        "s3 =\n    addressing_style = path\n\n[profile sso]\nsso_session = corp\nregion = us-east-2\n"
    )
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    return tmp_path


def test_read_profile(aws_files: Path) -> None:
    dev = read_profile("dev")
    assert dev is not None
    assert dev["aws_access_key_id"] == "DEVKEY" and dev["region"] == "eu-north-1" and "s3" not in dev
    assert read_profile("missing") is None


def test_named_profile_supplies_keys_region_and_endpoint(aws_files: Path) -> None:
    config, provider = s3_client_config(normalize_options("s3", None, {"profile_name": "dev"}))
    assert provider is None
    assert config == {
        "access_key_id": "DEVKEY",
        "secret_access_key": "dev-secret-value",
        "session_token": "devtoken",
        "region": "eu-north-1",
        "endpoint": "http://127.0.0.1:9",
    }


def test_default_profile_is_read_when_nothing_else_is_set(aws_files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config, _ = s3_client_config(normalize_options("s3", {}))
    assert (config["access_key_id"], config["region"]) == ("DEFAULTKEY", "us-west-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "ENVKEY")
    monkeypatch.setenv("AWS_REGION", "ap-south-1")
    assert s3_client_config(normalize_options("s3", {})) == ({}, None)  # obstore reads the environment itself
    explicit, _ = s3_client_config(normalize_options("s3", {"aws_access_key_id": "K", "aws_secret_access_key": "S"}))
    assert explicit == {"access_key_id": "K", "secret_access_key": "S"}


def test_chain_order_web_identity_beats_profile_keys_container_and_instance(
    aws_files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/credentials/x")
    assert s3_client_config(normalize_options("s3", {}))[0]["access_key_id"] == "DEFAULTKEY"  # profile first
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(aws_files / "token"))
    monkeypatch.setenv("AWS_ROLE_ARN", "arn:aws:iam::1:role/r")
    config, provider = s3_client_config(normalize_options("s3", {}))
    assert "access_key_id" not in config and provider is None  # obstore's web identity, as boto3 orders it
    monkeypatch.delenv("AWS_WEB_IDENTITY_TOKEN_FILE")
    options = {"web_identity_token_file": str(aws_files / "token"), "role_arn": "arn:aws:iam::1:role/r"}
    assert "access_key_id" not in s3_client_config(normalize_options("s3", options))[0]  # given as options too


def test_instance_metadata_settings(aws_files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_CONFIG_FILE", str(aws_files / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(aws_files / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:9/")
    assert s3_client_config(normalize_options("s3", {})) == ({"metadata_endpoint": "http://127.0.0.1:9"}, None)
    monkeypatch.delenv("AWS_EC2_METADATA_SERVICE_ENDPOINT")
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE", "IPv6")
    assert s3_client_config(normalize_options("s3", {}))[0] == {"metadata_endpoint": "http://[fd00:ec2::254]"}
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(ValueError, match="no AWS credentials found.*AWS_EC2_METADATA_DISABLED.*anon"):
        s3_client_config(normalize_options("s3", {}))
    assert s3_client_config(normalize_options("s3", {"anon": True}))[0] == {"skip_signature": True}


def test_sts_endpoint_option_reaches_obstore_under_its_accepted_name(aws_files: Path) -> None:
    config, _ = s3_client_config(normalize_options("s3", {"sts_endpoint": "https://sts.example"}))
    assert config["aws_endpoint_url_sts"] == "https://sts.example" and "sts_endpoint" not in config


def test_ca_bundle_in_boto3_order(aws_files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """verify=path > AWS_CA_BUNDLE > the profile's ca_bundle; each file read when the client is built."""
    monkeypatch.delenv("AWS_CA_BUNDLE", raising=False)
    for name in ("given", "env", "profile"):
        (aws_files / f"{name}.pem").write_text(f"-----{name}-----\n")
    with (aws_files / "config").open("a") as config:
        config.write(f"\n[profile ca]\nca_bundle = {aws_files / 'profile.pem'}\n")
    assert ca_bundle(normalize_options("s3", {})) is None
    assert ca_bundle(normalize_options("s3", None, {"profile_name": "ca"})) == b"-----profile-----\n"
    monkeypatch.setenv("AWS_CA_BUNDLE", str(aws_files / "env.pem"))
    assert ca_bundle(normalize_options("s3", None, {"profile_name": "ca"})) == b"-----env-----\n"
    given = normalize_options("s3", {"verify": str(aws_files / "given.pem")})
    assert given.client == {"ca_bundle": str(aws_files / "given.pem")} and ca_bundle(given) == b"-----given-----\n"
    monkeypatch.setenv("AWS_CA_BUNDLE", str(aws_files / "missing.pem"))
    with pytest.raises(ValueError, match="AWS_CA_BUNDLE names the CA bundle .*missing.pem, which cannot be read"):
        ca_bundle(normalize_options("s3", {}))


def test_profile_errors(aws_files: Path) -> None:
    with pytest.raises(ValueError, match="'nope'.*aws configure"):
        s3_client_config(normalize_options("s3", None, {"profile_name": "nope"}))
    with pytest.raises(ValueError, match="'sso' sets sso_session"):
        s3_client_config(normalize_options("s3", None, {"profile_name": "sso"}))  # boto3 finds no [sso-session corp]
    with (aws_files / "config").open("a") as config:
        config.write("\n[profile role]\nrole_arn = arn:aws:iam::1:role/r\nsource_profile = gone\n")
    with pytest.raises(ValueError, match="'role' sets source_profile = gone, which is not in"):
        s3_client_config(normalize_options("s3", None, {"profile_name": "role"}))


def test_a_missing_profile_named_by_aws_profile_is_an_error(aws_files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_PROFILE", "typo")
    with pytest.raises(ValueError, match="'typo' \\(AWS_PROFILE\\) is not in .*unset AWS_PROFILE"):
        s3_client_config(normalize_options("s3", {}))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "ENVKEY")  # keys in the environment come first
    assert s3_client_config(normalize_options("s3", {}))[1] is None


def test_profiles_needing_boto3_say_so_without_it(aws_files: Path) -> None:
    """In a process where boto3 cannot be imported, an SSO or assume-role profile names the fix."""
    script = (
        "import sys; sys.modules['boto3'] = None\n"
        "from litdata_io._storage._aws_config import s3_client_config\n"
        "from litdata_io._storage._options import normalize_options\n"
        "for name in ('sso', 'role'):\n"
        "    try:\n"
        "        s3_client_config(normalize_options('s3', None, {'profile_name': name}))\n"
        "    except ValueError as exc:\n"
        "        print(exc)\n"
    )
    with (aws_files / "config").open("a") as config:
        config.write("\n[profile role]\nrole_arn = arn:aws:iam::1:role/r\nsource_profile = dev\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    sso, role = done.stdout.strip().splitlines()
    assert "profile 'sso' sets sso_session" in sso and 'pip install "litdata-io[aws-profiles]"' in sso
    assert "profile 'role' sets role_arn" in role and "aws-profiles" in role
    assert "--profile role" in role  # the export-credentials alternative names the profile


def test_boto3_resolves_an_assume_role_profile_lazily(aws_files: Path) -> None:
    with (aws_files / "config").open("a") as config:
        config.write("\n[profile role]\nrole_arn = arn:aws:iam::1:role/r\nsource_profile = dev\n")
    config, provider = s3_client_config(normalize_options("s3", None, {"profile_name": "role"}))
    assert provider is not None and "access_key_id" not in config  # STS is asked only when obstore needs keys


def test_profile_keys_never_travel_in_a_pickle(aws_files: Path) -> None:
    storage = get_storage("s3://bucket/data", session_options={"profile_name": "dev"})
    blob = pickle.dumps(storage)
    assert b"dev-secret-value" not in blob and b"DEVKEY" not in blob
    assert pickle.loads(blob).options.profile == "dev"
