"""What the credential tests share: the objects they seed, a clean environment, one AWS credential
source's environment (:func:`aws_source_environment`), running the driver.

The driver (``tests/scripts/credential_source.py``) runs in a process of its own whose environment holds one
credential source and no keys: forked from the torch-preloaded zygote (``tests/support/zygote.py``), or a
fresh interpreter in a network namespace of its own (``tests/support/netns.py``), for endpoints at fixed
addresses or host names.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.scripts.credential_source import N
from tests.support.cred_servers import ACCOUNT, ROLE_ARN, SSO_ROLE, Authority, CredentialStack
from tests.support.netns import Bridge, command_in_namespace
from tests.support.zygote import run_python

__all__ = [
    "AWS_SOURCES",
    "ROOT",
    "aws_source_environment",
    "clean_environment",
    "objects",
    "port_of",
    "register_static_keys",
    "run_driver",
]

ROOT = Path(__file__).resolve().parents[2]
SSO_START_URL = "https://litdata-test.awsapps.com/start"
STATIC = ("AKIASTATICPROFILE001", "static-profile-secret")
BASE = ("AKIAROLESOURCE000001", "role-source-secret")
PROCESS = ("AKIACREDPROCESS00001", "credential-process-secret")
AWS_SOURCES: dict[str, str] = {
    # source (what aws_source_environment sets up): who issues the keys S3 requests are signed with
    "imds": "imds",
    "assume-role-profile": "assume-role",
    "web-identity": "web-identity",
    "web-identity-profile": "web-identity",
    "container-full-uri": "container-full",
    "container-full-uri-no-token": "container-open",
    "container-full-uri-inline-token": "container-full",
    "container-relative-uri": "container-relative",
    "static-profile": "static",
    "credential-process-profile": "static",
    "credential-process-temporary-profile": "credential-process",
    "sso-session-profile": "sso",
    "sso-legacy-profile": "sso",
    "ca-bundle-profile": "static",
}
"""Every AWS source :func:`aws_source_environment` knows. Through boto3 (litdata_io._storage._aws_boto3):
``assume-role-profile``, ``web-identity-profile``, ``container-full-uri-no-token``,
``container-full-uri-inline-token`` (``AWS_CONTAINER_AUTHORIZATION_TOKEN``, as EKS Pod Identity and
ECS may set it), the
``credential-process-*`` and ``sso-*`` profiles; the others obstore resolves itself.
``container-relative-uri`` needs ``169.254.170.2:80`` (a network namespace: see tests/support/cred_suite.py)."""


def objects(local: Path) -> dict[str, bytes]:
    """The dataset (``data/``) and the raw files (``raw/``), by key."""
    from litdata_format import BinaryWriter

    writer = BinaryWriter(local, chunk_size=4)
    for i in range(N):
        writer.add_item(i, {"index": i})
    writer.done()
    writer.merge()
    found = {f"data/{path.name}": path.read_bytes() for path in sorted(local.iterdir())}
    found.update({f"raw/{i:03d}.json": json.dumps({"i": i}).encode() for i in range(N)})
    return found


def clean_environment(home: Path) -> dict[str, str]:
    """No cloud settings from outside, no proxies, no CA settings, an empty HOME."""
    keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "UV_CACHE_DIR", "VIRTUAL_ENV")
    home.mkdir(exist_ok=True)
    return {
        **{name: os.environ[name] for name in keep if name in os.environ},
        "HOME": str(home),
        "PYTHONPATH": str(ROOT),
    }


def register_static_keys(authority: Authority) -> None:
    """Accept the static keys the profiles of :func:`aws_source_environment` hold, for what each may sign."""
    authority.register_static(*STATIC, services=("s3",))
    authority.register_static(*PROCESS, services=("s3",))  # what the static credential_process prints
    authority.register_static(*BASE, services=("sts",))  # may only assume the role


def port_of(endpoint: str) -> int:
    """The port of ``http(s)://host:port``."""
    return int(endpoint.rsplit(":", 1)[1].rstrip("/"))


