"""One interface to S3 (and S3-compatible servers), GCS and Azure: obstore, every connection through the
process's ``GuardProxy`` (``guard``), every request capped in time, no retries that would hide a refusal.

Why obstore: one maintained client (Rust ``object_store``, used by Arrow and Polars) for the three providers,
with listing, ranged reads, HEAD (ETag and version) and presigned URLs, sync and async; measured against moto
here (docs: /work/shared/reference/infra-reference.md). S3's ListBuckets, which ``object_store`` lacks, goes
through boto3 on the same proxy (``list_buckets``).
"""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from typing import Any

import boto3
import obstore
from botocore.config import Config
from obstore.store import AzureStore, GCSStore, S3Store

from lanner.config import Settings
from lanner.integrations.guard import GuardProxy, Resolver, parse_networks, system_resolver

PROVIDERS = ("s3", "gcs", "azure")
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
        key = credentials["serviceAccountKey"]
        extra = {"base_url": endpoint} if endpoint else {}
        return GCSStore(target, service_account_key=key if isinstance(key, str) else json.dumps(key),
                        client_options=options, retry_config=retry, **extra)
    extra = {"endpoint": endpoint} if endpoint else {}
    return AzureStore(target, account_name=credentials["accountName"], account_key=credentials["accountKey"],
                      client_options=options, retry_config=retry, **extra)


def list_buckets(settings: Settings, *, credentials: dict[str, Any], endpoint: str | None,
                 region: str | None) -> list[str]:
    """S3 ListBuckets through the guard (boto3: ``object_store`` has no bucket listing)."""
    proxy = guard_for(settings).url
    client = boto3.client(
        "s3", endpoint_url=endpoint, region_name=region or "us-east-1",
        aws_access_key_id=credentials["accessKeyId"], aws_secret_access_key=credentials["secretAccessKey"],
        aws_session_token=credentials.get("sessionToken"),
        config=Config(proxies={"http": proxy, "https": proxy}, connect_timeout=min(5, settings.bucket_timeout_seconds),
                      read_timeout=settings.bucket_timeout_seconds, retries={"max_attempts": 1},
                      signature_version="s3v4", s3={"addressing_style": "path"}))
    return [bucket["Name"] for bucket in client.list_buckets().get("Buckets", [])]


def head(store: Any, key: str) -> dict[str, Any]:
    return obstore.head(store, key)


def presign(store: Any, key: str, seconds: int) -> str:
    return str(obstore.sign(store, "GET", key, timedelta(seconds=seconds)))
