"""Blobs in a bucket (issue 30): what Lanner's presigned flow costs over talking to the bucket directly.

    .venv/bin/python benchmarks/s3_presigned.py                 # prints the results
    .venv/bin/python benchmarks/s3_presigned.py --write-doc     # and replaces the docs/benchmarks.md section

One moto S3 server and one ``lanner serve`` with ``LANNER_BLOB_STORE=s3`` on it, one throw-away LANNER_HOME.
One sequential client with one keep-alive connection pool, as the SDK and the trainer fetch files:

- PUT, Lanner's flow: ``upload.signed_url`` -> PUT the file to the presigned bucket URL -> ``upload.complete``
  (which checks the staged object's size with a HEAD; the server's settle loop then reads it back and hashes it,
  off the request path: the server never takes the client's word), for files of each size in ``--sizes``. After
  the flow's side, untimed, the bench waits until every file was settled (the staging prefix is empty) and
  records how long that took, so the settling never runs during the direct side. Direct: PUT the same number of
  new files of the same size to presigned URLs signed here (no Lanner). The PUTs alone of Lanner's flow are
  shown too (``transfer only``).
- GET, Lanner's flow: one ``datasets.images`` page with ``include_image_urls`` for the links, then GET each image
  from the bucket. Direct: GET the same objects by URLs signed here.

Rounds alternate which side goes first. Every process shares the machine (moto is a Python server: it costs CPU).
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from PIL import Image
from ultralytics_platform import Platform

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import cpu_model, ram_bytes, verdict, write_section  # noqa: E402
from lanner.storage.s3 import S3BlobStore  # noqa: E402
from tests.servers import lanner_cli, start_server  # noqa: E402
from tests.storage.moto import CREDENTIALS, moto_server, new_bucket, s3_env  # noqa: E402

TITLE = "## Blobs in a bucket: presigned flow vs direct (issue 30)"
TARGET = 0.9
HEADER = ("| round | PUT Lanner flow | PUT transfer only | PUT direct | flow / direct | transfer / direct "
          "| GET Lanner flow | GET direct | GET flow / direct |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|")


def noise_jpeg(side: int) -> bytes:
    """A JPEG that does not compress (random pixels): about 0.75 bytes per pixel at quality 90."""
    image = Image.frombytes("RGB", (side, side), os.urandom(side * side * 3))
    out = io.BytesIO()
    image.save(out, "JPEG", quality=90)
    return out.getvalue()


def put_round(platform: Platform, http: httpx.Client, store: S3BlobStore, files: int, size: int,
              lanner_first: bool) -> dict[str, float]:
    lanner_payloads = [os.urandom(size) for _ in range(files)]  # fresh bytes: nothing deduplicated
    direct_payloads = [os.urandom(size) for _ in range(files)]

    def lanner() -> tuple[float, float]:
        transfer = 0.0
        start = time.perf_counter()
        for data in lanner_payloads:
            slot = platform.upload.signed_url(body={"assetType": "datasets", "filename": "part.zip",
                                                    "totalBytes": len(data)})
            put_start = time.perf_counter()
            assert http.put(slot["uploadUrl"], content=data).status_code == 200
            transfer += time.perf_counter() - put_start
            platform.upload.complete(session_id=slot["sessionId"])
        return time.perf_counter() - start, transfer

    def settled() -> float:
        """Seconds until the server settled every file of the flow's side (none left under the staging prefix)."""
        start = time.perf_counter()
        while list(store._listing(f"{store.prefix}staging/sessions/")):
            if time.perf_counter() - start > 600:
                raise RuntimeError("the uploads were not settled")
            time.sleep(0.02)
        return time.perf_counter() - start

    def direct() -> float:
        start = time.perf_counter()
        for index, data in enumerate(direct_payloads):
            url = store.presigned_put(f"direct/{time.time_ns()}-{index}", time.time() + 600)
            assert url is not None and http.put(url, content=data).status_code == 200
        return time.perf_counter() - start

    if lanner_first:
        flow, transfer = lanner()
        settle = settled()
        plain = direct()
    else:
        plain = direct()
        flow, transfer = lanner()
        settle = settled()
    return {"lanner": files / flow, "transfer": files / transfer, "direct": files / plain, "settle": settle}


