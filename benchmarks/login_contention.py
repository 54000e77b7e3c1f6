"""Password guessers against everyone else (issue 14): the median latency of a valid API request while 8
concurrent clients guess a password as fast as the server answers them.

    .venv/bin/python benchmarks/login_contention.py --label after --results /tmp/login.json
    .venv/bin/python benchmarks/login_contention.py --write-doc /tmp/login.json   # docs/benchmarks.md section

Each case starts ``lanner serve`` (from the tree this script is in, default SQLite, throw-away LANNER_HOME) with
one user who has a password and an API key, then measures ``GET /api/account/summary`` with that key, one
request at a time from 127.0.0.2: first alone, then while 8 threads post wrong passwords for that user to
``/api/auth/login`` in a loop without pause (all from 127.0.0.1, as one attacker). Cases:

- ``limits on``: the server's default login limits (the guessers get 429 once they are spent);
- ``limits off``: no login limits (``LANNER_AUTH_FAILURE_LIMIT_PER_IP``, ``LANNER_LOGIN_LIMIT_PER_USERNAME`` and
  ``LANNER_LOGIN_LIMIT_PER_USERNAME_AND_ADDRESS`` empty), so every guess is hashed: what is left is the hashing
  pool's protection alone.

The API budget is turned off (``LANNER_API_RATE_LIMIT=""``) so the measuring client is never refused itself.
A commit without rate limits ignores the settings, so the same script measures "before" on an older checkout.
The guessers, the measuring client and the server share the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
from common import HOST, ROOT, Server, cpu_model, free_port, local_client, ram_bytes, write_section

TITLE = "## Login contention (issue 14)"
USERNAME, PASSWORD = "bench", "the right password"
GUESSERS = 8
VICTIM_ADDRESS = "127.0.0.2"


def _cli(env: dict[str, str], *args: str, stdin: str | None = None) -> str:
    done = subprocess.run([sys.executable, "-m", "lanner.cli", *args], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=120, input=stdin)
    if done.returncode != 0:
        raise RuntimeError(f"lanner {' '.join(args)} failed: {done.stderr.strip()[-2000:]}")
    return done.stdout.strip()


def _latencies(url: str, key: str, count: int, seconds: float = 60.0) -> list[float]:
    """Up to ``count`` sequential requests, stopping after ``seconds`` (a starved server answers slowly)."""
    out: list[float] = []
    deadline = time.perf_counter() + seconds
    # From 127.0.0.2: the victim is not the attacker (whose address, 127.0.0.1, is refused once over its limit).
    transport = httpx.HTTPTransport(local_address=VICTIM_ADDRESS)
    with local_client(headers={"Authorization": f"Bearer {key}"}, transport=transport) as client:
        while len(out) < count and time.perf_counter() < deadline:
            t0 = time.perf_counter()
            response = client.get(f"{url}/api/account/summary")
            out.append((time.perf_counter() - t0) * 1000)
            if response.status_code != 200:
                raise RuntimeError(f"the valid request failed: {response.status_code} {response.text[:200]}")
    return out


def _guess(url: str, stop: threading.Event, outcomes: Counter[int], lock: threading.Lock) -> None:
    with local_client() as client:
        i = 0
        while not stop.is_set():
            i += 1
            try:
                status = client.post(f"{url}/api/auth/login",
                                     json={"username": USERNAME, "password": f"guess {i}"}).status_code
            except Exception:
                status = 0
            with lock:
                outcomes[status] += 1


def _summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"median_ms": round(statistics.median(ordered), 1), "p90_ms": round(ordered[int(len(ordered) * 0.9)], 1),
            "samples": len(ordered)}


def measure(case: str, extra_env: dict[str, str], samples: int) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="lanner-login-bench-"))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LANNER_")}
    env.update(LANNER_HOME=str(home), LANNER_PUBLIC_URL=f"http://{HOST}:{port}", LANNER_API_RATE_LIMIT="",
               LANNER_SUPERVISOR_INTERVAL_SECONDS="0", LANNER_MAINTENANCE_INTERVAL_SECONDS="0",
               PYTHONPATH=str(ROOT), NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost", **extra_env)
    _cli(env, "users", "create", USERNAME, "--password", PASSWORD)
    key = _cli(env, "keys", "create", USERNAME)
    server = Server(case, [sys.executable, "-m", "lanner.cli", "serve", "--host", HOST, "--port", str(port)], env,
                    port, home / "server.log")
    server.start()
    try:
        _latencies(server.url, key, 20)  # warm-up
        alone = _latencies(server.url, key, samples)
        stop, lock, outcomes = threading.Event(), threading.Lock(), Counter[int]()
        threads = [threading.Thread(target=_guess, args=(server.url, stop, outcomes, lock), daemon=True)
                   for _ in range(GUESSERS)]
        t0 = time.perf_counter()
        for thread in threads:
            thread.start()
        time.sleep(1.0)
        contended = _latencies(server.url, key, samples)
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
        elapsed = time.perf_counter() - t0
        with local_client() as client:
            right = client.post(f"{server.url}/api/auth/login", json={"username": USERNAME, "password": PASSWORD})
    finally:
        server.stop()
    total = sum(outcomes.values())
    return {"case": case, "alone": _summary(alone), "guessers": _summary(contended),
            "guesses": total, "guesses_per_s": round(total / elapsed, 1),
            "guess_statuses": {str(k): v for k, v in sorted(outcomes.items())},
            "right_password_after": right.status_code}


def _commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def run(label: str, results_path: Path, samples: int) -> None:
    cases = [("limits on", {}),
             ("limits off", {"LANNER_AUTH_FAILURE_LIMIT_PER_IP": "", "LANNER_LOGIN_LIMIT_PER_USERNAME": "",
                             "LANNER_LOGIN_LIMIT_PER_USERNAME_AND_ADDRESS": ""})]
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    measured = []
    for case, extra in cases:
        result = measure(case, extra, samples)
        print(json.dumps(result), flush=True)
        measured.append(result)
    results[label] = {"commit": _commit(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                      "machine": f"{os.cpu_count()} CPUs ({cpu_model()}), {ram_bytes() / 1024**3:.1f} GiB RAM",
                      "python": sys.version.split()[0], "cases": measured}
    results_path.write_text(json.dumps(results, indent=2))


def write_doc(results_path: Path) -> None:
    results = json.loads(results_path.read_text())
    lines = [TITLE, "",
             f"Median latency of a valid `GET /api/account/summary` (API key, one request at a time, from "
             f"{VICTIM_ADDRESS}) alone and while {GUESSERS} threads post wrong passwords for the same user to "
             f"`/api/auth/login` without pause, from 127.0.0.1 (`benchmarks/login_contention.py`; one `lanner serve` "
             f"process, default SQLite; the API budget off so the measuring client is never refused; at most 60 s "
             f"of measuring per phase). \"limits off\" empties `LANNER_AUTH_FAILURE_LIMIT_PER_IP`, "
             f"`LANNER_LOGIN_LIMIT_PER_USERNAME` and `LANNER_LOGIN_LIMIT_PER_USERNAME_AND_ADDRESS`, so every guess "
             f"is hashed; the old commit has no limits either way. Server, guessers and measuring client share the "
             f"machine.", ""]
    for label, run_ in results.items():
        lines.append(f"- {label}: commit {run_['commit']}, {run_['date']}, {run_['machine']}, "
                     f"Python {run_['python']}")
    lines += ["", "| code | case | alone p50 ms | with guessers p50 ms | p90 ms | samples | guesses/s | guess answers "
                  "| right password afterwards |", "|---|---|---:|---:|---:|---:|---:|---|---|"]
    for label, run_ in results.items():
        for case in run_["cases"]:
            answers = ", ".join(f"{v:,}×{k}" for k, v in case["guess_statuses"].items())
            lines.append(f"| {label} | {case['case']} | {case['alone']['median_ms']} | "
                         f"{case['guessers']['median_ms']} | {case['guessers']['p90_ms']} | "
                         f"{case['guessers']['samples']} | {case['guesses_per_s']} | {answers} | "
                         f"{case['right_password_after']} |")
    lines += ["", "With the limits on, guesses past the username's allowance are refused (429) before any hashing, and "
                  "the right password is refused too until the window passes; the latency left is the flood of cheap "
                  "refusals themselves. With the limits off every guess is hashed, but in the hashing pool of "
                  "2 threads, so the event loop and the request threadpool stay free and guesses queue among "
                  "themselves. Before, each guess hashed in a request thread of its own, so 8 hashes at once competed "
                  "with every other request for the CPUs."]
    write_section(TITLE, "\n".join(lines) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--label", default="after", help="name of this run in the results file")
    parser.add_argument("--results", type=Path, default=Path(tempfile.gettempdir()) / "lanner-login-bench.json")
    parser.add_argument("--samples", type=int, default=200, help="valid requests measured per phase")
    parser.add_argument("--write-doc", type=Path, help="write the docs/benchmarks.md section from a results file")
    args = parser.parse_args()
    if args.write_doc:
        write_doc(args.write_doc)
    else:
        run(args.label, args.results, args.samples)
    return 0


if __name__ == "__main__":
    sys.exit(main())
