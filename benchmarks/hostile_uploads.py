"""Hostile uploads benchmark (issue 14): what one user's bad upload costs everyone else.

    .venv/bin/python benchmarks/hostile_uploads.py [--big-images 1500] [--code-root PATH] [--label after]

Against a real ``lanner serve`` on 127.0.0.1 with a throw-away LANNER_HOME (``--code-root`` runs another
checkout of Lanner, e.g. a ``git worktree`` of an older commit, for a before/after on one machine):

1. YAML alias bomb: alice uploads a 1.5 KB ``data.yaml`` with nine levels of nine aliases (``names: *i``) in a
   small zip and asks for its import. Measured: seconds from the ingest request until the dataset is no longer
   ``processing``, the peak RSS of the server and all its children (psutil, every 50 ms), and the latency of
   ``GET /api/health`` polled every 50 ms meanwhile.
2. Fairness: alice queues a big import (``--big-images``), then bob a 20-image one. Measured: seconds until each
   is ready. Before issue 14 imports ran one at a time for everyone, so bob waited for alice.
3. A small import's latency (20 images, nothing else queued): the cost of a worker process per import.

Prints a table and rewrites the "## Hostile uploads (issue 14)" section of docs/benchmarks.md (``--label``
names the column; run it twice, before and after, to fill both).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

import psutil
from common import Server, cpu_model, free_port, local_client, ram_bytes, venv_bin, write_section

from lanner.synthetic import make_detection_dataset

BOMB = "\n".join(['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
                  *(f"{b}: &{b} [*{a},*{a},*{a},*{a},*{a},*{a},*{a},*{a},*{a}]" for a, b in zip("abcdefgh", "bcdefghi",
                                                                                                strict=True)),
                  "names: *i", "train: images/train", "val: images/train"])
TITLE = "## Hostile uploads (issue 14)"
RESULTS = Path(__file__).with_suffix(".json")


def zip_dataset(root: Path, archive: Path) -> Path:
    with zipfile.ZipFile(archive, "w") as out:
        for path in sorted(root.rglob("*")):
            if path.is_file():
                out.write(path, path.relative_to(root).as_posix())
    return archive


def upload(client: Any, headers: dict[str, str], owner: str, slug: str, archive: Path) -> float:
    """The SDK's flow; returns the moment the import was requested."""
    created = client.post("/api/datasets", headers=headers, json={"name": slug}).json()
    signed = client.post("/api/upload/signed-url", headers=headers, json={
        "assetType": "datasets", "assetId": created["id"], "filename": archive.name,
        "totalBytes": archive.stat().st_size}).json()
    client.put(signed["uploadUrl"], content=archive.read_bytes()).raise_for_status()
    started = time.monotonic()
    client.post(f"/api/datasets/{owner}/{slug}/ingest", headers=headers,
                json={"sessionId": signed["sessionId"]}).raise_for_status()
    return started


def wait_done(client: Any, headers: dict[str, str], owner: str, slug: str, timeout: float = 900) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        dataset = client.get(f"/api/datasets/{owner}/{slug}", headers=headers).json()["dataset"]
        if dataset["status"] != "processing":
            return dataset
        time.sleep(0.05)
    raise RuntimeError(f"{owner}/{slug} still processing after {timeout} s")