def get_round(platform: Platform, http: httpx.Client, store: S3BlobStore, files: int,
              lanner_first: bool) -> dict[str, float]:
    digests = [image["hash"] for image in platform.datasets.images("bench", "noise", limit=files)["images"]]

    def lanner() -> float:
        start = time.perf_counter()
        images = platform.datasets.images("bench", "noise", limit=files, include_image_urls="true",
                                          include_thumbnails="false")["images"]
        for image in images:
            assert len(http.get(image["imageUrl"]).content) == image["bytes"]
        return time.perf_counter() - start

    def direct() -> float:
        start = time.perf_counter()
        for digest in digests:
            url = store.presigned_get(digest, "x.jpg", 600)
            assert url is not None and http.get(url).status_code == 200
        return time.perf_counter() - start

    if lanner_first:
        flow, plain = lanner(), direct()
    else:
        plain = direct()
        flow = lanner()
    return {"lanner": len(digests) / flow, "direct": len(digests) / plain}


def upload_dataset(platform: Platform, http: httpx.Client, work: Path, files: int, side: int) -> int:
    """A dataset of ``files`` noise JPEGs (no labels), imported through the SDK flow; returns the bytes per image."""
    archive = work / "noise.zip"
    sizes = []
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as out:
        for index in range(files):
            data = noise_jpeg(side)
            sizes.append(len(data))
            out.writestr(f"images/train/img{index:04d}.jpg", data)
        out.writestr("data.yaml", "names:\n  0: thing\ntrain: images/train\n")
    created = platform.datasets.create(dataset="noise", name="noise")
    slot = platform.upload.signed_url(body={"assetType": "datasets", "assetId": created["id"],
                                            "filename": archive.name, "totalBytes": archive.stat().st_size})
    assert http.put(slot["uploadUrl"], content=archive.read_bytes()).status_code == 200
    platform.datasets.ingest("bench", "noise", body={"sessionId": slot["sessionId"]})
    deadline = time.time() + 600
    while time.time() < deadline:
        dataset = platform.datasets.retrieve("bench", "noise")["dataset"]
        if dataset.get("status") != "processing":
            assert dataset["imageCount"] == files, dataset
            return int(statistics.mean(sizes))
        time.sleep(0.5)
    raise RuntimeError("the import did not finish")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=100)
    parser.add_argument("--sizes", default="1048576:100,16777216:16",
                        help="uploaded files per round, as bytes:count pairs (one PUT measurement each)")
    parser.add_argument("--side", type=int, default=400, help="side of the noise JPEGs downloaded")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--write-doc", action="store_true")
    args = parser.parse_args()
    sizes = [(int(size), int(count)) for size, count in (pair.split(":") for pair in args.sizes.split(","))]
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="lanner-s3-bench-") as tmp:
        work = Path(tmp)
        with moto_server(work / "moto.log") as endpoint:
            bucket = new_bucket(endpoint)
            home = work / "home"
            home.mkdir()
            lanner_cli(home, "users", "create", "bench")
            key = lanner_cli(home, "keys", "create", "bench")
            server = start_server(home, **s3_env(endpoint, bucket))
            store = S3BlobStore(bucket=bucket, prefix="lanner/", endpoint=endpoint, path_style=True,
                                allow_http=True, scratch=work / "spool", **CREDENTIALS)
            try:
                with httpx.Client(trust_env=False, timeout=60) as http:
                    platform = Platform(base_url=server.url, api_key=key, timeout=60)
                    image_bytes = upload_dataset(platform, http, work, args.files, args.side)
                    puts: dict[tuple[int, int], list[dict[str, float]]] = {size: [] for size in sizes}
                    gets = []
                    for index in range(args.rounds):
                        for size, count in sizes:
                            puts[(size, count)].append(put_round(platform, http, store, count, size,
                                                                 index % 2 == 0))
                            print(f"round {index + 1}: PUT {size} {puts[(size, count)][-1]}", flush=True)
                        gets.append(get_round(platform, http, store, args.files, index % 2 == 1))
                        print(f"round {index + 1}: GET {gets[-1]}", flush=True)
            finally:
                server.stop()
    report(args, puts, gets, image_bytes, load_before, os.getloadavg())


