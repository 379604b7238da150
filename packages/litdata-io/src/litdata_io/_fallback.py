"""What serves an obstore URL in a process where obstore cannot run (forked after it started).

S3, R2 and HTTP(S) fall back to the pure-Python client (:mod:`litdata_io._python_backend`), GCS to
gcsfs and Azure to adlfs through fsspec when they are installed. Otherwise the call fails at once
with what to do, instead of hanging in a runtime whose threads did not survive the fork.
"""

from __future__ import annotations

import importlib.util
import json
import os
from typing import Any

from litdata_io._errors import StorageError
from litdata_io._options import BackendOptions
from litdata_io._secret import Secret
from litdata_io._storage import Storage

__all__ = ["fallback_storage"]

_ADVICE = (
    "obstore's runtime was started in a parent process before this process was forked, and it cannot run "
    "after a fork. Create DataLoader workers with multiprocessing_context='spawn' or 'forkserver', or avoid "
    "touching {url} in the parent before forking"
)


def _gcsfs_options(options: BackendOptions) -> tuple[dict[str, Any], dict[str, Secret]]:
    config = options.merged()
    kwargs: dict[str, Any] = {}
    if config.get("project"):
        kwargs["project"] = config["project"]
    if config.get("skip_signature"):
        kwargs["token"] = "anon"
    elif config.get("service_account_key"):
        kwargs["token"] = json.loads(config["service_account_key"])  # lives only in this process
    elif config.get("application_credentials") or config.get("service_account"):
        kwargs["token"] = config.get("application_credentials") or config["service_account"]
    elif config.get("bearer_token"):
        raise StorageError("gs:// with a bearer_token has no fork-safe fallback; " + _ADVICE.format(url="gs://"))
    if config.get("base_url"):
        kwargs["endpoint_url"] = config["base_url"]
    return kwargs, {}


def _adlfs_options(options: BackendOptions) -> tuple[dict[str, Any], dict[str, Secret]]:
    config = options.merged()
    kwargs: dict[str, Any] = {}
    secrets: dict[str, Secret] = {}
    if config.get("use_emulator") in (True, "true"):
        secrets["connection_string"] = Secret("UseDevelopmentStorage=true")
    for ours, theirs in (("account_name", "account_name"), ("tenant_id", "tenant_id"), ("client_id", "client_id")):
        if config.get(ours):
            kwargs[theirs] = config[ours]
    for ours, theirs in (("account_key", "account_key"), ("sas_key", "sas_token"), ("client_secret", "client_secret")):
        if config.get(ours):
            secrets[theirs] = Secret(config[ours])
    if config.get("skip_signature"):
        kwargs["anon"] = True
    if config.get("endpoint"):
        kwargs["account_host"] = config["endpoint"].split("://", 1)[-1].split("/", 1)[0]
    return kwargs, secrets


def fallback_storage(url: str, options: BackendOptions) -> Storage:
    """A fork-safe storage for ``url`` to use instead of obstore in this process.

    Args:
        url: the storage's root URL.
        options: its normalized options (in obstore's vocabulary).

    Raises:
        StorageError: no fork-safe client is available for this provider.
    """
    if options.provider in ("s3", "http"):
        from litdata_io._python_backend import PythonStorage

        return PythonStorage(url, options)
    from litdata_io._fsspec_backend import FsspecStorage

    if options.provider == "gcs" and importlib.util.find_spec("gcsfs") is not None:
        config, secrets = _gcsfs_options(options)
        fs_url = url
        extra = "gcs"
    elif options.provider == "azure" and importlib.util.find_spec("adlfs") is not None:
        config, secrets = _adlfs_options(options)
        fs_url = "az://" + url.split("://", 1)[1]
        extra = "azure"
    else:
        package = {"gcs": "gcsfs", "azure": "adlfs"}.get(options.provider, "a fork-safe client")
        raise StorageError(
            _ADVICE.format(url=url) + f"; or install {package} (pid {os.getpid()} would use it instead)", url=url
        )
    fallback = BackendOptions(provider="fsspec", backend="fsspec", config=config, secrets=secrets)
    fallback.settings = options.settings
    return FsspecStorage(url, fallback, extra=extra, fs_url=fs_url)
