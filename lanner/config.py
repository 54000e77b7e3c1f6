"""Process-wide settings, read from the environment (``LANNER_*``) and CLI flags."""

from __future__ import annotations

import ipaddress
import os
import secrets
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


def _items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


class Settings(BaseSettings):
    """Server settings. Every field is documented in README.md (a test checks it)."""

    model_config = SettingsConfigDict(env_prefix="LANNER_", extra="ignore")

    home: Path = Field(default=Path(".lanner"), description="Data folder: database, blobs, secrets.")
    database_url: str | None = Field(
        default=None, description="SQLAlchemy URL; default SQLite (WAL) under LANNER_HOME."
    )
    public_url: str = Field(
        default="http://127.0.0.1:8000", description="Base URL handed out in signed links and modelUrl, and the "
        "one trainers and export workers report to. With several server processes or hosts, every one must have the "
        "same (the load balancer's): a worker outlives the process that launched it and reports to whichever serves "
        "this URL."
    )
    secret_key: str | None = Field(
        default=None, description="HMAC key for signed URLs; generated under LANNER_HOME if unset."
    )
    signed_url_ttl_seconds: int = Field(default=3600, description="Lifetime of signed upload/download links.")
    signups: bool = Field(default=False, description="Whether a person without an account may create one (username "
                          "and password) from a team invitation link, joining the team at once. Off: the link says "
                          "to ask the operator for an account (`lanner users create`).")
    api_key_cache_seconds: float = Field(
        default=5.0, description="How long a verified API key is trusted without a database lookup."
    )

    # Rate limits: strings in the `limits` library's notation ("100/minute", "5 per 10 seconds"); "" or "0"
    # turns one off. Counted in a moving window.
    redis_url: str | None = Field(
        default=None, description="Redis shared by every API process (`redis://host:6379/0`): rate-limit "
        "counters live there unless LANNER_RATE_LIMIT_STORAGE names another storage. Unset: each process counts "
        "on its own, and `lanner serve --workers N` (N > 1) warns that limits are per process.")
    rate_limit_storage: str = Field(
        default="", description="Where rate-limit counters live: a `limits` storage URI. Empty: LANNER_REDIS_URL "
        "when set, else memory:// (counted in each process, so each `serve --workers` process and each host "
        "allows the whole limit). While a shared storage cannot be reached, each process counts on its own and "
        "logs a warning (retrying the storage every 5 s): never refused for the outage, never unlimited.")
    trusted_proxies: str = Field(
        default="", description="Addresses and CIDR networks of the reverse proxies (load balancers) in front "
        "of the server, comma-separated (`10.0.0.0/8, 192.168.1.5`). Only from these is X-Forwarded-For believed "
        "(its right-most address not in the list is the client, the one that rate limits count); empty: the "
        "connecting address is the client, whatever the headers say.")
    auth_failure_limit_per_ip: str = Field(
        default="10/minute", description="Wrong API keys answered 401 per client address; past it a wrong key is "
        "answered 429 with Retry-After. A valid key (or web session) from that address is always served.")
    login_limit_per_username_and_address: str = Field(
        default="5/minute", description="Sign-in attempts (and current-password checks) allowed per username from "
        "one client address, counted before the password is hashed; then 429 without hashing. Other accounts "
        "behind the same address are not affected.")
    login_limit_per_username: str = Field(
        default="20/minute", description="Sign-in attempts allowed per username from all addresses together (a "
        "guesser spread over many addresses); then 429 without hashing, right password or not. Sessions and "
        "API keys of the account keep working.")
    api_rate_limit: str = Field(
        default="100/minute", description="Requests per API key (per user for a web session), the hosted "
        "platform's default.")
    worker_rate_limit: str = Field(
        default="6000/minute", description="Requests per key for training workers: run-scoped keys and the "
        "trainer's webhooks (/api/webhooks/...), instead of LANNER_API_RATE_LIMIT. The trainer sends an epoch "
        "once: a refused report is a lost one, so a sweep of runs reporting on one key must never meet it.")
    inference_rate_limit: str = Field(
        default="20/minute", description="Requests per key to shared inference (paths under "
        "LANNER_INFERENCE_PATHS), instead of LANNER_API_RATE_LIMIT.")
    inference_paths: str = Field(
        default=r"^/api/(models/[^/]+/[^/]+/[^/]+|images/[^/]+)/predict$", description="Regular expression of "
        "the shared-inference paths that LANNER_INFERENCE_RATE_LIMIT applies to (models.predict, images.predict).")

    import_max_bytes: int = Field(default=50 * 1024**3, description="Largest total unpacked size of one upload.")
    import_max_files: int = Field(default=1_000_000, description="Most files in one uploaded archive.")
    import_max_ratio: float = Field(default=200.0, description="Highest compression ratio an archive may have.")
    import_max_file_bytes: int = Field(default=2 * 1024**3, description="Largest single file inside an upload.")
    max_upload_bytes: int = Field(default=100 * 1024**3, description="Largest file accepted on a signed upload URL "
                                  "(an upload that declares its size, as the SDK does, may not send more).")
    upload_url_ttl_seconds: int = Field(default=12 * 3600, description="Lifetime of an upload URL (the hosted "
                                        "platform's 12 h); an upload not finished by then is expired and its "
                                        "file collected.")
    import_workers: int = Field(default=2, description="Imports run at once by this server, each in its own "
                                "worker process.")
    import_processes: int = Field(default=0, ge=0, description="Processes that probe one import's images (hash, "
                                  "decode, thumbnail), each on its own core (0: one per CPU this process may use; "
                                  "1: the import's own process does it). Small imports (under 500 images, from an "
                                  "archive under 16 MiB) never start them.")
    import_max_per_user: int = Field(default=1, description="Imports of one user run at once (0: no cap); the "
                                     "rest wait, so one user's uploads never hold up another's.")
    import_memory_bytes: int = Field(default=4 * 1024**3, description="Address space one import worker may use "
                                     "(0: unlimited); an upload that needs more fails with that reason.")
    import_timeout_seconds: float = Field(default=6 * 3600.0, description="An import running longer is stopped "
                                          "and failed (0: never).")
    import_poll_seconds: float = Field(default=1.0, gt=0, description="How often the import queue looks for work (a "
                                       "new upload wakes it at once); it looks for imports whose server died "
                                       "when it starts and every 30 s of these passes.")
    upload_settle_seconds: float = Field(default=5.0, ge=0, description="How often files PUT straight into a "
                                         "bucket (LANNER_BLOB_STORE=s3) and completed are hashed and filed by "
                                         "digest, when no completion woke the loop first (0: never; an import "
                                         "still settles the file it reads).")
    blob_grace_seconds: float = Field(default=3600.0, description="A blob, half-written upload or scratch folder "
                                      "nothing refers to is deleted once nobody wrote it for this long.")
    max_body_bytes: int = Field(default=32 * 1024**2, description="Largest request body (JSON) any other route "
                                "accepts; larger is a 413. The trainer's training_complete of a 1000-class model "
                                "is about 13 MB.")
    # Shared inference (lanner.inference): models.predict and images.predict.
    inference_max_bytes: int = Field(
        default=10 * 1024**2, ge=1, description="Largest request body a shared-inference route accepts (the image "
        "and the form fields); larger is a 413 before it is read.")
    inference_max_pixels: int = Field(
        default=50_000_000, ge=1, description="Largest image (width x height, read from its header before "
        "decoding) shared inference decodes: the decompression-bomb guard.")
    inference_cache_bytes: int = Field(
        default=1024**3, ge=0, description="Memory budget of the models loaded for shared inference (their "
        "parameters and buffers); the least recently used are unloaded to stay under it.")
    inference_batch_window_ms: float = Field(
        default=5.0, ge=0, description="How long a request waits for others to the same model and image size "
        "before their batch runs, once requests have been arriving together (0: only what already waits).")
    inference_max_batch: int = Field(
        default=16, ge=1, description="Most images in one inference batch (1 turns dynamic batching off).")
    inference_cpu_batch_pixels: int = Field(
        default=8 * 640 * 640, ge=0, description="Most input pixels (batch x imgsz^2) in one inference batch on a "
        "CPU, where a larger batch outgrows the caches and runs slower per image (0: only "
        "LANNER_INFERENCE_MAX_BATCH caps it).")
    inference_threads: int = Field(
        default=0, ge=0, description="Torch threads for inference (0: one per CPU this process may use).")
    inference_workers: int = Field(
        default=1, ge=1, description="Inference batches run at once, each on its own thread (several models on "
        "one GPU host).")
    gpu_catalogue: str | None = Field(
        default=None, description="GPU catalogue overrides (prices, tiers, offered types, host vCPUs/RAM, "
        "calibration files): path to a JSON/YAML file, or inline JSON.")

    official_models_dir: Path | None = Field(
        default=None, description="Folder of official Ultralytics weights (yolo11n.pt, yolo26s-seg.pt, ...) served "
        "as ul://ultralytics/<family>/<name>: registered at `lanner serve` and on every maintenance pass when "
        "new or changed. Nothing is downloaded.")

    executor: str = Field(default="local", description="Where training runs: 'local' (subprocesses on this "
                          "machine) or 'ray' (Ray Jobs on a cluster).")
    ray_address: str | None = Field(default=None, description="Ray Jobs address for LANNER_EXECUTOR=ray, e.g. "
                                    "http://127.0.0.1:8265.")
    ray_num_gpus: float = Field(default=1.0, description="GPUs a Ray job asks for next to its lanner-gpu:<type> "
                                "resource (0 for nodes that only advertise types).")
    ray_worker_dir: str = Field(default="~/.lanner-worker/runs", description="Run folders on Ray worker nodes.")
    pools: str | None = Field(default=None, description="Node pools Ray's autoscaler brings up on demand (path to a "
                              "YAML/JSON file, see docs/deploy-gpus.md): GPU type, GPUs per node, most nodes, "
                              "cost per node-hour, start and idle timeouts. `lanner pools check` validates it.")
    local_max_runs: int = Field(default=1, description="Concurrent CPU runs of the local executor (each GPU "
                                "takes one run); the rest queue as pending.")
    prepare_estimates: bool = Field(default=True, description="`lanner serve` makes the default model's first "
                                    "estimate in the background at start, so the first training.start or estimate "
                                    "request does not pay for profiling it (false: the first request does).")
    lease_seconds: float = Field(default=15.0, gt=0, description="With several server processes on one "
                                 "database, each background loop runs in the one holding its lease; a process "
                                 "killed outright is taken over once its leases expire, after this long (and at "
                                 "most a third more), or at once by a process on its machine (a restarted "
                                 "server); a stopping one hands them over at once.")
    supervisor_interval_seconds: float = Field(default=2.0, description="How often runs are dispatched, polled, "
                                               "metered and settled.")
    meter_interval_seconds: float = Field(default=30.0, description="How often a running run's charges are "
                                          "written to the ledger (settlement is exact either way).")
    run_lost_after_seconds: float = Field(default=600.0, description="A running run with no event for this long "
                                          "is lost and relaunched.")
    checkpoint_upload_seconds: float = Field(default=600.0, description="How often a worker uploads its "
                                             "last.pt as the run's resume checkpoint (for relaunch on another node).")
    checkpoint_grace_seconds: float = Field(default=600.0, description="A superseded checkpoint upload (an "
                                            "older resume checkpoint, or any upload of a settled run) is deleted "
                                            "this long after it was superseded, its blob once nothing refers to it.")
    maintenance_interval_seconds: float = Field(default=60.0, description="How often superseded checkpoints "
                                                "and unreferenced blobs are collected, datasets past their "
                                                "days in the trash are purged and expired web sessions deleted "
                                                "(0: never).")
    run_max_relaunches: int = Field(default=3, description="Relaunches of a lost run before it fails.")
    cancel_grace_seconds: float = Field(default=20.0, description="Time a cancelled trainer gets to stop by itself "
                                        "before its process or Ray job is killed.")
    export_workers: int = Field(default=1, description="Exports the local executor runs at once on the CPU (each "
                                "GPU takes one); the rest wait as queued.")
    export_timeout_seconds: float = Field(default=3600.0, description="An export running longer is stopped and "
                                          "failed (0: never).")
    export_poll_seconds: float = Field(default=1.0, description="How often the export queue launches queued "
                                       "exports and polls running ones (a new export wakes it at once; 0: off).")
    autolabel_poll_seconds: float = Field(default=1.0, ge=0, description="How often the auto-annotation queue "
                                          "launches queued runs and polls running ones (a new run wakes it at once; "
                                          "0: off).")
    autolabel_price_per_image: float = Field(default=0.0, ge=0, description="USD charged per image an "
                                             "auto-annotation or face-blur run processes (0: free).")
    autolabel_chunk_images: int = Field(default=16, ge=1, le=500, description="Images an auto-annotation worker "
                                        "labels before it hands their labels to the server (what a crash redoes).")
    face_cascade: Path | None = Field(default=None, description="A Haar cascade XML that finds the faces "
                                      "face-blur runs blur, readable where the workers run (default: the "
                                      "frontal-face cascade bundled with OpenCV 4; Lanner downloads none).")
    embedding_poll_seconds: float = Field(default=1.0, ge=0, description="How often the embedding queue "
                                          "launches queued embedding jobs and polls running ones (a new job wakes "
                                          "it at once; 0: off).")
    review_poll_seconds: float = Field(default=1.0, ge=0, description="How often the review scores queue "
                                       "launches queued scores jobs and polls running ones (a new job wakes it at "
                                       "once; 0: off).")
    embedding_workers: int = Field(default=1, ge=1, description="Embedding jobs the local executor runs at once; "
                                   "the rest wait as queued.")
    embedding_imgsz: int = Field(default=224, ge=0, description="The side, in pixels, images are resized to for "
                                 "their embedding (0: the model's training size). A whole-image descriptor needs "
                                 "no fine detail, and on CPUs the cost grows with the square of the side.")
    embedding_map_inline_images: int = Field(default=2000, ge=0, description="Datasets with at most this many "
                                             "embedded images get their map computed inside the first "
                                             "`datasets.clustering` request that finds none (a few seconds); "
                                             "larger ones by the embedding queue, in the background.")
    embedding_index_cache_mb: int = Field(default=2048, ge=64, description="Memory each server process keeps "
                                          "similar-images indexes in (least recently searched dropped first): "
                                          "a 100,000 x 512 HNSW index takes about 230 MB, a 10,000-image one 20 MB; "
                                          "an index that is not kept is read from its file by the next query.")
    embedding_batch: int = Field(default=32, ge=1, le=1024, description="Images the embedding worker fetches, "
                                 "embeds and delivers at a time: a crashed job resumes after its last page.")
    embedding_head_min_images: int = Field(default=200, ge=2, description="The fewest images a dataset needs for "
                                           "its first analysis with a model to also train that model's "
                                           "copy-detection head (edited copies of up to 2,000 of its images, "
                                           "16,000 more embeddings, once per model), which similar images and "
                                           "near-duplicates then search with.")
    assistant_poll_seconds: float = Field(
        default=5.0, ge=0, description="How often datasets' labelling assistants look for new labels to train a "
        "round on, watch the round that trains and score the unlabelled images with its model (0: never).")
    # Dedicated endpoints (lanner.deployments): deployments.*.
    deploy_regions: str = Field(
        default="", description="The SDK regions endpoints may be created in, and where each runs: empty for all "
        "42 on this server's executor (LANNER_EXECUTOR); a comma list of region ids (the others are refused); or "
        "JSON mapping each offered region to 'local' (a process on this server) or 'ray' (Ray Serve).")
    endpoint_price_per_vcpu_hour: float = Field(
        default=0.0, ge=0, allow_inf_nan=False, description="Dollars per vCPU-hour an endpoint instance is "
        "billed, per second while it runs (0: free; a stopped endpoint costs nothing).")
    endpoint_price_per_gib_hour: float = Field(
        default=0.0, ge=0, allow_inf_nan=False, description="Dollars per GiB-hour of an endpoint instance's "
        "memory, billed with its vCPUs.")
    endpoint_ports: str = Field(
        default="18000-18999", description="Ports (FIRST-LAST) a local endpoint's serving process listens on, "
        "on 127.0.0.1; the server forwards to it.")
    endpoint_poll_seconds: float = Field(
        default=1.0, ge=0, description="How often endpoints are launched, health-checked, restarted, stopped and "
        "metered (0: never).")
    endpoint_start_timeout_seconds: float = Field(
        default=300.0, gt=0, description="A serving process not ready this long after its launch is stopped and "
        "counts as a crash.")
    endpoint_max_restarts: int = Field(
        default=5, ge=0, description="Crashes in a row (without a minute of being ready in between) after which "
        "an endpoint fails instead of being restarted (backoff 1, 2, 4... s, at most 60 s).")
    endpoint_log_retention_days: float = Field(
        default=30.0, gt=0, description="How long an endpoint's request log and metrics samples are kept.")
    endpoint_paths: str = Field(
        default=r"^/api/deployments/[^/]+/[^/]+/predict$", description="Regular expression of the dedicated "
        "endpoint paths that spend no request budget (the hosted 'no rate limits'); the owner's key is still "
        "required.")
    ray_serve_url: str | None = Field(
        default=None, description="Where Ray Serve's HTTP proxy answers for endpoints in 'ray' regions (default: "
        "the host of LANNER_RAY_ADDRESS, port 8000); Serve is started listening there.")
    worker_python: str | None = Field(default=None, description="Python with Lanner installed on worker nodes "
                                      "(default: the server's own interpreter).")

    @field_validator("trusted_proxies")
    @classmethod
    def _check_trusted_proxies(cls, value: str) -> str:
        """A typo stops the server at start: uvicorn's parser would keep it as a name that no address matches."""
        for item in _items(value):
            try:
                ipaddress.ip_network(item, strict=False)
            except ValueError:
                raise ValueError(f"LANNER_TRUSTED_PROXIES: {item!r} is not an address or a CIDR network") from None
        return value

    @property
    def trusted_proxy_list(self) -> list[str]:
        return _items(self.trusted_proxies)

    @property
    def resolved_rate_limit_storage(self) -> str:
        return self.rate_limit_storage.strip() or self.redis_url or "memory://"
    # Object storage (docs/deploy.md): blobs in an S3-compatible bucket instead of LANNER_HOME, so several API
    # hosts need no shared disk; clients and workers then fetch and send bytes by presigned bucket URLs.
    blob_store: Literal["local", "s3"] = Field(default="local", description="Where blobs live: 'local' (files "
                                                "under LANNER_HOME/blobs) or 's3' (the bucket LANNER_S3_BUCKET).")
    s3_bucket: str | None = Field(default=None, description="Bucket for LANNER_BLOB_STORE=s3.")
    s3_endpoint: str | None = Field(default=None, description="S3 endpoint URL for MinIO, R2, GCS's S3 interface "
                                    "or a test server (default: AWS for LANNER_S3_REGION).")
    s3_region: str = Field(default="us-east-1", description="The bucket's region (signing needs it).")
    s3_access_key_id: str | None = Field(default=None, description="S3 access key (default: the AWS_* "
                                         "environment, instance metadata).")
    s3_secret_access_key: str | None = Field(default=None, description="S3 secret key, with LANNER_S3_ACCESS_KEY_ID.")
    s3_prefix: str = Field(default="lanner/", description="Key prefix of everything Lanner writes in the bucket "
                           "(blobs/ and staging/ under it).")
    s3_path_style: bool = Field(default=False, description="Path-style URLs (endpoint/bucket/key), as MinIO and "
                                "most self-hosted S3 servers want; off: bucket.endpoint/key.")
    s3_allow_http: bool = Field(default=False, description="Allow a plain-http LANNER_S3_ENDPOINT (a local MinIO "
                                "or test server); presigned URLs then travel unencrypted.")
    secrets_key: str | None = Field(
        default=None, description="Key that encrypts stored bucket credentials (Fernet, 32 url-safe base64 bytes: "
        "`python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'`). Without "
        "it, storage integrations cannot be created. Keep it outside LANNER_HOME: a copy of the database alone "
        "then holds no usable credential. Several keys, comma-separated: the first encrypts, all decrypt.")
    bucket_allowed_networks: str = Field(
        default="", description="Comma-separated networks (CIDR) that bucket endpoints may reach although they "
        "are private, loopback or link-local (a MinIO on the LAN: `10.0.5.0/24`). Empty: only public addresses.")
    bucket_timeout_seconds: float = Field(
        default=30.0, description="Cap on one request to a user's bucket (connect 5 s within it).")
    bucket_max_object_bytes: int = Field(
        default=200_000_000, description="Largest bucket object Lanner reads (images and label files).")
    bucket_max_objects: int = Field(
        default=50_000, description="Most objects one bucket import indexes (the hosted platform's limit).")

    @property
    def resolved_home(self) -> Path:
        return self.home.expanduser().resolve()

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.resolved_home / 'lanner.db'}"

    @property
    def blob_root(self) -> Path:
        return self.resolved_home / "blobs"

    def load_secret_key(self) -> bytes:
        """``LANNER_SECRET_KEY``, else the key kept in ``LANNER_HOME/secret.key``, made once on first start (by
        ``AppContext.from_settings``, the only caller): every process of one server signs with the same key."""
        if self.secret_key:
            return self.secret_key.encode()
        path = self.resolved_home / "secret.key"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # two workers starting: one wins
            except FileExistsError:
                pass
            else:
                with os.fdopen(fd, "w") as out:
                    out.write(secrets.token_hex(32))
        return path.read_text().strip().encode()


@lru_cache
def get_settings() -> Settings:
    return Settings()
