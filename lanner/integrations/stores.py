"""One interface to S3 (and S3-compatible servers), GCS and Azure: obstore, every connection through the
process's ``GuardProxy`` (``guard``), every request capped in time, no retries that would hide a refusal.

Why obstore: one maintained client (Rust ``object_store``, used by Arrow and Polars) for the three providers,
with listing, ranged reads, HEAD (ETag and version) and presigned URLs, sync and async; measured against moto
here (docs: /work/shared/reference/infra-reference.md) and against the GCS and Azure emulators
(fake-gcs-server, Azurite: tests/integrations/test_clouds.py). Listing the buckets or containers themselves,
which ``object_store`` lacks, goes through each provider's own client on the same proxy (``list_targets``).

An endpoint (Lanner's extension of the credentials) points a store at an S3-compatible server, a GCS emulator
(``base_url``: object_store speaks GCS's XML API, path style) or an Azure emulator or private endpoint
(``http://host:10000/<account>``, path style).
"""

from __future__ import annotations

import json
import re
import threading
from datetime import timedelta
from typing import Any

import boto3
import httpx
import obstore
from botocore.config import Config
from obstore.store import AzureStore, GCSStore, S3Store

from lanner.config import Settings
from lanner.errors import BadRequest
from lanner.integrations.guard import GuardProxy, Resolver, parse_networks, system_resolver

PROVIDERS = ("s3", "gcs", "azure")
AZURE_ACCOUNT = re.compile(r"[a-z0-9]{3,24}")
GCS_READ_ONLY = "https://www.googleapis.com/auth/devstorage.read_only"
_guards: dict[str, GuardProxy] = {}
_guards_lock = threading.Lock()


def guard_for(settings: Settings) -> GuardProxy:
    """The process's guard for these allowed networks (started on first use, a daemon thread)."""
    key = settings.bucket_allowed_networks
    with _guards_lock:
        if key not in _guards:
            _guards[key] = GuardProxy(parse_networks(key), connect_timeout=min(5.0, settings.bucket_timeout_seconds))
        return _guards[key]


def set_resolver(settings: Settings, resolver: Resolver = system_resolver) -> None:
    """Tests: answer names from ``resolver`` (a DNS rebinding, a name resolving to 10.0.0.1)."""
    guard_for(settings).set_resolver(resolver)


def _client_options(settings: Settings, endpoint: str | None) -> dict[str, Any]:
    seconds = max(1, int(settings.bucket_timeout_seconds))
    return {"proxy_url": guard_for(settings).url, "allow_http": bool(endpoint and endpoint.startswith("http://")),
            "timeout": f"{seconds}s", "connect_timeout": f"{min(5, seconds)}s"}


def _retry(settings: Settings) -> dict[str, Any]:
    return {"max_retries": 1, "retry_timeout": timedelta(seconds=settings.bucket_timeout_seconds),
            "backoff": {"init_backoff": timedelta(milliseconds=100), "max_backoff": timedelta(seconds=1),
                        "base": 2}}


def build_store(settings: Settings, *, provider: str, credentials: dict[str, Any], target: str,
                endpoint: str | None, region: str | None) -> Any:
    """A store for one bucket or container. ``credentials`` are the unsealed ones: they live only as long as
    the call that needs them."""
    options, retry = _client_options(settings, endpoint), _retry(settings)
    if provider == "s3":
        extra: dict[str, Any] = {"endpoint": endpoint, "virtual_hosted_style_request": False} if endpoint else {}
        if credentials.get("sessionToken"):
            extra["session_token"] = credentials["sessionToken"]
        return S3Store(target, access_key_id=credentials["accessKeyId"],
                       secret_access_key=credentials["secretAccessKey"], region=region or "us-east-1",
                       client_options=options, retry_config=retry, skip_signature=False, **extra)
    if provider == "gcs":
        # object_store also reads a base URL (and "no auth") from the key itself: the endpoint comes only from
        # ``endpoint``, which was checked when the integration was made.
        key = {k: v for k, v in service_account_key(credentials).items() if k not in ("gcs_base_url", "disable_oauth")}
        extra = {"base_url": endpoint} if endpoint else {}
        return GCSStore(target, service_account_key=json.dumps(key), client_options=options, retry_config=retry,
                        **extra)
    extra = {"endpoint": endpoint} if endpoint else {}
    return AzureStore(target, account_name=azure_account(credentials), account_key=credentials["accountKey"],
                      client_options=options, retry_config=retry, **extra)


def azure_account(credentials: dict[str, Any]) -> str:
    """The storage account's name, which becomes the host name (``<account>.blob.core.windows.net``): Azure's
    rule, 3 to 24 lowercase letters and digits, so that it can name nothing else."""
    account = str(credentials["accountName"])
    if not AZURE_ACCOUNT.fullmatch(account):
        raise BadRequest("accountName must be 3 to 24 lowercase letters and digits")
    return account


