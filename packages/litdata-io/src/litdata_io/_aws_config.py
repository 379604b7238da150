"""S3 credentials for this process: explicit options, then the environment, then a profile file.

obstore reads ``AWS_*`` environment variables (keys, region, endpoint, web identity, container
and instance credentials) by itself, but not the shared ``~/.aws/credentials`` / ``~/.aws/config``
files. boto3 users expect a profile to work, so the profile is read here, with no boto3: the files
are INI files. This runs in each process when its client is built; the keys read from a file are
never stored in the storage object, so they never travel in a pickle (the worker reads the file).

Order, as boto3's chain: keys in ``storage_options``/``session_options`` > ``AWS_ACCESS_KEY_ID``
and friends (and web-identity/container credentials) in the environment > the named profile
(``profile_name``, else ``AWS_PROFILE``, else ``default``) > instance metadata (obstore).
"""

from __future__ import annotations

import configparser
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from litdata_io._options import BackendOptions

__all__ = ["endpoint_of", "read_profile", "s3_client_config"]

_ENV_CREDENTIALS = (
    "AWS_ACCESS_KEY_ID",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
)
_ENV_ENDPOINTS = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ENDPOINT")
_INDIRECT = (
    "role_arn",
    "source_profile",
    "credential_process",
    "sso_session",
    "sso_start_url",
    "web_identity_token_file",
)


def _read_ini(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, default_section="\0none")
    try:
        parser.read(path, encoding="utf-8")
    except configparser.Error as exc:
        raise ValueError(f"{path} is not a valid AWS INI file: {exc}") from None
    return parser


def read_profile(name: str, environ: Mapping[str, str] | None = None) -> dict[str, str] | None:
    """The settings of AWS profile ``name`` from the shared credentials and config files.

    Keys come from ``$AWS_SHARED_CREDENTIALS_FILE`` (default ``~/.aws/credentials``, section
    ``[name]``) and ``$AWS_CONFIG_FILE`` (default ``~/.aws/config``, section ``[profile name]`` or
    ``[default]``); the credentials file wins on conflicts, as in boto3.

    Args:
        name: the profile name.
        environ: the environment (``os.environ`` by default).

    Returns:
        The profile's top-level settings (lower-case names), or None if no file has the profile.
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


def s3_client_config(options: BackendOptions, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The S3Store config for this process: explicit options completed from a profile file.

    Args:
        options: the normalized ``storage_options``.
        environ: the environment (``os.environ`` by default).

    Raises:
        ValueError: a profile named explicitly does not exist, or needs boto3 (SSO, assume-role,
            credential_process).
    """
    environ = os.environ if environ is None else environ
    config = options.merged()
    explicit = options.profile
    name = explicit or environ.get("AWS_PROFILE") or environ.get("AWS_DEFAULT_PROFILE") or "default"
    wants_keys = "access_key_id" not in config and not config.get("skip_signature")
    env_has_keys = any(environ.get(var) for var in _ENV_CREDENTIALS)
    needs_profile = explicit is not None or (not env_has_keys and wants_keys) or not _has_region(config, environ)
    profile = read_profile(name, environ) if needs_profile else None
    if explicit is not None and profile is None:
        raise ValueError(
            f"AWS profile {explicit!r} (session_options['profile_name']) is not in {_files(environ)}; "
            "create it with `aws configure --profile NAME` or pass the keys in storage_options"
        )
    if profile:
        has_keys = "aws_access_key_id" in profile and "aws_secret_access_key" in profile
        if wants_keys and (explicit is not None or not env_has_keys):
            if has_keys:
                config["access_key_id"] = profile["aws_access_key_id"]
                config["secret_access_key"] = profile["aws_secret_access_key"]
                if profile.get("aws_session_token") or profile.get("aws_security_token"):
                    config["session_token"] = profile.get("aws_session_token") or profile["aws_security_token"]
            elif explicit is not None and any(key in profile for key in _INDIRECT):
                raise ValueError(
                    f"AWS profile {explicit!r} gets its credentials through SSO, assume-role or credential_process, "
                    "which litdata-io resolves without boto3 only for static keys. Export temporary keys first "
                    f"(`aws configure export-credentials --profile {explicit} --format env`) or pass them in "
                    "storage_options"
                )
        if not _has_region(config, environ) and profile.get("region"):
            config["region"] = profile["region"]
        if (
            "endpoint" not in config
            and not any(environ.get(var) for var in _ENV_ENDPOINTS)
            and profile.get("endpoint_url")
        ):
            config["endpoint"] = profile["endpoint_url"]
    return config


def _has_region(config: Mapping[str, Any], environ: Mapping[str, str]) -> bool:
    return bool(config.get("region") or environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION"))


def _files(environ: Mapping[str, str]) -> str:
    credentials = environ.get("AWS_SHARED_CREDENTIALS_FILE") or "~/.aws/credentials"
    config = environ.get("AWS_CONFIG_FILE") or "~/.aws/config"
    return f"{credentials} or {config}"


def endpoint_of(config: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> str | None:
    """The S3 endpoint a client will use: the configured one, else the environment's.

    Args:
        config: the S3Store config.
        environ: the environment (``os.environ`` by default).
    """
    environ = os.environ if environ is None else environ
    if config.get("endpoint"):
        return str(config["endpoint"])
    return next((environ[var] for var in _ENV_ENDPOINTS if environ.get(var)), None)
