"""S3 credentials for this process: the whole AWS chain, in boto3's order, handed to obstore.

obstore reads most ``AWS_*`` variables itself and refreshes temporary credentials in Rust. The
rest is completed here, per client, in the process that builds it (keys read from a file never
travel in a pickle):

1. keys in ``storage_options`` / ``session_options`` (or ``skip_signature``: unsigned, on request only);
2. ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` (/ ``AWS_SESSION_TOKEN``);
3. a profile (``profile_name``, else ``AWS_PROFILE``, else ``default``) that assumes a role, runs a
   ``credential_process``, uses SSO or a web-identity token: through boto3
   (:mod:`litdata_io._storage._aws_boto3`), or a clear error when boto3 is missing;
4. web identity: ``AWS_WEB_IDENTITY_TOKEN_FILE`` + ``AWS_ROLE_ARN`` (obstore; STS at
   ``AWS_ENDPOINT_URL_STS``);
5. the profile's static keys (read from the INI files here, no boto3 needed);
6. container credentials: ``AWS_CONTAINER_CREDENTIALS_RELATIVE_URI``, or ``..._FULL_URI`` with
   ``AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE`` (obstore); a full URI with an inline token or none
   goes through boto3, which obstore cannot do;
7. EC2 instance metadata, IMDSv2 (obstore), at ``AWS_EC2_METADATA_SERVICE_ENDPOINT`` (mapped to
   obstore's ``metadata_endpoint``) unless ``AWS_EC2_METADATA_DISABLED=true``, in which case finding
   nothing is an error rather than an unsigned request.

A private CA (:func:`ca_bundle`): boto3's ``verify="/path/ca.pem"``, else ``AWS_CA_BUNDLE``, else
the profile's ``ca_bundle``, is added to the roots obstore trusts (its ``root_certificate``).
"""

from __future__ import annotations

import configparser
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from litdata_io._storage._options import BackendOptions

__all__ = ["ca_bundle", "endpoint_of", "read_profile", "s3_client_config"]

_ENV_ENDPOINTS = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT")
# profile settings that get credentials from somewhere else (boto3 resolves them)
_INDIRECT = (
    "role_arn",
    "credential_process",
    "sso_session",
    "sso_start_url",
    "web_identity_token_file",
)
_IMDS_IPV6 = "http://[fd00:ec2::254]"


def _read_ini(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, default_section="\0none")
    try:
        parser.read(path, encoding="utf-8")
    except configparser.Error as exc:
        raise ValueError(f"{path} is not a valid AWS INI file: {exc}") from None
    return parser


def read_profile(name: str, environ: Mapping[str, str] | None = None) -> dict[str, str] | None:
    """The top-level settings of AWS profile ``name`` (None: no file has it), as boto3 reads them.

    ``$AWS_SHARED_CREDENTIALS_FILE`` (``~/.aws/credentials``, section ``[name]``) wins over
    ``$AWS_CONFIG_FILE`` (``~/.aws/config``, section ``[profile name]`` or ``[default]``); ``environ``
    is ``os.environ`` by default.
    """
    environ = os.environ if environ is None else environ
    home = Path(environ.get("HOME") or Path.home())
    credentials = Path(environ.get("AWS_SHARED_CREDENTIALS_FILE") or home / ".aws" / "credentials").expanduser()
    config_file = Path(environ.get("AWS_CONFIG_FILE") or home / ".aws" / "config").expanduser()
    found: dict[str, str] | None = None
    config = _read_ini(config_file)
    section = "default" if name == "default" else f"profile {name}"
    for candidate in (section, name):
        if config.has_section(candidate):
            found = {key: value for key, value in config.items(candidate) if "\n" not in value}
            break
    creds = _read_ini(credentials)
    if creds.has_section(name):
        found = {**(found or {}), **dict(creds.items(name))}
    return found