def run_driver(
    spec: dict[str, Any],
    env: dict[str, str],
    namespace: Mapping[str, int] | None = None,
    hosts: Sequence[str] = (),
) -> dict[str, Any]:
    """Run the driver; its results by phase.

    Args:
        spec: the driver's spec.
        env: its whole environment.
        namespace: run it in a network namespace whose ``"host:port"`` listeners lead to these
            127.0.0.1 ports outside (None: run it here).
        hosts: host names that resolve to 127.0.0.1 in the namespace.
    """
    arguments = ["-m", "tests.scripts.credential_source", json.dumps(spec)]
    if namespace is None:  # forked from the torch-preloaded zygote (tests/support/zygote.py)
        return _results(spec, run_python(arguments, env=env, cwd=ROOT, timeout=600))
    with (
        tempfile.TemporaryDirectory(prefix="ns-") as folder,
        Bridge(Path(folder), sorted(set(namespace.values()))) as bridge,
    ):
        addresses = sorted({inside.rsplit(":", 1)[0] for inside in namespace} - {"127.0.0.1"})
        command = command_in_namespace(bridge, namespace, [sys.executable, *arguments], addresses, hosts)
        done = subprocess.run(command, check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        return _results(spec, done)


def _results(spec: dict[str, Any], done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr[-4000:]  # check=False above: the driver's stderr says why
    results = json.loads(done.stdout.strip().splitlines()[-1])
    print(spec["source"], {phase: result["seconds"] for phase, result in results.items()})
    return results


def aws_source_environment(source: str, credentials: CredentialStack, folder: Path) -> dict[str, str]:
    """A clean environment with one AWS credential source (a key of :data:`AWS_SOURCES`) and no keys.

    Its HOME (with the profile files) is ``folder / f"home-{source}"``; the S3 endpoint
    (``AWS_ENDPOINT_URL``) is ``credentials.checker``. The static keys must be registered
    (:func:`register_static_keys`).
    """
    home = folder / f"home-{source}"
    env = clean_environment(home)
    server = credentials.credentials.endpoint
    env.update(
        AWS_REGION="us-east-1",
        AWS_ENDPOINT_URL=credentials.checker.endpoint,
        AWS_CONFIG_FILE=str(home / "config"),
        AWS_SHARED_CREDENTIALS_FILE=str(home / "credentials"),
        AWS_EC2_METADATA_DISABLED="true",  # a source that fails must not reach for a real 169.254.169.254
    )
    token_file = home / "token"
    if source == "ca-bundle-profile":
        env["AWS_ENDPOINT_URL"] = credentials.tls_checker.endpoint
        (home / "credentials").write_text(
            f"[default]\naws_access_key_id = {STATIC[0]}\naws_secret_access_key = {STATIC[1]}\n"
        )
        (home / "config").write_text(f"[default]\nca_bundle = {credentials.ca_file}\n")
    elif source.startswith("sso-"):
        _sso_profile(env, home, credentials, legacy=source == "sso-legacy-profile")
    elif source == "container-relative-uri":
        env["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"] = "/container/relative/v2/credentials"
    elif source == "imds":
        del env["AWS_EC2_METADATA_DISABLED"]
        env["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = server
    elif source == "web-identity":
        token_file.write_text(credentials.credentials.web_identity_token)
        env.update(
            AWS_WEB_IDENTITY_TOKEN_FILE=str(token_file),
            AWS_ROLE_ARN=ROLE_ARN,
            AWS_ENDPOINT_URL_STS=credentials.tls_credentials.endpoint + "/sts/",
            AWS_CA_BUNDLE=str(credentials.ca_file),  # obstore calls STS over HTTPS only: behind a private CA here
        )
    elif source == "container-full-uri":
        token_file.write_text(credentials.credentials.container_token)
        env.update(
            AWS_CONTAINER_CREDENTIALS_FULL_URI=f"{server}/container/full/v2/credentials",
            AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=str(token_file),
        )
    elif source == "container-full-uri-inline-token":  # the token itself in the environment, no token file
        env.update(
            AWS_CONTAINER_CREDENTIALS_FULL_URI=f"{server}/container/full/v2/credentials",
            AWS_CONTAINER_AUTHORIZATION_TOKEN=credentials.credentials.container_token,
        )
    elif source == "container-full-uri-no-token":
        env["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = f"{server}/container/open/v2/credentials"
    elif source == "static-profile":
        (home / "credentials").write_text(
            f"[default]\naws_access_key_id = {STATIC[0]}\naws_secret_access_key = {STATIC[1]}\n"
        )
    elif source == "credential-process-profile":
        keys = {"Version": 1, "AccessKeyId": PROCESS[0], "SecretAccessKey": PROCESS[1]}
        (home / "process.py").write_text(f"print({json.dumps(json.dumps(keys))})\n")
        (home / "config").write_text(f"[default]\ncredential_process = {sys.executable} {home / 'process.py'}\n")
    elif source == "credential-process-temporary-profile":  # prints the server's temporary keys, with Expiration
        fetch = f"urllib.request.urlopen({server + '/process/credentials'!r}, timeout=30).read().decode()"
        (home / "process.py").write_text(f"import urllib.request\nprint({fetch})\n")
        (home / "config").write_text(f"[default]\ncredential_process = {sys.executable} {home / 'process.py'}\n")
    elif source == "assume-role-profile":
        (home / "config").write_text(
            f"[profile train]\nrole_arn = {ROLE_ARN}\nsource_profile = base\n\n"
            f"[profile base]\naws_access_key_id = {BASE[0]}\naws_secret_access_key = {BASE[1]}\n"
        )
        env.update(AWS_PROFILE="train", AWS_ENDPOINT_URL_STS=f"{server}/sts/")
    elif source == "web-identity-profile":  # boto3 calls STS (plain HTTP is fine for it)
        token_file.write_text(credentials.credentials.web_identity_token)
        (home / "config").write_text(
            f"[profile train]\nrole_arn = {ROLE_ARN}\nweb_identity_token_file = {token_file}\n"
        )
        env.update(AWS_PROFILE="train", AWS_ENDPOINT_URL_STS=f"{server}/sts/")
    elif source not in AWS_SOURCES:
        raise ValueError(f"unknown AWS credential source {source!r}; known: {sorted(AWS_SOURCES)}")
    return env


def _sso_profile(env: dict[str, str], home: Path, credentials: CredentialStack, *, legacy: bool) -> None:
    """An SSO profile as ``aws configure sso`` writes it, and the token ``aws sso login`` caches.

    The sso-session form keys the cached token by the session's name, the legacy form by the start URL.
    """
    import hashlib

    role = f"sso_account_id = {ACCOUNT}\nsso_role_name = {SSO_ROLE}\n"
    if legacy:
        config = f"[profile train]\nsso_start_url = {SSO_START_URL}\nsso_region = us-east-1\n{role}"
        cache_key = SSO_START_URL
    else:
        config = (
            f"[profile train]\nsso_session = corp\n{role}\n"
            f"[sso-session corp]\nsso_start_url = {SSO_START_URL}\nsso_region = us-east-1\n"
        )
        cache_key = "corp"
    (home / "config").write_text(config)
    cache = home / ".aws" / "sso" / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    token = {
        "startUrl": SSO_START_URL,
        "region": "us-east-1",
        "accessToken": credentials.credentials.sso_token,
        "expiresAt": "2099-01-01T00:00:00Z",  # valid: boto3 has nothing to refresh through SSO-OIDC
    }
    (cache / f"{hashlib.sha1(cache_key.encode()).hexdigest()}.json").write_text(json.dumps(token))
    env.update(AWS_PROFILE="train", AWS_ENDPOINT_URL_SSO=credentials.credentials.endpoint)
