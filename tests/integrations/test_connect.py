"""storage_integrations.* through the SDK against a moto bucket: the SDK's shapes, credentials sealed and never
returned or logged, another user's integration a 404, and the endpoint guard (SSRF) refusing loopback, private,
link-local and metadata addresses, directly or through a name, unless the operator allows them."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from sqlalchemy import select
from ultralytics_platform import APIError

from lanner.integrations import service, stores
from lanner.integrations.guard import EndpointRefused, check_endpoint, parse_networks
from lanner.integrations.models import StorageIntegration
from tests.integrations.conftest import KEY_ID, SECRET, Bucket
from tests.sdk_types import assert_sdk_type


def put(bucket: Bucket, key: str, body: bytes = b"x") -> None:
    bucket.s3.put_object(Bucket="photos", Key=key, Body=body)


def test_connect_browse_update_and_disconnect_with_the_sdk(sdk: Any, alice: Any, bob: Any, bucket: Bucket,
                                                           app: Any, client: Any, caplog: Any, capfd: Any) -> None:
    caplog.set_level(logging.DEBUG)
    for key in ("train/images/a.jpg", "train/images/b.png", "train/labels/a.txt", "val/images/c.jpg", "readme.md"):
        put(bucket, key)
    platform = sdk(alice)
    discovered = platform.storage_integrations.discover(body={"provider": "s3", "credentials": bucket.credentials()})
    assert assert_sdk_type(discovered, "StorageIntegrationsDiscoverResponse") == {"targets": ["photos"]}
    created = platform.storage_integrations.create(body={"provider": "s3", "targets": ["photos"],
                                                         "credentials": bucket.credentials()})
    assert_sdk_type(created, "StorageIntegrationsCreateResponse")
    assert created["credentialIdentity"] == KEY_ID and created["targets"] == ["photos"] and created["processing"]
    listed = assert_sdk_type(platform.storage_integrations.list(), "StorageIntegrationsListResponse")
    assert [i["id"] for i in listed["integrations"]] == [created["id"]]

    top = assert_sdk_type(platform.storage_integrations.objects(created["id"], target="photos"),
                          "StorageIntegrationsObjectsResponse")
    assert [(e["kind"], e["key"]) for e in top["entries"]] == [
        ("file", "readme.md"), ("folder", "train/"), ("folder", "val/")]
    inner = platform.storage_integrations.objects(created["id"], target="photos", prefix="train/images/")
    assert [e["name"] for e in inner["entries"]] == ["a.jpg", "b.png"] and inner["entries"][0]["size"] == 1

    scan = client.get(f"/api/integrations/buckets/{created['id']}/scan", params={"target": "photos"},
                      headers=alice.headers).json()
    assert (scan["images"], scan["labels"]) == (3, 1)
    assert scan["prefixes"] == [{"prefix": "train/", "images": 2, "labels": 1},
                                {"prefix": "val/", "images": 1, "labels": 0}]

    updated = platform.storage_integrations.update(created["id"], processing=False)
    assert_sdk_type(updated, "StorageIntegrationsUpdateResponse")
    assert updated["processing"] is False

    # Another user: every route a 404, and nothing listed.
    other = sdk(bob)
    assert other.storage_integrations.list() == {"integrations": []}
    for call in (lambda: other.storage_integrations.objects(created["id"], target="photos"),
                 lambda: other.storage_integrations.update(created["id"], processing=True),
                 lambda: other.storage_integrations.delete(created["id"])):
        with pytest.raises(APIError) as refused:
            call()
        assert refused.value.status_code == 404
    # A target the credentials were not connected for.
    with pytest.raises(APIError) as refused:
        platform.storage_integrations.objects(created["id"], target="elsewhere")
    assert refused.value.status_code == 404

    # Sealed at rest; never in a response or a log line.
    with app.state.lanner.db.session() as session:
        row = session.scalar(select(StorageIntegration))
        assert SECRET not in row.secret and KEY_ID not in row.secret
    assert platform.storage_integrations.delete(created["id"]) == {"success": True}
    assert platform.storage_integrations.list() == {"integrations": []}
    captured = capfd.readouterr()
    for text in (caplog.text, captured.out, captured.err, str(created), str(listed), str(top), str(scan)):
        assert SECRET not in text


def test_without_the_operators_key_nothing_is_stored(client: Any, alice: Any, bucket: Bucket, settings: Any) -> None:
    settings.secrets_key = None
    answer = client.post("/api/integrations/buckets", headers=alice.headers, json={
        "provider": "s3", "targets": ["photos"], "credentials": bucket.credentials()})
    assert answer.status_code == 503 and "LANNER_SECRETS_KEY" in answer.json()["error"]
    assert SECRET not in answer.text


def test_wrong_credentials_are_refused_without_echoing_them(client: Any, alice: Any, bucket: Bucket) -> None:
    answer = client.post("/api/integrations/buckets", headers=alice.headers, json={
        "provider": "s3", "targets": ["no-such-bucket"], "credentials": bucket.credentials()})
    assert answer.status_code == 400 and answer.json()["code"] == "bucket_unreachable"
    assert SECRET not in answer.text and "no-such-bucket" not in answer.json()["error"]


HOSTILE = ["http://127.0.0.1:9000", "http://10.1.2.3:9000", "http://169.254.169.254", "http://[::1]:9000",
           "http://[::ffff:127.0.0.1]:9000", "http://0.0.0.0:9000", "http://192.168.1.10"]


@pytest.mark.parametrize("endpoint", HOSTILE)
def test_hostile_endpoints_are_refused_unless_allowed(endpoint: str) -> None:
    with pytest.raises(EndpointRefused):
        check_endpoint(endpoint, [])
    allowed = parse_networks("127.0.0.0/8,10.0.0.0/8,169.254.0.0/16,::1/128,192.168.0.0/16,0.0.0.0/32")
    assert check_endpoint(endpoint, allowed) == endpoint


@pytest.mark.parametrize("address", ["127.0.0.1", "10.0.0.7", "169.254.169.254"])
def test_a_name_resolving_to_a_hostile_address_is_refused(address: str) -> None:
    with pytest.raises(EndpointRefused):
        check_endpoint("https://bucket.example.com", [], resolver=lambda host, port: [address])
    with pytest.raises(EndpointRefused):  # one bad answer among good ones is enough
        check_endpoint("https://bucket.example.com", [], resolver=lambda host, port: ["8.8.8.8", address])
    assert check_endpoint("https://bucket.example.com", [], resolver=lambda host, port: ["8.8.8.8"])


def test_loopback_is_refused_over_the_api_without_the_allowance(client: Any, alice: Any, bucket: Bucket,
                                                                settings: Any) -> None:
    settings.bucket_allowed_networks = ""
    for path, body in (("/api/integrations/buckets", {"provider": "s3", "targets": ["photos"],
                                                      "credentials": bucket.credentials()}),
                       ("/api/integrations/buckets/discover", {"provider": "s3",
                                                               "credentials": bucket.credentials()})):
        answer = client.post(path, headers=alice.headers, json=body)
        assert answer.status_code == 400 and answer.json()["code"] == "endpoint_refused", answer.text
    for endpoint in ("http://169.254.169.254", "http://10.0.0.1:9000"):
        answer = client.post("/api/integrations/buckets/discover", headers=alice.headers, json={
            "provider": "s3", "credentials": {"accessKeyId": "a", "secretAccessKey": "b", "endpoint": endpoint}})
        assert answer.status_code == 400 and answer.json()["code"] == "endpoint_refused"


def test_a_name_that_rebinds_to_loopback_after_the_check_is_refused_at_connect(settings: Any, bucket: Bucket,
                                                                                alice: Any, app: Any) -> None:
    """The check at create time saw a public address; by the time of the request the name says 127.0.0.1. The
    guard resolves again for the connection and connects only to the address it checked: refused."""
    settings.bucket_allowed_networks = ""
    port = bucket.endpoint.rsplit(":", 1)[1]
    answers = iter([["93.184.216.34"]])
    stores.set_resolver(settings, lambda host, p: next(answers, ["127.0.0.1"]))
    name = f"http://bucket.rebind.test:{port}"
    secret, endpoint, region = service._split(settings, "s3", {"accessKeyId": KEY_ID, "secretAccessKey": SECRET,
                                                               "endpoint": name})
    assert endpoint == name  # the check passed on the first answer
    with pytest.raises(Exception) as refused:
        service._verify(settings, "s3", secret, "photos", endpoint, region)
    assert getattr(refused.value, "code", "") == "endpoint_refused"
    assert any("127.0.0.1" in line for line in stores.guard_for(settings).refusals)


def test_an_allowed_name_is_connected_at_the_address_it_resolved_to(settings: Any, bucket: Bucket, alice: Any,
                                                                   client: Any) -> None:
    """A name the system resolver does not know (a bare host name, which moto reads as path-style) reaches moto:
    the guard connected to the address it checked."""
    port = bucket.endpoint.rsplit(":", 1)[1]
    stores.set_resolver(settings, lambda host, p: ["127.0.0.1"] if host == "bucketbox" else [])
    put(bucket, "a.jpg")
    created = client.post("/api/integrations/buckets", headers=alice.headers, json={
        "provider": "s3", "targets": ["photos"],
        "credentials": {"accessKeyId": KEY_ID, "secretAccessKey": SECRET, "endpoint": f"http://bucketbox:{port}"}})
    assert created.status_code == 201, created.text
    entries = client.get(f"/api/integrations/buckets/{created.json()['id']}/objects", params={"target": "photos"},
                         headers=alice.headers).json()["entries"]
    assert [e["key"] for e in entries] == ["a.jpg"]


@pytest.mark.parametrize("endpoint", ["http://169.254.169.254", "http://10.0.0.1:9000", "https://127.0.0.1:1"])
def test_the_guard_refuses_at_connect_even_past_the_first_check(settings: Any, endpoint: str) -> None:
    """A store built straight from a row (as an import does, long after the create-time check): the proxy
    refuses the connection itself, so no request ever leaves for the address."""
    settings.bucket_allowed_networks = ""
    guard = stores.guard_for(settings)
    before = len(guard.refusals)
    with pytest.raises(Exception) as refused:
        service._verify(settings, "s3", {"accessKeyId": KEY_ID, "secretAccessKey": SECRET}, "photos", endpoint,
                        None)
    assert getattr(refused.value, "code", "") == "endpoint_refused" and SECRET not in str(refused.value)
    assert len(guard.refusals) > before
