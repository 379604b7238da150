"""Normalize ``storage_options``/``session_options`` in the forms LitData users already write.

Credentials arrive as boto3 client kwargs (``config=botocore.config.Config(...)`` included),
environment-style keys (``AWS_ACCESS_KEY_ID``), s3fs/gcsfs kwargs, Azure SDK forms (``account_url``
+ ``credential``, a ``connection_string``) and obstore's own names. :func:`normalize_options` maps
them onto obstore's vocabulary, every credential wrapped in a :class:`~litdata_io._storage._secret.Secret`.
Keys named after :class:`~litdata_io._storage._settings.IOSettings` fields configure retries for
any backend; ``backend`` picks ``"obstore"`` (default for s3/r2/gs/azure/http) or ``"fsspec"``.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard
from urllib.parse import urlsplit

from litdata_io._storage._secret import Secret
from litdata_io._storage._settings import IO_OPTION_NAMES, IOSettings

__all__ = ["BackendOptions", "is_str_mapping", "normalize_options", "parse_connection_string", "provider_of"]

_PROVIDERS = {"s3": "s3", "r2": "s3", "gs": "gcs", "azure": "azure", "http": "http", "https": "http", "hf": "hf"}
_SECRET_NAME = re.compile(
    r"key|secret|token|password|credential|sas|signature|connection_string|auth|cookie", re.IGNORECASE
)
_TRUE = {"1", "true", "yes", "on"}

# option name (lower-cased) -> obstore S3Config name
_S3 = {
    **dict.fromkeys(("aws_access_key_id", "access_key_id", "key", "access_key"), "access_key_id"),
    **dict.fromkeys(("aws_secret_access_key", "secret_access_key", "secret", "secret_key"), "secret_access_key"),
    **dict.fromkeys(("aws_session_token", "session_token", "token", "aws_security_token"), "session_token"),
    **dict.fromkeys(
        ("endpoint_url", "s3_endpoint_url", "aws_endpoint_url", "aws_endpoint_url_s3", "endpoint", "aws_endpoint"),
        "endpoint",
    ),
    **dict.fromkeys(("region_name", "region", "aws_region", "aws_default_region", "default_region"), "region"),
    **dict.fromkeys(("anon", "unsigned", "skip_signature", "aws_skip_signature"), "skip_signature"),
    **dict.fromkeys(
        ("virtual_hosted_style_request", "aws_virtual_hosted_style_request"), "virtual_hosted_style_request"
    ),
    **dict.fromkeys(("requester_pays", "request_payer", "aws_request_payer"), "request_payer"),
}
_S3_SECRETS = {"access_key_id", "secret_access_key", "session_token", "sse_customer_key_base64"}
_S3_PASSTHROUGH = {
    "checksum_algorithm",
    "conditional_put",
    "copy_if_not_exists",
    "disable_tagging",
    "imdsv1_fallback",
    "metadata_endpoint",
    "role_arn",
    "role_session_name",
    "s3_express",
    "server_side_encryption",
    "sse_bucket_key_enabled",
    "sse_customer_key_base64",
    "sse_kms_key_id",
    "sts_endpoint",
    "unsigned_payload",
    "web_identity_token_file",
    "container_credentials_relative_uri",
    "container_credentials_full_uri",
    "container_authorization_token_file",
}
_GCS = {
    **dict.fromkeys(("anon", "unsigned", "skip_signature", "google_skip_signature"), "skip_signature"),
    **dict.fromkeys(("endpoint_url", "base_url", "google_base_url", "gcs_base_url", "endpoint"), "base_url"),
    **dict.fromkeys(("service_account", "service_account_path", "google_service_account"), "service_account"),
    **dict.fromkeys(("service_account_key", "google_service_account_key"), "service_account_key"),
    **dict.fromkeys(("application_credentials", "google_application_credentials"), "application_credentials"),
    **dict.fromkeys(("bearer_token", "access_token", "google_bearer_token"), "bearer_token"),
}
_GCS_SECRETS = {"service_account_key", "bearer_token"}
_AZURE = {
    **dict.fromkeys(("account_name", "azure_storage_account_name", "storage_account_name"), "account_name"),
    **dict.fromkeys(
        ("account_key", "azure_storage_account_key", "access_key", "azure_storage_key", "storage_account_key"),
        "account_key",
    ),
    **dict.fromkeys(("sas_token", "sas_key", "azure_storage_sas_key", "azure_storage_sas_token"), "sas_key"),
    **dict.fromkeys(("anon", "skip_signature", "azure_skip_signature"), "skip_signature"),
    **dict.fromkeys(("tenant_id", "azure_tenant_id", "azure_storage_tenant_id"), "tenant_id"),
    **dict.fromkeys(("client_id", "azure_client_id", "azure_storage_client_id"), "client_id"),
    **dict.fromkeys(("client_secret", "azure_client_secret", "azure_storage_client_secret"), "client_secret"),
    **dict.fromkeys(("token", "bearer_token", "azure_storage_token"), "token"),
    **dict.fromkeys(("use_emulator", "azure_storage_use_emulator"), "use_emulator"),
    **dict.fromkeys(("endpoint", "azure_storage_endpoint", "blob_endpoint"), "endpoint"),
    **dict.fromkeys(
        ("msi_endpoint", "azure_msi_endpoint", "identity_endpoint", "azure_identity_endpoint"), "msi_endpoint"
    ),
    **dict.fromkeys(("object_id", "azure_object_id"), "object_id"),
    **dict.fromkeys(("msi_resource_id", "azure_msi_resource_id"), "msi_resource_id"),
    **dict.fromkeys(("authority_host", "azure_authority_host", "azure_storage_authority_host"), "authority_host"),
    **dict.fromkeys(("federated_token_file", "azure_federated_token_file"), "federated_token_file"),
    **dict.fromkeys(("use_azure_cli", "azure_use_azure_cli"), "use_azure_cli"),
}
_AZURE_SECRETS = {"account_key", "sas_key", "client_secret", "token"}
_BOOLEAN = {
    "skip_signature",
    "virtual_hosted_style_request",
    "request_payer",
    "use_emulator",
    "allow_http",
    "use_azure_cli",
}


@dataclass
class BackendOptions:
    """``storage_options`` normalized for one provider.

    Attributes:
        provider: ``"s3"`` (also r2), ``"gcs"``, ``"azure"``, ``"http"``, ``"hf"``, ``"fsspec"`` or ``"local"``.
        backend: ``"obstore"``, ``"fsspec"`` or ``"local"``.
        config: non-secret settings in obstore's vocabulary (fsspec kwargs for the fsspec backend).
        secrets: credentials, by the same vocabulary.
        client: obstore ``client_options`` to add (``allow_http``, ``default_headers``, ...).
        profile: the AWS profile to read credentials from, in each process (never pickled as keys).
        settings: retry/timeout/parallelism settings.
    """

    provider: str
    backend: str
    config: dict[str, Any] = field(default_factory=dict[str, Any])
    secrets: dict[str, Secret] = field(default_factory=dict[str, Secret])
    client: dict[str, Any] = field(default_factory=dict[str, Any])
    profile: str | None = None
    settings: IOSettings = field(default_factory=IOSettings)

    def merged(self) -> dict[str, Any]:
        """``config`` with the secrets revealed: what a client constructor takes."""
        return {**self.config, **{name: secret.reveal() for name, secret in self.secrets.items()}}

    def secret_values(self) -> list[Secret]:
        """The secrets, for masking in messages."""
        return list(self.secrets.values())


def provider_of(scheme: str) -> str:
    """The provider behind a URL scheme (``"r2"`` -> ``"s3"``, an unknown one -> ``"fsspec"``)."""
    return _PROVIDERS.get(scheme, "fsspec")


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | {"0", "false", "no", "off", ""}:
        return value.strip().lower() in _TRUE
    if value in ("requester", "REQUESTER"):
        return True
    raise ValueError(f"storage_options[{name!r}]={value!r} must be true or false")


class _Builder:
    def __init__(self, scheme: str, provider: str, backend: str) -> None:
        self.scheme = scheme
        self.out = BackendOptions(provider=provider, backend=backend)
        self.sources: dict[str, str] = {}

    def set(self, target: str, value: Any, source: str, *, secret: bool = False, fallback: bool = False) -> None:
        if value is None or (fallback and target in self.sources):
            return
        if target in _BOOLEAN:
            value = _bool(source, value)
        previous = self.sources.get(target)
        current = self.out.secrets.get(target) if target in self.out.secrets else self.out.config.get(target)
        if previous is not None and previous != source:
            same = (current.reveal() if isinstance(current, Secret) else current) == (
                value.reveal() if isinstance(value, Secret) else value
            )
            if not same:
                raise ValueError(
                    f"{self.scheme}:// storage_options set {target} twice with different values "
                    f"({previous!r} and {source!r}); keep one"
                )
        self.sources[target] = source
        if secret:
            self.out.secrets[target] = Secret(value)
            self.out.config.pop(target, None)
        else:
            self.out.config[target] = value


def _unknown(scheme: str, name: str, accepted: Any) -> ValueError:
    names = ", ".join(sorted(set(accepted)))
    return ValueError(
        f"storage_options key {name!r} is not understood for {scheme}:// URLs. Accepted keys: {names}, and "
        f"{', '.join(IO_OPTION_NAMES)}, backend. To pass options to an fsspec filesystem untouched, add "
        "backend='fsspec'"
    )


def _is_unsigned(value: Any) -> bool:
    botocore = sys.modules.get("botocore")
    if botocore is not None and value is getattr(botocore, "UNSIGNED", None):
        return True
    return type(value).__name__ == "UNSIGNED" or (isinstance(value, str) and value.lower() == "unsigned")


def is_str_mapping(value: object) -> TypeGuard[Mapping[str, Any]]:
    """True for a mapping of options (a dict of settings, of a botocore Config's fields, ...); values unchecked."""
    return isinstance(value, Mapping)


def _botocore_config(builder: _Builder, config: object, io: dict[str, Any]) -> None:
    """Pull what maps onto obstore/IOSettings out of a ``botocore.config.Config`` (or a dict of its fields)."""
    if is_str_mapping(config):
        given = dict(config)
    else:
        provided = getattr(config, "_user_provided_options", None)
        names = provided.keys() if is_str_mapping(provided) else vars(config).keys()
        given = {name: getattr(config, name, None) for name in names}
    for name, value in given.items():
        if value is None:
            continue
        if name == "signature_version":
            if _is_unsigned(value):
                builder.set("skip_signature", True, "config.signature_version")
        elif name == "region_name":
            builder.set("region", value, "config.region_name")
        elif name == "retries" and is_str_mapping(value):
            # total_max_attempts counts the first attempt; (legacy) max_attempts counts retries
            if value.get("total_max_attempts") is not None:
                io.setdefault("max_retries", max(0, int(value["total_max_attempts"]) - 1))
            elif value.get("max_attempts") is not None:
                io.setdefault("max_retries", max(0, int(value["max_attempts"])))
        elif name in ("connect_timeout", "read_timeout"):
            io["timeout"] = max(float(value), float(io.get("timeout", 0)))
        elif name == "s3" and is_str_mapping(value) and value.get("addressing_style") in ("virtual", "path"):
            builder.set("virtual_hosted_style_request", value["addressing_style"] == "virtual", "config.s3")
        elif name == "proxies" and is_str_mapping(value):
            proxy = value.get("https") or value.get("http")
            if proxy:
                builder.out.client["proxy_url"] = proxy


def _s3(builder: _Builder, options: Mapping[str, Any], io: dict[str, Any], *, session: bool = False) -> None:
    for name, value in options.items():
        lowered = name.lower()
        source = f"session_options[{name!r}]" if session else name
        if lowered in ("profile_name", "profile", "aws_profile"):
            builder.out.profile = builder.out.profile if session and builder.out.profile else value
        elif lowered in _S3:
            target = _S3[lowered]
            builder.set(target, value, source, secret=target in _S3_SECRETS, fallback=session)
        elif lowered == "config" and value is not None:
            _botocore_config(builder, value, io)
        elif lowered == "client_kwargs" and is_str_mapping(value):
            _s3(builder, value, io)
        elif lowered in ("verify",) and value is False:
            builder.out.client["allow_invalid_certificates"] = True
        elif lowered == "verify" and isinstance(value, (str, os.PathLike)):
            builder.out.client["ca_bundle"] = os.fspath(value)  # read in each process (_aws_config.ca_bundle)
        elif lowered in ("aws_account_id", "use_ssl", "botocore_session", "verify"):
            continue  # boto3 knobs with no obstore meaning (the endpoint's scheme says http or https)
        elif lowered in _S3_PASSTHROUGH:
            builder.set(lowered, value, source, secret=lowered in _S3_SECRETS)
        else:
            raise _unknown(builder.scheme, name, [*_S3, *_S3_PASSTHROUGH, "config", "client_kwargs", "profile_name"])


def _r2_endpoint(environ: Mapping[str, str]) -> str | None:
    if environ.get("R2_ENDPOINT_URL"):
        return environ["R2_ENDPOINT_URL"]
    if environ.get("R2_ACCOUNT_ID"):
        return f"https://{environ['R2_ACCOUNT_ID']}.r2.cloudflarestorage.com"
    return environ.get("AWS_ENDPOINT_URL_S3") or environ.get("AWS_ENDPOINT_URL") or environ.get("AWS_ENDPOINT")


_GCS_ENDPOINT_NAMES = frozenset(name for name, target in _GCS.items() if target == "base_url")
_GCS_CREDENTIAL_NAMES = frozenset({"token", *_GCS}) - _GCS_ENDPOINT_NAMES  # any of them: an emulator gets them


def _gcs_emulator(environ: Mapping[str, str]) -> str | None:
    """The URL of ``STORAGE_EMULATOR_HOST`` (``host:port`` or a URL, as Google's clients accept), or None."""
    host = environ.get("STORAGE_EMULATOR_HOST", "").strip().rstrip("/")
    if not host:
        return None
    return host if "://" in host else f"http://{host}"


def _gcs(builder: _Builder, options: Mapping[str, Any]) -> None:
    for name, value in options.items():
        lowered = name.lower()
        if lowered in ("project", "project_id", "google_project", "google_cloud_project"):
            builder.out.config["project"] = value  # gcsfs needs it; obstore's object API does not
        elif lowered == "token":
            _gcs_token(builder, value)
        elif lowered in _GCS:
            target = _GCS[lowered]
            builder.set(target, value, name, secret=target in _GCS_SECRETS)
        else:
            raise _unknown(builder.scheme, name, [*_GCS, "project", "token"])


def _gcs_token(builder: _Builder, token: Any) -> None:
    """Map the gcsfs ``token`` forms: ``"anon"``, ``"google_default"``/``"cloud"``, a key file path, a key dict."""
    import json

    if token is None or token in ("google_default", "cloud", "default"):
        return
    if token == "anon":
        builder.set("skip_signature", True, "token")
    elif is_str_mapping(token):
        builder.set("service_account_key", json.dumps(dict(token)), "token", secret=True)
    elif isinstance(token, (str, os.PathLike)):
        builder.set("application_credentials", os.fspath(token), "token")
    else:
        raise ValueError(
            f"gs:// storage_options['token'] of type {type(token).__name__} is not supported: pass 'anon', "
            "'google_default', the path of a service-account or authorized-user JSON file, or its content as a dict"
        )


def parse_connection_string(text: str) -> dict[str, str]:
    """The parts of an Azure storage connection string, as obstore AzureConfig names."""
    parts: dict[str, str] = {}
    for item in text.split(";"):
        if "=" in item:
            name, value = item.split("=", 1)
            parts[name.strip().lower()] = value.strip()
    if parts.get("usedevelopmentstorage", "").lower() == "true":
        return {"use_emulator": "true"}
    out: dict[str, str] = {}
    if "accountname" in parts:
        out["account_name"] = parts["accountname"]
    if "accountkey" in parts:
        out["account_key"] = parts["accountkey"]
    if "sharedaccesssignature" in parts:
        out["sas_key"] = parts["sharedaccesssignature"].lstrip("?")
    if "blobendpoint" in parts:
        out["endpoint"] = parts["blobendpoint"].rstrip("/")
    elif parts.get("endpointsuffix", "core.windows.net") != "core.windows.net" and "account_name" in out:
        protocol = parts.get("defaultendpointsprotocol", "https")
        out["endpoint"] = f"{protocol}://{out['account_name']}.blob.{parts['endpointsuffix']}"
    if "account_name" not in out and "endpoint" not in out:
        raise ValueError("the Azure connection string names no AccountName or BlobEndpoint")
    return out


def _azure(builder: _Builder, options: Mapping[str, Any]) -> None:
    for name, value in options.items():
        lowered = name.lower()
        if lowered == "account_url":
            _azure_account_url(builder, str(value))
        elif lowered == "credential":
            _azure_credential(builder, value)
        elif lowered in ("connection_string", "azure_storage_connection_string", "conn_str"):
            for target, part in parse_connection_string(value).items():
                builder.set(target, part, name, secret=target in _AZURE_SECRETS)
        elif lowered in _AZURE:
            target = _AZURE[lowered]
            cleaned = value.lstrip("?") if target == "sas_key" and isinstance(value, str) else value
            builder.set(target, cleaned, name, secret=target in _AZURE_SECRETS)
        else:
            raise _unknown(builder.scheme, name, [*_AZURE, "account_url", "credential", "connection_string"])


def _azure_account_url(builder: _Builder, url: str) -> None:
    parts = urlsplit(url)
    host = parts.hostname or ""
    if host.endswith(".blob.core.windows.net"):
        builder.set("account_name", host.split(".")[0], "account_url")
        return
    # An emulator or a custom domain: keep the URL as the endpoint; Azurite-style URLs name the
    # account in the first path segment (http://127.0.0.1:10000/devstoreaccount1).
    builder.set("endpoint", url.rstrip("/"), "account_url")
    segment = parts.path.strip("/").split("/")[0]
    builder.set("account_name", segment or host.split(".")[0], "account_url")


def _azure_credential(builder: _Builder, credential: Any) -> None:
    if credential is None:
        return
    if isinstance(credential, str):
        is_sas = "sig=" in credential
        builder.set("sas_key" if is_sas else "account_key", credential.lstrip("?"), "credential", secret=True)
    elif is_str_mapping(credential):
        if "account_name" in credential:
            builder.set("account_name", credential["account_name"], "credential")
        if "account_key" in credential:
            builder.set("account_key", credential["account_key"], "credential", secret=True)
        if "sas_token" in credential:
            builder.set("sas_key", str(credential["sas_token"]).lstrip("?"), "credential", secret=True)
    elif hasattr(credential, "named_key"):  # azure.core.credentials.AzureNamedKeyCredential
        builder.set("account_name", credential.named_key.name, "credential")
        builder.set("account_key", credential.named_key.key, "credential", secret=True)
    elif hasattr(credential, "signature"):  # azure.core.credentials.AzureSasCredential
        builder.set("sas_key", credential.signature.lstrip("?"), "credential", secret=True)
    else:
        raise ValueError(
            f"azure:// storage_options['credential'] of type {type(credential).__name__} is not supported: pass the "
            "account key or a SAS token as a string, or leave it out and set AZURE_CLIENT_ID/AZURE_CLIENT_SECRET/"
            "AZURE_TENANT_ID (or AZURE_STORAGE_ACCOUNT_KEY) in the environment"
        )


def _fsspec_kwargs(builder: _Builder, options: Mapping[str, Any]) -> None:
    for name, value in options.items():
        if isinstance(value, str) and _SECRET_NAME.search(name):
            builder.out.secrets[name] = Secret(value)
        else:
            builder.out.config[name] = value


def _simple(builder: _Builder, options: Mapping[str, Any], accepted: dict[str, str]) -> None:
    for name, value in options.items():
        target = accepted.get(name.lower())
        if target is None:
            raise _unknown(builder.scheme, name, accepted)
        if target == "headers":
            builder.out.client["default_headers"] = {
                k: Secret(v) if _SECRET_NAME.search(k) else v for k, v in value.items()
            }
        elif target == "allow_invalid_certificates":
            builder.out.client["allow_invalid_certificates"] = not _bool(name, value)
        else:
            builder.set(target, value, name, secret=target == "token")


def normalize_options(
    scheme: str,
    storage_options: Mapping[str, Any] | None = None,
    session_options: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> BackendOptions:
    """Normalize the options of a ``scheme://`` URL.

    ``session_options`` (boto3 ``Session`` kwargs) count for s3/r2 only; ``environ`` (default
    ``os.environ``) gives r2's endpoint and gs's ``STORAGE_EMULATOR_HOST``. A ValueError names an
    unknown key, a key given twice with different values, or a missing r2 endpoint.
    """
    environ = os.environ if environ is None else environ
    options = dict(storage_options or {})
    io = {name: options.pop(name) for name in IO_OPTION_NAMES if name in options}
    provider = "local" if scheme in ("", "file", "local") else provider_of(scheme)
    default = {"local": "local", "hf": "fsspec", "fsspec": "fsspec"}.get(provider, "obstore")
    emulator = _gcs_emulator(environ) if provider == "gcs" else None
    if emulator is not None and not _GCS_ENDPOINT_NAMES.intersection(name.lower() for name in options):
        # Google's clients (and upstream LitData) send every request to STORAGE_EMULATOR_HOST, without
        # credentials. The emulators (fake-gcs-server, Google's testbench) implement the JSON API, which
        # gcsfs speaks; obstore uploads through the XML API, which they refuse: fsspec by default.
        default = "fsspec"
        anonymous = not any(name.lower() in _GCS_CREDENTIAL_NAMES for name in options)
        options = {**options, "endpoint_url": emulator, **({"token": "anon"} if anonymous else {})}
    backend = str(options.pop("backend", default) or default).lower()
    if backend == "python":
        raise ValueError(
            "storage_options['backend']='python': the pure-Python S3/HTTP client is gone; obstore now serves "
            "every process (forked DataLoader workers included), so drop the option (or use 'fsspec')"
        )
    if backend not in ("obstore", "fsspec", "local"):
        raise ValueError(f"storage_options['backend']={backend!r}: use 'obstore' or 'fsspec'")
    builder = _Builder(scheme, provider, backend)
    if provider == "local":
        pass  # a local folder takes no credentials; other keys are ignored, as upstream does
    elif backend == "fsspec" and provider != "hf":
        _fsspec_kwargs(builder, options)
    elif provider == "s3":
        _s3(builder, options, io)
        if session_options:  # a boto3 Session's settings yield to the client's (storage_options)
            _s3(builder, session_options, io, session=True)
        if scheme == "r2":
            builder.out.config.setdefault("region", "auto")
            endpoint = builder.out.config.get("endpoint") or _r2_endpoint(environ)
            if not endpoint:
                raise ValueError(
                    "r2:// needs the account's S3 endpoint: pass storage_options={'endpoint_url': "
                    "'https://<account_id>.r2.cloudflarestorage.com', ...} or set R2_ENDPOINT_URL or R2_ACCOUNT_ID"
                )
            builder.out.config["endpoint"] = endpoint
    elif provider == "gcs":
        _gcs(builder, options)
    elif provider == "azure":
        _azure(builder, options)
    elif provider == "http":
        _simple(builder, options, {"headers": "headers", "verify": "allow_invalid_certificates"})
    elif provider == "hf":
        _simple(
            builder, options, {"token": "token", "hf_token": "token", "endpoint": "endpoint", "revision": "revision"}
        )
    endpoint = builder.out.config.get("base_url" if provider == "gcs" else "endpoint")
    if backend == "obstore" and provider != "hf" and isinstance(endpoint, str) and endpoint.startswith("http://"):
        builder.out.client["allow_http"] = True  # an emulator or a local server
    builder.out.settings = IOSettings.from_options(io, environ)
    return builder.out
