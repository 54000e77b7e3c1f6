"""The editor's page in process: the dataset page and an image page link to it, ``/annotate`` opens the first
unlabelled image, the page carries what its scripts need (the API's base, the key, the selection) and loads only
static scripts; anyone but the owner, and any key that is not the dataset's, get the 404 of a missing page."""

from __future__ import annotations

import json

from tests.web.pages import sign_in, soup
from tests.web.test_dataset_pages import add_dataset


def test_the_editor_page_frame_and_who_may_open_it(client, app, alice, bob, tmp_path):  # noqa: F811
    base = add_dataset(app, tmp_path)
    public = add_dataset(app, tmp_path, slug="open", visibility="public")
    sign_in(client, "alice")
    assert soup(client.get(base)).select_one("#annotate-link")["href"] == f"{base}/annotate"
    first = client.get(f"{base}/annotate", follow_redirects=False)
    assert first.status_code == 303 and "/annotate/" in first.headers["location"]
    key = first.headers["location"].rpartition("/")[2]
    images = client.get("/api/datasets/alice/shapes/images?limit=100", headers=alice.headers).json()["images"]
    bare = next(i for i in images if i["name"] == "bare.jpg")  # the one image without labels
    assert bare["id"].endswith("-" + key)
    page = soup(client.get(first.headers["location"]))
    editor = json.loads(page.select_one("#an-editor")["data-editor"])
    assert editor["key"] == key and editor["api"] == "/api/datasets/alice/shapes" and editor["task"] == "detect"
    assert key not in editor["selection"]
    assert not page.select("script:not([src])") and not page.select("[style]")
    assert soup(client.get(f"{base}/images/{bare['id']}")).select_one("#annotate-link")["href"].endswith(key)
    assert client.get(f"{base}/annotate/nope0000").status_code == 404
    assert client.get(f"{base}/annotate/not-a-key").status_code == 404

    sign_in(client, "bob")
    for url in (f"{base}/annotate", f"{base}/annotate/{key}", f"{public}/annotate"):
        assert client.get(url, follow_redirects=False).status_code == 404, url
    assert not soup(client.get(public)).select("#annotate-link")
