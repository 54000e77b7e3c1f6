"""Bucket import in place against the upload import (issue 30): the same synthetic YOLO dataset imported from a
moto S3 bucket (through the endpoint guard, thumbnails stored, pixels left in the bucket) and from a zip upload
(``ingest_path``, every image stored), each into a fresh LANNER_HOME on this machine, then the export the trainer
reads (NDJSON with presigned URLs) built once.

    .venv/bin/python benchmarks/bucket_import.py [--images 2000] [--size 160] [--no-doc]

moto answers from this machine, so the bucket side measures Lanner's work plus a local S3 server, not a network.
Rewrites the "## Bucket import in place (issue 30)" section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from pathlib import Path

import boto3
from common import cpu_model, write_section
from cryptography.fernet import Fernet
from moto.server import ThreadedMotoServer

from lanner.accounts import service as accounts_service
from lanner.accounts.principal import Principal
from lanner.config import Settings
from lanner.context import AppContext
from lanner.datasets import archives
from lanner.datasets import service as datasets_service
from lanner.datasets.imports.ingest import ingest_path
from lanner.datasets.models import Dataset
from lanner.db.migrate import upgrade_database
from lanner.integrations import jobs, pixels
from lanner.integrations import service as integrations
from lanner.integrations.importer import Import
from lanner.integrations.models import BucketImport
from lanner.synthetic import make_detection_dataset

TITLE = "## Bucket import in place (issue 30)"


def fresh(home: Path) -> tuple[AppContext, Principal]:
    settings = Settings(home=home, secrets_key=Fernet.generate_key().decode(), bucket_allowed_networks="127.0.0.0/8")
    ctx = AppContext.from_settings(settings)
    upgrade_database(ctx.db.url)
    with ctx.db.session() as session:
        user = accounts_service.create_user(session, username="bench")
        principal = Principal.of(user)
    return ctx, principal


def new_dataset(ctx: AppContext, principal: Principal, slug: str) -> str:
    with ctx.db.session() as session:
        return datasets_service.create_dataset(session, principal, name=slug).id


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--size", type=int, default=160)
    parser.add_argument("--no-doc", action="store_true")
    args = parser.parse_args()
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    work = Path(tempfile.mkdtemp(prefix="bucket-bench-"))
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        folder = work / "shapes"
        make_detection_dataset(folder, train=args.images * 4 // 5, val=args.images // 5, size=args.size)
        s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="k", aws_secret_access_key="s",
                          region_name="us-east-1")
        s3.create_bucket(Bucket="photos")
        files = [p for p in folder.rglob("*") if p.is_file()]
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda p: s3.put_object(Bucket="photos", Key="shapes/" + p.relative_to(folder).as_posix(),
                                                  Body=p.read_bytes()), files))
        archive = Path(shutil.make_archive(str(work / "shapes"), "zip", folder))

        ctx, principal = fresh(work / "bucket-home")
        dataset_id = new_dataset(ctx, principal, "in-place")
        with ctx.db.session() as session:
            row = integrations.create(session, ctx.settings, principal, provider="s3", targets=["photos"],
                                      credentials={"accessKeyId": "k", "secretAccessKey": "s", "endpoint": endpoint})
            dataset = session.get(Dataset, dataset_id)
            job_id = jobs.start(session, principal, dataset, row, target="photos", prefix="shapes").id
        started = time.perf_counter()
        Import(ctx.db, ctx.blobs, ctx.settings, job_id).run()
        bucket_seconds = time.perf_counter() - started
        with ctx.db.session() as session:
            job = session.get(BucketImport, job_id)
            assert job.status == "succeeded", job.error
            dataset = session.get(Dataset, dataset_id)
            started = time.perf_counter()
            archives.build_export(session, dataset, blobs=ctx.blobs, signer=ctx.signer, settings=ctx.settings,
                                  image_url=pixels.export_urls(session, ctx.settings, dataset))
            export_seconds = time.perf_counter() - started
        bucket_bytes = sum(p.stat().st_size for p in (work / "bucket-home" / "blobs").rglob("*") if p.is_file())

        ctx2, principal2 = fresh(work / "upload-home")
        upload_id = new_dataset(ctx2, principal2, "uploaded")
        started = time.perf_counter()
        with ctx2.db.session() as session:
            ingest_path(session, blobs=ctx2.blobs, settings=ctx2.settings, dataset_id=upload_id, source=archive,
                        queued=False)
        upload_seconds = time.perf_counter() - started
        upload_bytes = sum(p.stat().st_size for p in (work / "upload-home" / "blobs").rglob("*") if p.is_file())
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)

    n = args.images
    bucket_row = f"{bucket_seconds:.1f} | {n / bucket_seconds:.0f} | {bucket_bytes:,}"
    upload_row = f"{upload_seconds:.1f} | {n / upload_seconds:.0f} | {upload_bytes:,}"
    section = f"""{TITLE}

`benchmarks/bucket_import.py --images {n} --size {args.size}`, {date.today().isoformat()}, {cpu_model()} (2 cores,
shared with other work): {n} synthetic {args.size}x{args.size} JPEGs with YOLO labels, moto S3 on 127.0.0.1 (no
network), each import into a fresh LANNER_HOME.

| import | seconds | images/s | bytes Lanner stored |
|---|---|---|---|
| bucket, in place (each object read once via the guard; thumbnails stored) | {bucket_row} |
| zip upload (`ingest_path`, every image stored) | {upload_row} |

The NDJSON export the trainer reads, for the bucket dataset (ETags compared by listing, {n} presigned URLs):
{export_seconds:.2f} s.
"""
    print(section)
    if not args.no_doc:
        write_section(TITLE, section)


if __name__ == "__main__":
    main()
