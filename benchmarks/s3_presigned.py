"""Blobs in a bucket (issue 30): what Lanner's presigned flow costs over talking to the bucket directly.

    .venv/bin/python benchmarks/s3_presigned.py                 # prints the results
    .venv/bin/python benchmarks/s3_presigned.py --write-doc     # and replaces the docs/benchmarks.md section

One moto S3 server and one ``lanner serve`` with ``LANNER_BLOB_STORE=s3`` on it, one throw-away LANNER_HOME.
One sequential client with one keep-alive connection pool, as the SDK and the trainer fetch files:

- PUT, Lanner's flow: ``upload.signed_url`` -> PUT the file to the presigned bucket URL -> ``upload.complete``
  (which reads the object back and hashes it: the server never takes the client's word). Direct: PUT the same
  number of new files of the same size to presigned URLs signed here (no Lanner). The PUTs alone of Lanner's flow
  are shown too (``transfer only``).
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

    def direct() -> float:
        start = time.perf_counter()
        for index, data in enumerate(direct_payloads):
            url = store.presigned_put(f"direct/{time.time_ns()}-{index}", time.time() + 600)
            assert url is not None and http.put(url, content=data).status_code == 200
        return time.perf_counter() - start

    if lanner_first:
        (flow, transfer), plain = lanner(), direct()
    else:
        plain = direct()
        flow, transfer = lanner()
    return {"lanner": files / flow, "transfer": files / transfer, "direct": files / plain}


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
    parser.add_argument("--size", type=int, default=1 << 20, help="bytes per uploaded file")
    parser.add_argument("--side", type=int, default=400, help="side of the noise JPEGs downloaded")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--write-doc", action="store_true")
    args = parser.parse_args()
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
                    puts, gets = [], []
                    for index in range(args.rounds):
                        puts.append(put_round(platform, http, store, args.files, args.size, index % 2 == 0))
                        gets.append(get_round(platform, http, store, args.files, index % 2 == 1))
                        print(f"round {index + 1}: PUT {puts[-1]}, GET {gets[-1]}", flush=True)
            finally:
                server.stop()
    report(args, puts, gets, image_bytes, load_before, os.getloadavg())


def report(args: Any, puts: list[dict[str, float]], gets: list[dict[str, float]], image_bytes: int,
           load_before: tuple[float, ...], load_after: tuple[float, ...]) -> None:
    mib = args.size / 2**20
    rows = []
    for index, (put, get) in enumerate(zip(puts, gets, strict=True)):
        rows.append(f"| {index + 1} | {put['lanner']:.1f} | {put['transfer']:.1f} | {put['direct']:.1f} | "
                    f"{put['lanner'] / put['direct']:.2f} | {put['transfer'] / put['direct']:.2f} | "
                    f"{get['lanner']:.1f} | {get['direct']:.1f} | {get['lanner'] / get['direct']:.2f} |")
    put_ratio = statistics.median(p["lanner"] / p["direct"] for p in puts)
    transfer_ratio = statistics.median(p["transfer"] / p["direct"] for p in puts)
    get_ratio = statistics.median(g["lanner"] / g["direct"] for g in gets)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            check=False).stdout.strip()
    section = f"""{TITLE}

`benchmarks/s3_presigned.py`: a `lanner serve` with `LANNER_BLOB_STORE=s3` on moto's S3 server (both on this
machine), one sequential client (httpx, keep-alive). PUT: {args.files} files of {mib:g} MiB per round through
`upload.signed_url` → presigned PUT → `upload.complete` (which reads the object back from the bucket and hashes it),
against presigned PUTs of as many new files signed locally. GET: {args.files} noise JPEGs of {image_bytes / 1024:.0f}
KiB on average (an imported dataset), links from one `datasets.images` page, against GETs of the same objects by
URLs signed locally. Rates in files/s; rounds alternate which side goes first.

- Machine: {os.cpu_count()} CPUs ({cpu_model()}), {ram_bytes() / 2**30:.1f} GiB RAM
- Date: {datetime.now(UTC).strftime('%a %b %d %H:%M:%S UTC %Y')}; load average before / after: \
{' '.join(f'{v:.2f}' for v in load_before)} / {' '.join(f'{v:.2f}' for v in load_after)}
- moto 5.2.6 (its Python server, in its own process), obstore 0.12.1, Lanner 0.1.0 (commit {commit})
- Command: `.venv/bin/python benchmarks/s3_presigned.py --files {args.files} --size {args.size} --rounds \
{args.rounds}`

{HEADER}
{chr(10).join(rows)}

Medians: PUT flow / direct **{put_ratio:.2f}**, PUT transfer / direct **{transfer_ratio:.2f}**, GET flow / direct
**{get_ratio:.2f}**.

Targets (≥ {TARGET}× direct):

- GET through Lanner's links: {get_ratio:.2f} — {verdict(get_ratio >= TARGET)}
- PUT to Lanner's presigned URL (the bytes' path): {transfer_ratio:.2f} — {verdict(transfer_ratio >= TARGET)}
- PUT with Lanner's whole flow (signed-url, PUT, complete): {put_ratio:.2f} — {verdict(put_ratio >= TARGET)}.
  `upload.complete` reads every byte back from the bucket to hash it (a presigned PUT cannot make the SDK send a
  checksum the bucket would verify), so the flow moves each file twice; with small files the two API calls
  per file add their own round trips.
"""
    print(section)
    if args.write_doc:
        write_section(TITLE, section)


if __name__ == "__main__":
    main()