def report(args: Any, puts: dict[tuple[int, int], list[dict[str, float]]], gets: list[dict[str, float]],
           image_bytes: int, load_before: tuple[float, ...], load_after: tuple[float, ...]) -> None:
    put_rows, ratios = [], {}
    for (size, count), rounds in puts.items():
        for index, put in enumerate(rounds):
            put_rows.append(f"| {size / 2**20:g} MiB × {count} | {index + 1} | {put['lanner']:.1f} | "
                            f"{put['transfer']:.1f} | {put['direct']:.1f} | {put['lanner'] / put['direct']:.2f} | "
                            f"{put['transfer'] / put['direct']:.2f} | {put['settle']:.2f} |")
        ratios[size] = (statistics.median(p["lanner"] / p["direct"] for p in rounds),
                        statistics.median(p["transfer"] / p["direct"] for p in rounds))
    get_rows = [f"| {index + 1} | {get['lanner']:.1f} | {get['direct']:.1f} | {get['lanner'] / get['direct']:.2f} |"
                for index, get in enumerate(gets)]
    get_ratio = statistics.median(g["lanner"] / g["direct"] for g in gets)
    transfer_ratio = min(transfer for _, transfer in ratios.values())
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            check=False).stdout.strip()
    settles = ", ".join(f"{statistics.median(p['settle'] for p in rounds):.2f} s ({size / 2**20:g} MiB files)"
                        for (size, _), rounds in puts.items())
    flows = ", ".join(f"{size / 2**20:g} MiB {flow:.2f}" for size, (flow, _) in ratios.items())
    section = f"""{TITLE}

`benchmarks/s3_presigned.py`: a `lanner serve` with `LANNER_BLOB_STORE=s3` on moto's S3 server (both on this
machine), one sequential client (httpx, keep-alive; the SDK for Lanner's API calls). PUT: per round, files of each
size through `upload.signed_url` → presigned PUT → `upload.complete` (one HEAD of the staged object for its size;
then, off the request path, the server's settle loop snapshots it, reads it back, hashes it, copies it to its
digest's key and deletes the staged object: "settled after" is how long after the side's last `complete` the
last file was settled, untimed, waited for before the other side starts), against presigned PUTs of as many new
files signed locally. GET: {args.files} noise JPEGs of {image_bytes / 1024:.0f} KiB on average (an imported
dataset), their links from one `datasets.images` page, against GETs of the same objects by URLs signed locally.
Rates in files/s; rounds alternate which side goes first.

- Machine: {os.cpu_count()} CPUs ({cpu_model()}), {ram_bytes() / 2**30:.1f} GiB RAM, shared with other work
- Date: {datetime.now(UTC).strftime('%a %b %d %H:%M:%S UTC %Y')}; load average before / after: \
{' '.join(f'{v:.2f}' for v in load_before)} / {' '.join(f'{v:.2f}' for v in load_after)}
- moto 5.2.6 (its Python server, in its own process), obstore 0.12.1, Lanner 0.1.0 (commit {commit})
- Command: `.venv/bin/python benchmarks/s3_presigned.py --files {args.files} --sizes {args.sizes} --rounds \
{args.rounds}`

| PUT files | round | Lanner flow | transfer only | direct | flow / direct | transfer / direct | settled after (s) |
|---|---:|---:|---:|---:|---:|---:|---:|
{chr(10).join(put_rows)}

| GET round | Lanner flow | direct | flow / direct |
|---:|---:|---:|---:|
{chr(10).join(get_rows)}

Targets (≥ {TARGET}× direct, medians):

- GET through Lanner's links (one page of links, then the bucket): {get_ratio:.2f} — {verdict(get_ratio >= TARGET)}
- PUT to Lanner's presigned URL, the bytes' path (worst size): {transfer_ratio:.2f} — \
{verdict(transfer_ratio >= TARGET)}
- PUT with Lanner's whole flow (signed-url, PUT, complete): {flows} — \
{verdict(min(flow for flow, _ in ratios.values()) >= TARGET)}.
  Completing an upload costs one HEAD of the staged object (its size); reading every byte back to hash it (a
  presigned PUT cannot make the SDK send a checksum the bucket would verify, and blobs are named by SHA-256)
  happens after the answer, in the settle loop: every file of a side was settled within
  {settles} of the side's last `complete` (medians): the settle loop starts once completions pause for
  half a second (`lanner.uploads.settle.QUIET_SECONDS`), so it runs after a client's burst of uploads instead of
  beside its next calls and PUTs (moto, a Python server on the same cores, served the settle's copy, GET and
  copy beside the client's PUTs and halved the flow's rate). What remains of the flow's cost is two API calls
  per file (signed-url: one transaction; complete: one HEAD of the staged object, then one transaction), a
  larger share the smaller the file; both are served by direct handlers (`lanner.uploads.router`: one thread
  hop each, no middleware for API clients). Before (commit 6354a3a, completion read every byte back on the
  request path, same command, load 5.6–7.9): 1 MiB 0.22, 16 MiB 0.50.
"""
    print(section)
    if args.write_doc:
        write_section(TITLE, section)


if __name__ == "__main__":
    main()