class Watch(threading.Thread):
    """Samples the server tree's RSS and /api/health latency until stopped."""

    def __init__(self, server: Server) -> None:
        super().__init__(daemon=True)
        assert server.proc is not None
        self.process = psutil.Process(server.proc.pid)
        self.url = server.url
        self.rss: list[int] = []
        self.health: list[float] = []
        self.halt = threading.Event()

    def run(self) -> None:
        with local_client() as client:
            while not self.halt.is_set():
                try:
                    tree = [self.process, *self.process.children(recursive=True)]
                    self.rss.append(sum(p.memory_info().rss for p in tree if p.is_running()))
                except psutil.Error:
                    pass
                started = time.monotonic()
                client.get(f"{self.url}/api/health")
                self.health.append((time.monotonic() - started) * 1000)
                self.halt.wait(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--big-images", type=int, default=1500)
    parser.add_argument("--code-root", type=Path, default=None, help="another Lanner checkout to run")
    parser.add_argument("--label", default="after")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lanner-hostile-") as tmp:
        work = Path(tmp)
        home = work / "home"
        env = {"PATH": f"{Path(venv_bin('lanner')).parent}:/usr/bin:/bin", "LANNER_HOME": str(home),
               "LANNER_API_RATE_LIMIT": "", "LANNER_AUTH_FAILURE_LIMIT_PER_IP": ""}
        code = (args.code_root or Path(__file__).resolve().parent.parent).resolve()
        lanner = [venv_bin("python"), "-c", f"import runpy, sys; sys.path.insert(0, {str(code)!r}); "
                  "runpy.run_module('lanner.cli', run_name='__main__')"]  # that checkout's code, whatever the cwd

        def cli(*argv: str) -> str:
            return subprocess.run([*lanner, *argv], env=env, capture_output=True, text=True, check=True).stdout.strip()

        keys = {}
        for name in ("alice", "bob"):
            cli("users", "create", name)
            keys[name] = {"Authorization": f"Bearer {cli('keys', 'create', name)}"}
        make_detection_dataset(work / "bomb", train=2, val=1)
        (work / "bomb" / "data.yaml").write_text(BOMB)
        bomb = zip_dataset(work / "bomb", work / "bomb.zip")
        small = zip_dataset(make_detection_dataset(work / "small", train=16, val=4).parent, work / "small.zip")
        big = zip_dataset(make_detection_dataset(work / "big", train=args.big_images, val=0, seed=3).parent,
                          work / "big.zip")
        port = free_port()
        server = Server("lanner", [*lanner, "serve", "--port", str(port)],
                        {**env, "LANNER_PUBLIC_URL": f"http://127.0.0.1:{port}"}, port, work / "server.log")
        server.start()
        try:
            watch = Watch(server)
            watch.start()
            time.sleep(1)
            idle_rss = max(watch.rss)
            with local_client(base_url=server.url) as client:
                started = upload(client, keys["alice"], "alice", "bomb", bomb)
                bombed = wait_done(client, keys["alice"], "alice", "bomb")
                bomb_s = time.monotonic() - started
                watch.halt.set()
                watch.join()
                a = upload(client, keys["alice"], "alice", "big", big)
                b = upload(client, keys["bob"], "bob", "small", small)
                bob_s = wait_done(client, keys["bob"], "bob", "small")["status"], time.monotonic() - b
                alice_s = wait_done(client, keys["alice"], "alice", "big")["status"], time.monotonic() - a
                c = upload(client, keys["bob"], "bob", "again", small)
                small_s = wait_done(client, keys["bob"], "bob", "again")["status"], time.monotonic() - c
        finally:
            server.stop()
    result = {
        "bomb_s": round(bomb_s, 2), "bomb_status": bombed["status"],
        "bomb_message": (bombed.get("processingError") or {}).get("message", "")[:120],
        "idle_rss_mb": round(idle_rss / 2**20), "peak_rss_mb": round(max(watch.rss) / 2**20),
        "health_p50_ms": round(statistics.median(watch.health), 1), "health_max_ms": round(max(watch.health), 1),
        "big_images": args.big_images, "alice_big_s": round(alice_s[1], 1), "bob_small_s": round(bob_s[1], 1),
        "small_alone_s": round(small_s[1], 2), "statuses": [alice_s[0], bob_s[0], small_s[0]],
    }
    print(json.dumps(result, indent=2))
    saved = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    saved[args.label] = result
    RESULTS.write_text(json.dumps(saved, indent=2) + "\n")
    render(saved)


def render(saved: dict[str, dict[str, Any]]) -> None:
    saved = dict(sorted(saved.items(), key=lambda item: item[0] != "before"))
    labels = list(saved)
    rows = [("alias bomb: ingest → not processing (s)", "bomb_s"), ("alias bomb: final status", "bomb_status"),
            ("server + workers RSS idle → peak (MB)", None), ("/api/health p50 during the bomb (ms)", "health_p50_ms"),
            ("/api/health max during the bomb (ms)", "health_max_ms"),
            ("alice's big import ready after (s)", "alice_big_s"), ("bob's 20 images, queued after, ready after (s)",
                                                                    "bob_small_s"),
            ("a 20-image import alone (s)", "small_alone_s")]
    lines = [TITLE, "", f"`benchmarks/hostile_uploads.py`, {time.strftime('%Y-%m-%d')}, {cpu_model()}, "
             f"{ram_bytes() / 2**30:.0f} GiB, {psutil.cpu_count()} cores. Alice's big import: "
             f"{next(iter(saved.values()))['big_images']} images. Before = c1fc64b (imports on one thread of the "
             "server, `yaml.safe_load`), after = this commit (a worker process per import, fair queue, no aliases).",
             "A worker process costs about a second per import (the 20-image import alone); in exchange a bad upload "
             "costs nobody else anything.", "", "| | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    for title, key in rows:
        cells = [f"{r['idle_rss_mb']} → {r['peak_rss_mb']}" if key is None else str(r.get(key)) for r in saved.values()]
        lines.append(f"| {title} | " + " | ".join(cells) + " |")
    write_section(TITLE, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
