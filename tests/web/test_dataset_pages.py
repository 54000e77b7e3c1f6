"""The dataset pages in-process: the list, creating, the grid page by page and filtered, health findings that
link to the grid, an image, clone, versions and their compare, the trash, and who may see and change what."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from lanner.accounts import service as accounts_service
from lanner.accounts.principal import Principal
from lanner.datasets import service as datasets_service
from lanner.datasets.imports.ingest import commit_import, prepare_import
from lanner.synthetic import make_detection_dataset
from lanner.web import dataset_pages
from tests.web.pages import sign_in, soup, text, token_of

TRAIN, VAL = 6, 3  # plus a copy of train_0000 in val (duplicate, leakage) and of train_0001 in train, unlabelled


def add_dataset(app, tmp_path: Path, username: str = "alice", slug: str = "shapes",
                visibility: str = "private", owner: str | None = None) -> str:
    """A small detection dataset imported as an upload would be: ``TRAIN`` + ``VAL`` drawn images, a copy of one
    train image in val, and one image without labels; ``owner``: a team ``username`` edits, else theirs."""
    ctx = app.state.lanner
    root = tmp_path / slug
    make_detection_dataset(root, train=TRAIN, val=VAL, size=64, seed=3)
    shutil.copy(root / "images" / "train" / "train_0000.jpg", root / "images" / "val" / "copy.jpg")
    shutil.copy(root / "labels" / "train" / "train_0000.txt", root / "labels" / "val" / "copy.txt")
    shutil.copy(root / "images" / "train" / "train_0001.jpg", root / "images" / "train" / "bare.jpg")
    with prepare_import(blobs=ctx.blobs, settings=ctx.settings, source=root) as prepared, \
            ctx.db.session() as session:
        principal = Principal.of(accounts_service.require_user(session, username=username))
        dataset = datasets_service.create_dataset(session, principal, name=slug, task="detect",
                                                  visibility=visibility, owner=owner)
        commit_import(session, prepared, dataset=dataset, queued=False)
    return f"/datasets/{owner or username}/{slug}"


def thumbs(page) -> list:
    return page.select("#ds-grid .ds-grid > li")


def grid_count(page) -> int:
    return int(text(page.select_one("#grid-count")).split()[0])


def test_the_list_shows_counts_cover_and_badges(client, app, alice, tmp_path):
    add_dataset(app, tmp_path)
    sign_in(client)
    page = soup(client.get("/datasets"))
    row = page.select_one("#dataset-list li")
    assert "shapes" in text(row) and "detect" in text(row)
    assert f"{TRAIN + VAL + 2} images" in text(row) and "2 classes" in text(row)
    assert row.select_one(".ds-cover img")["src"].startswith("http")
    assert {b.get_text() for b in row.select(".badge")} == {"Private", "ready"}
    assert page.select_one("#ds-drop") is not None and page.select_one("script[src*='dataset-upload.js']")
    assert not page.select("[style]") and not page.select("script:not([src])")


def test_creating_a_dataset_and_its_errors(client, alice):
    token = sign_in(client)
    made = client.post("/datasets", data={"name": "Traffic signs", "task": "detect", "visibility": "private",
                                          "csrf_token": token}, follow_redirects=False)
    assert made.status_code == 303 and made.headers["location"] == "/datasets/alice/traffic-signs"
    assert "Traffic signs" in text(soup(client.get("/datasets/alice/traffic-signs")).select_one("h1"))
    empty = client.post("/datasets", data={"name": " ", "csrf_token": token})
    assert empty.status_code == 422
    assert text(soup(empty).select_one("#field-name-error")) == "Give the dataset a name."
    taken = client.post("/datasets", data={"name": "Traffic signs", "csrf_token": token})
    assert taken.status_code == 422 and "already exists" in text(soup(taken).select_one("#field-name-error"))


def test_the_grid_pages_server_side(client, app, alice, tmp_path, monkeypatch):
    base = add_dataset(app, tmp_path)
    monkeypatch.setattr(dataset_pages, "PER_PAGE", 4)
    sign_in(client)
    first = soup(client.get(base))
    assert len(thumbs(first)) == 4 and grid_count(first) == TRAIN + VAL + 2
    next_link = first.select_one("#ds-grid a[rel=next]")
    assert next_link["href"] == f"{base}?page=2" and next_link["hx-target"] == "#ds-grid"
    last = client.get(f"{base}?page=3", headers={"HX-Request": "true"})
    assert "<html" not in last.text  # htmx gets the grid only
    assert len(thumbs(soup(last))) == (TRAIN + VAL + 2) - 8
    assert soup(last).select_one("a[rel=next]") is None
    filtered = soup(client.get(f"{base}?split=train&labeled=yes"))
    assert filtered.select_one("a[rel=next]")["href"] == f"{base}?split=train&labeled=yes&page=2"
    names = {t.select_one(".caption").get_text(" ", strip=True).split()[0]
             for n in (1, 2, 3) for t in thumbs(soup(client.get(f"{base}?page={n}")))}
    assert len(names) == TRAIN + VAL + 2  # every image once


def test_boxes_are_drawn_on_thumbnails_as_svg(client, app, alice, tmp_path):
    base = add_dataset(app, tmp_path)
    sign_in(client)
    page = soup(client.get(f"{base}?labeled=yes"))
    svg = thumbs(page)[0].select_one("svg")
    assert svg["viewbox"] == "0 0 64 64" and svg.select_one("image")["href"].startswith("http")
    assert svg.select("rect.ds-box") and all(float(r["width"]) > 0 for r in svg.select("rect"))
    assert not page.select("[style]")


def test_filters_by_split_class_labels_and_issue(client, app, alice, tmp_path):
    base = add_dataset(app, tmp_path)
    sign_in(client)
    assert grid_count(soup(client.get(f"{base}?split=val"))) == VAL + 1
    assert grid_count(soup(client.get(f"{base}?labeled=no"))) == 1
    assert grid_count(soup(client.get(f"{base}?labeled=yes"))) == TRAIN + VAL + 1
    circles = soup(client.get(f"{base}?class=0"))
    assert 0 < grid_count(circles) <= TRAIN + VAL + 1
    assert all(t.select("rect.ds-c0") for t in thumbs(circles))
    duplicates = soup(client.get(f"{base}?issue=duplicate", headers={"HX-Request": "true"}))
    assert grid_count(duplicates) == 4  # two pairs
    assert grid_count(soup(client.get(f"{base}?issue=leakage"))) == 2
    assert soup(client.get(f"{base}?issue=duplicate")).select_one("#f-issue option[selected]")["value"] == "duplicate"
    form = soup(client.get(base)).select_one("#ds-filters")
    assert form["method"] == "get" and form["hx-get"] == base and form["hx-target"] == "#ds-grid"
    assert {s["name"] for s in form.select("select")} == {"split", "class", "labeled", "issue", "sort"}


def test_health_findings_link_to_the_filtered_grid(client, app, alice, tmp_path):
    base = add_dataset(app, tmp_path)
    sign_in(client)
    findings = soup(client.get(base)).select("#health-findings a[data-issue]")
    codes = {a["data-issue"]: a for a in findings}
    assert {"duplicate", "leakage", "unlabeled"} <= set(codes)
    for code, link in codes.items():
        assert link["href"] == f"{base}?issue={code}"
        count = int(link.find_next_sibling("span").get_text())
        assert grid_count(soup(client.get(link["href"]))) == count


def test_image_detail_shows_the_image_with_its_labels(client, app, alice, tmp_path):
    base = add_dataset(app, tmp_path)
    sign_in(client)
    href = thumbs(soup(client.get(f"{base}?split=train&labeled=yes")))[0].select_one("a")["href"]
    page = soup(client.get(href))
    assert "train_" in text(page.select_one("h1")) or "bare" in text(page.select_one("h1"))
    header = text(page.select_one(".page-header"))
    assert "train" in header and "64×64 px" in header
    rows = page.select("#label-list tbody tr")
    assert rows and len(page.select("#ds-image rect.ds-box")) == len(rows)
    assert page.select_one("#ds-image image")["href"].startswith("http")
    assert client.get(f"{base}/images/nope-123").status_code == 404


def test_clone_redirects_to_the_clone(client, app, alice, tmp_path):
    base = add_dataset(app, tmp_path)
    sign_in(client)
    token = token_of(client.get(base).text)
    done = client.post(f"{base}/clone", data={"name": "", "csrf_token": token}, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == "/datasets/alice/shapes-clone"
    clone = soup(client.get(done.headers["location"]))
    assert f"{TRAIN + VAL + 2} images" in text(clone.select_one("#ds-counts"))
    assert "Cloned alice/shapes" in text(clone.select_one("#messages"))


def test_versions_are_saved_and_compared(client, app, alice, tmp_path):
    base = add_dataset(app, tmp_path)
    sign_in(client)
    token = token_of(client.get(base).text)
    saved = client.post(f"{base}/versions", data={"description": "first", "csrf_token": token},
                        follow_redirects=False)
    assert saved.status_code == 303
    page = soup(client.get(base))
    assert "Version 1 saved." in text(page.select_one("#messages"))
    assert "v1" in text(page.select_one("#version-list")) and page.select_one("#compare-form")
    again = client.post(f"{base}/versions", data={"csrf_token": token})
    assert "Nothing changed since version 1" in again.text
    image_id = thumbs(soup(client.get(f"{base}?split=val")))[0].select_one("a")["href"].rsplit("/", 1)[1]
    assert client.delete(f"/api/images/{image_id}", headers=alice.headers).status_code == 200
    compare = soup(client.get(f"{base}/compare?base=1&head=0"))
    splits = {text(r.select_one("th")): [text(td) for td in r.select("td")]
              for r in compare.select("#compare-splits tbody tr")}
    assert splits["val"] == [str(VAL + 1), str(VAL), "-1"]
    assert splits["images"][2] == "-1"
    assert splits["labelled images"][2] == "-1" and "labels" in splits  # British spelling, as everywhere
    classes = {text(r.select_one("th")): [int(text(td)) for td in r.select("td")]
               for r in compare.select("#compare-classes tbody tr")}
    assert set(classes) == {"circle", "square"}
    for class_id, name in enumerate(("circle", "square")):
        assert classes[name][1] == grid_count(soup(client.get(f"{base}?class={class_id}")))
        assert classes[name][2] == classes[name][1] - classes[name][0]
    assert "1 removed" in text(compare.select_one("#change-summary"))


def test_export_links_redirect_to_a_signed_download(client, app, alice, tmp_path):
    base = add_dataset(app, tmp_path)
    sign_in(client)
    links = [a["href"] for a in soup(client.get(base)).select("#export-links a")]
    assert links == [f"{base}/export?format={k}" for k in ("ndjson", "yolo", "coco")]
    for link in links:
        answer = client.get(link, follow_redirects=False)
        assert answer.status_code == 303 and "/api/storage/" in answer.headers["location"]


def test_delete_goes_to_the_trash_and_restore_brings_it_back(client, app, alice, tmp_path):
    base = add_dataset(app, tmp_path)
    sign_in(client)
    token = token_of(client.get(base).text)
    gone = client.post(f"{base}/delete", data={"csrf_token": token}, follow_redirects=False)
    assert gone.status_code == 303 and gone.headers["location"] == "/datasets/trash"
    trash = soup(client.get("/datasets/trash"))
    assert "moved to the trash" in text(trash.select_one("#messages"))
    row = trash.select_one("#trash-list tbody tr")
    assert "shapes" in text(row)
    deleted = row.select_one("time")  # a human time, the ISO one for machines
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", text(deleted)) and deleted["datetime"].endswith("Z")
    assert client.get(base).status_code == 404
    assert not soup(client.get("/datasets")).select("#dataset-list li")
    restored = client.post(row.select_one("form")["action"], data={"csrf_token": token}, follow_redirects=False)
    assert restored.status_code == 303
    assert "Dataset restored." in text(soup(client.get("/datasets/trash")).select_one("#messages"))
    assert client.get(base).status_code == 200


def test_another_users_private_dataset_is_not_found(client, app, alice, bob, tmp_path):
    base = add_dataset(app, tmp_path)
    sign_in(client, "bob")
    for path in (base, f"{base}/export?format=ndjson", f"{base}/compare?base=0", f"{base}/import-report"):
        answer = client.get(path, headers={"Accept": "text/html"})
        assert answer.status_code == 404, path
    assert "not found" in text(soup(client.get(base, headers={"Accept": "text/html"})).select_one("main")).lower()
    token = token_of(client.get("/datasets").text)
    assert client.post(f"{base}/clone", data={"csrf_token": token}).status_code == 404
    assert client.post(f"{base}/delete", data={"csrf_token": token}).status_code == 404


def test_a_public_dataset_is_readable_but_read_only(client, app, alice, bob, tmp_path):
    base = add_dataset(app, tmp_path, visibility="public")
    sign_in(client, "bob")
    page = soup(client.get(base))
    assert "Public" in text(page.select_one(".page-header")) and len(thumbs(page)) == TRAIN + VAL + 2
    assert page.select_one("#delete-form") is None and page.select_one("#version-form") is None
    assert page.select_one("#clone-form") is not None  # into bob's own workspace
    token = token_of(client.get(base).text)
    assert client.post(f"{base}/delete", data={"csrf_token": token}).status_code == 403
    assert client.post(f"{base}/versions", data={"csrf_token": token}).status_code == 403
    done = client.post(f"{base}/clone", data={"name": "mine", "csrf_token": token}, follow_redirects=False)
    assert done.headers["location"] == "/datasets/bob/mine"
    href = thumbs(page)[0].select_one("a")["href"]
    assert client.get(href).status_code == 200


def test_the_import_report_lists_what_was_added(client, app, alice, tmp_path):
    base = add_dataset(app, tmp_path)
    sign_in(client)
    report = soup(client.get(f"{base}/import-report"))
    assert text(report.select_one("[data-report=added]")) == str(TRAIN + VAL + 2)
    assert re.search(r"Open the dataset", text(report))


def test_the_import_report_shows_a_failed_import(client, app, alice, tmp_path):
    base = add_dataset(app, tmp_path)
    with app.state.lanner.db.session() as session:
        principal = Principal.of(accounts_service.require_user(session, username="alice"))
        dataset = datasets_service.get_dataset(session, principal, owner="alice", slug="shapes")
        dataset.status = "failed"
        dataset.processing_error = {"message": "no images found in the archive", "timestamp": "2026-12-05T00:00:00Z"}
    sign_in(client)
    report = soup(client.get(f"{base}/import-report"))
    assert "failed" in text(report.select_one("h3"))
    assert text(report.select_one("[role=alert]")) == "no images found in the archive"
    header = text(soup(client.get(base)).select_one(".page-header"))
    assert "Last import failed: no images found in the archive" in header


def test_the_models_trained_on_a_dataset_are_linked_from_its_page(client, app, alice, bob, tmp_path):
    path = add_dataset(app, tmp_path, visibility="public")
    sign_in(client, "alice")
    assert "data=ul://alice/datasets/shapes" in text(soup(client.get(path)).select_one("#trained"))
    client.post("/api/projects", json={"name": "line"}, headers=alice.headers)
    client.post("/api/models", json={"project": "line", "model": "m1", "name": "First try",
                                     "trainArgs": {"data": "ul://alice/datasets/shapes", "epochs": 3}},
                headers=alice.headers).raise_for_status()
    rows = soup(client.get(path)).select("#trained-list tbody tr")
    assert [(a["href"], text(a)) for row in rows for a in row.select("a")] == [
        ("/alice/line/m1", "alice/line/First try")]
    client.cookies.clear()
    sign_in(client, "bob")  # a public dataset: bob reads the page, not alice's private project's model
    assert soup(client.get(path)).select("#trained-list") == []


def test_reading_the_health_report_writes_nothing(client, app, alice, tmp_path):
    """No GET that writes (issue 28): after an edit the stored report is stale, and the dataset page and the
    health endpoint show the fresh one computed, storing nothing; the import queue's pass stores it."""
    from sqlalchemy import event, select

    from lanner.datasets import items
    from lanner.datasets.health.report import refresh_stale
    from lanner.datasets.models import Dataset, DatasetItem

    base = add_dataset(app, tmp_path)
    app.state.imports.stop()  # its pass (every second) would store the report meanwhile: the test runs it by hand
    db = app.state.lanner.db
    with db.session() as session:
        dataset = session.scalar(select(Dataset).where(Dataset.slug == "shapes"))
        item = session.scalar(select(DatasetItem).where(DatasetItem.manifest_id == dataset.manifest_id,
                                                        DatasetItem.name == "train_0002.jpg"))
        items.set_labels(dataset, item, None, by="user:alice")  # a second unlabelled image: the report is stale
    sign_in(client)
    writes: list[str] = []

    def record(_conn, _cursor, statement, *_args) -> None:
        if statement.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE")) and "dataset" in statement:
            writes.append(statement)

    event.listen(db.engine, "before_cursor_execute", record)
    try:
        page = client.get(base)
        report = client.get("/api/datasets/alice/shapes/health", headers=alice.headers)
    finally:
        event.remove(db.engine, "before_cursor_execute", record)
    assert page.status_code == 200, page.text[:500]
    assert report.status_code == 200, report.text[:500]
    assert writes == []
    assert report.json()["issue_counts"]["unlabeled"] == 2
    assert grid_count(soup(client.get(f"{base}?issue=unlabeled"))) == 1  # stored codes: until the pass
    with db.session() as session:
        dataset = session.scalar(select(Dataset).where(Dataset.slug == "shapes"))
        assert dataset.health_revision != dataset.revision and dataset.health["issue_counts"]["unlabeled"] == 1
    assert refresh_stale(db) == 1
    assert refresh_stale(db) == 0
    assert client.get("/api/datasets/alice/shapes/health", headers=alice.headers).json() == report.json()
    assert grid_count(soup(client.get(f"{base}?issue=unlabeled"))) == 2