def s3_client_config(options: BackendOptions, environ: Mapping[str, str] | None = None) -> tuple[dict[str, Any], Any]:
    """The S3Store config and credential provider (or None: obstore's own chain) for this process.

    Raises:
        ValueError: a profile named does not exist (or its source profile), boto3 is needed and
            missing, or no credential source is configured and instance metadata is disabled.
    """
    environ = os.environ if environ is None else environ
    config = options.merged()
    if "sts_endpoint" in config:  # the name obstore documents; the one it accepts is the SDK's
        config["aws_endpoint_url_sts"] = config.pop("sts_endpoint")
    explicit = options.profile
    name = _profile_name(options, environ)
    profile = read_profile(name, environ)
    if explicit is not None and profile is None:
        raise ValueError(
            f"AWS profile {explicit!r} (session_options['profile_name']) is not in {_files(environ)}; "
            "create it with `aws configure --profile NAME` or pass the keys in storage_options"
        )
    _settings_from_profile(config, profile or {}, environ)
    if "access_key_id" in config or config.get("skip_signature") or environ.get("AWS_ACCESS_KEY_ID"):
        return config, None  # 1-2: given keys, unsigned on request, or keys in the environment
    if profile is None and name != "default":  # AWS_PROFILE names a profile no file has: as boto3, say so
        variable = "AWS_PROFILE" if environ.get("AWS_PROFILE") else "AWS_DEFAULT_PROFILE"
        raise ValueError(
            f"AWS profile {name!r} ({variable}) is not in {_files(environ)}; create it with "
            f"`aws configure --profile {name}`, or unset {variable}"
        )
    if profile and any(key in profile for key in _INDIRECT) and not _is_static(profile):
        indirect = next(key for key in _INDIRECT if key in profile)
        why = f"profile {name!r} sets {indirect}"
        return config, _boto3_provider(name, why, profile, config, environ, options)
    token_file = config.get("web_identity_token_file") or environ.get("AWS_WEB_IDENTITY_TOKEN_FILE")
    if token_file and (config.get("role_arn") or environ.get("AWS_ROLE_ARN")):
        return config, None  # 4: obstore's web identity
    if profile and _is_static(profile):
        config["access_key_id"] = profile["aws_access_key_id"]
        config["secret_access_key"] = profile["aws_secret_access_key"]
        token = profile.get("aws_session_token") or profile.get("aws_security_token")
        if token:
            config["session_token"] = token
        return config, None
    if environ.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") or config.get("container_credentials_relative_uri"):
        return config, None
    if environ.get("AWS_CONTAINER_CREDENTIALS_FULL_URI") or config.get("container_credentials_full_uri"):
        if environ.get("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE") or config.get("container_authorization_token_file"):
            return config, None
        why = "AWS_CONTAINER_CREDENTIALS_FULL_URI is set without AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"
        if environ.get("AWS_CONTAINER_AUTHORIZATION_TOKEN"):
            why = "AWS_CONTAINER_CREDENTIALS_FULL_URI is set with an inline AWS_CONTAINER_AUTHORIZATION_TOKEN"
        return config, _boto3_provider(None, why, None, config, environ, options)
    if (environ.get("AWS_EC2_METADATA_DISABLED") or "").strip().lower() in ("1", "true", "yes", "on"):
        raise ValueError(
            "no AWS credentials found (storage_options, AWS_ACCESS_KEY_ID, a profile in "
            f"{_files(environ)}, web identity, container credentials) and AWS_EC2_METADATA_DISABLED=true "
            "turns off instance metadata; configure one of them, or pass storage_options={'anon': True} "
            "to send unsigned requests to a public bucket"
        )
    if "metadata_endpoint" not in config and not environ.get("AWS_METADATA_ENDPOINT"):
        if environ.get("AWS_EC2_METADATA_SERVICE_ENDPOINT"):
            config["metadata_endpoint"] = environ["AWS_EC2_METADATA_SERVICE_ENDPOINT"].rstrip("/")
        elif environ.get("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE", "").lower() == "ipv6":
            config["metadata_endpoint"] = _IMDS_IPV6
    return config, None