def service_account_key(credentials: dict[str, Any]) -> dict[str, Any]:
    """A GCS service-account key as given (the JSON file's object, or its text)."""
    key = credentials["serviceAccountKey"]
    info = json.loads(key) if isinstance(key, str) else key
    if not isinstance(info, dict):
        raise ValueError("a service-account key is a JSON object")
    return info


def list_targets(settings: Settings, *, provider: str, credentials: dict[str, Any], endpoint: str | None,
                 region: str | None) -> list[str]:
    """The buckets (containers) these credentials can list, through the guard, in the provider's own way."""
    if provider == "s3":
        return _s3_buckets(settings, credentials, endpoint, region)
    if provider == "gcs":
        return _gcs_buckets(settings, credentials, endpoint)
    return _azure_containers(settings, credentials, endpoint)


def _s3_buckets(settings: Settings, credentials: dict[str, Any], endpoint: str | None,
                region: str | None) -> list[str]:
    """S3 ListBuckets (boto3: ``object_store`` has no bucket listing)."""
    proxy = guard_for(settings).url
    client = boto3.client(
        "s3", endpoint_url=endpoint, region_name=region or "us-east-1",
        aws_access_key_id=credentials["accessKeyId"], aws_secret_access_key=credentials["secretAccessKey"],
        aws_session_token=credentials.get("sessionToken"),
        config=Config(proxies={"http": proxy, "https": proxy}, connect_timeout=min(5, settings.bucket_timeout_seconds),
                      read_timeout=settings.bucket_timeout_seconds, retries={"max_attempts": 1},
                      signature_version="s3v4", s3={"addressing_style": "path"}))
    return [bucket["Name"] for bucket in client.list_buckets().get("Buckets", [])]


def _gcs_buckets(settings: Settings, credentials: dict[str, Any], endpoint: str | None) -> list[str]:
    """The key's project's buckets (JSON API ``buckets.list``). The bearer is a self-signed JWT made from the key
    here (google-auth, read-only scope), as ``object_store`` authenticates its own requests: no token exchange,
    so the only host contacted is the storage endpoint, through the guard."""
    from google.oauth2 import service_account  # here: only discover needs it (0.4 s to import)

    info = service_account_key(credentials)
    signer = service_account.Credentials.from_service_account_info(info, scopes=[GCS_READ_ONLY],
                                                                   always_use_jwt_access=True)
    signer.refresh(None)  # type: ignore[arg-type]  # self-signed: signs locally, no request
    names: list[str] = []
    params = {"project": str(info.get("project_id") or ""), "fields": "items(name),nextPageToken"}
    with httpx.Client(proxy=guard_for(settings).url, timeout=settings.bucket_timeout_seconds,
                      headers={"Authorization": f"Bearer {signer.token}"}) as client:
        while True:
            page = client.get(f"{endpoint or 'https://storage.googleapis.com'}/storage/v1/b", params=params)
            page.raise_for_status()
            body = page.json()
            names += [item["name"] for item in body.get("items", [])]
            if not body.get("nextPageToken"):
                return names
            params["pageToken"] = body["nextPageToken"]


def _azure_containers(settings: Settings, credentials: dict[str, Any], endpoint: str | None) -> list[str]:
    """The account's containers (List Containers, shared-key signed by Azure's own client)."""
    from azure.storage.blob import BlobServiceClient  # here: only discover needs it (1.4 s to import)

    proxy = guard_for(settings).url
    account = azure_account(credentials)
    client = BlobServiceClient(endpoint or f"https://{account}.blob.core.windows.net",
                               credential={"account_name": account, "account_key": credentials["accountKey"]},
                               proxies={"http": proxy, "https": proxy}, retry_total=0,
                               connection_timeout=min(5, settings.bucket_timeout_seconds),
                               read_timeout=settings.bucket_timeout_seconds)
    with client:
        return [container.name for container in client.list_containers()]


def etag(value: str | None) -> str:
    """An object's ETag in one form whatever answered it: quoted, as RFC 9110 writes it. Azure's (and
    fake-gcs-server's) listings give it bare while their HEAD quotes it; S3's quote both. A pin taken from a
    listing is compared with a HEAD later, and sent back as If-Match."""
    value = value or ""
    return value if not value or value.startswith(('"', 'W/"')) else f'"{value}"'


def head(store: Any, key: str) -> dict[str, Any]:
    return obstore.head(store, key)


def presign(store: Any, key: str, seconds: int) -> str:
    return str(obstore.sign(store, "GET", key, timedelta(seconds=seconds)))