def ca_bundle(options: BackendOptions, environ: Mapping[str, str] | None = None) -> bytes | None:
    """The PEM certificates S3 connections trust besides the system roots, or None.

    boto3's order: ``verify="/path/ca.pem"`` in ``options``, else ``AWS_CA_BUNDLE``, else the profile's
    ``ca_bundle``; the file is read in the process that connects (a ValueError if it cannot be).
    """
    environ = os.environ if environ is None else environ
    if options.client.get("ca_bundle"):
        path, where = str(options.client["ca_bundle"]), "storage_options['verify']"
    elif environ.get("AWS_CA_BUNDLE"):
        path, where = environ["AWS_CA_BUNDLE"], "AWS_CA_BUNDLE"
    else:
        name = _profile_name(options, environ)
        path, where = (read_profile(name, environ) or {}).get("ca_bundle", ""), f"ca_bundle of AWS profile {name!r}"
    if not path:
        return None
    try:
        return Path(path).expanduser().read_bytes()
    except OSError as exc:
        raise ValueError(
            f"{where} names the CA bundle {path}, which cannot be read ({exc.strerror}); "
            "point it at a PEM file with the certificates to trust, or unset it"
        ) from None


def _profile_name(options: BackendOptions, environ: Mapping[str, str]) -> str:
    return options.profile or environ.get("AWS_PROFILE") or environ.get("AWS_DEFAULT_PROFILE") or "default"


def _settings_from_profile(config: dict[str, Any], profile: Mapping[str, str], environ: Mapping[str, str]) -> None:
    """Region and endpoint from the profile, where neither the options nor the environment set them."""
    region = config.get("region") or environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION")
    if not region and profile.get("region"):
        config["region"] = profile["region"]
    if "endpoint" not in config and not any(environ.get(var) for var in _ENV_ENDPOINTS) and profile.get("endpoint_url"):
        config["endpoint"] = profile["endpoint_url"]


def _is_static(profile: Mapping[str, str]) -> bool:
    return "aws_access_key_id" in profile and "aws_secret_access_key" in profile


def _boto3_provider(
    name: str | None,
    why: str,
    profile: Mapping[str, str] | None,
    config: Mapping[str, Any],
    environ: Mapping[str, str],
    options: BackendOptions,
) -> Any:
    """The obstore boto3 credential provider for profile ``name`` (None: boto3's default chain)."""
    source = profile.get("source_profile") if profile else None
    if source and read_profile(source, environ) is None:
        raise ValueError(
            f"AWS profile {name!r} sets source_profile = {source}, which is not in {_files(environ)}; "
            f"add a [{'default' if source == 'default' else 'profile ' + source}] section with its keys, "
            "or point source_profile at a profile that exists"
        )
    try:
        from litdata_io._storage._aws_boto3 import boto3_provider
    except ImportError:
        raise ValueError(
            f"AWS credentials: {why}, which litdata-io resolves through boto3, and boto3 is not installed: "
            'pip install "litdata-io[aws-profiles]" (or boto3; or export temporary keys first: '
            f"`aws configure export-credentials{f' --profile {name}' if name else ''} --format env`)"
        ) from None
    return boto3_provider(name, why, config.get("region") or environ.get("AWS_REGION"), options.settings)


def _files(environ: Mapping[str, str]) -> str:
    credentials = environ.get("AWS_SHARED_CREDENTIALS_FILE") or "~/.aws/credentials"
    config = environ.get("AWS_CONFIG_FILE") or "~/.aws/config"
    return f"{credentials} or {config}"


def endpoint_of(config: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> str | None:
    """The S3 endpoint a client with S3Store ``config`` will use: the configured one, else the environment's."""
    environ = os.environ if environ is None else environ
    if config.get("endpoint"):
        return str(config["endpoint"])
    return next((environ[var] for var in _ENV_ENDPOINTS if environ.get(var)), None)
