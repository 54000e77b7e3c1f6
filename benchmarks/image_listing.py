"""Image listing at 100,000 images (issue 19): the listing half of ``datasets_bench.py``, alone, optionally
against a baseline source tree in the same run, optionally under py-spy.

    .venv/bin/python benchmarks/image_listing.py [--list-images 100000] [--baseline REV] [--rounds 2]
        [--py-spy docs/profiles/NAME] [--no-doc]
    .venv/bin/python benchmarks/datasets_bench.py --listing-only [the same options]

The dataset is built as ``datasets_bench.py`` builds its listing dataset: a real ``--seed-images`` import through
the CLI whose items are replaced by ``--list-images`` rows (``common.seed_items``). Then, per round, each source
tree (``--baseline``'s ``lanner/`` as of that git revision first, if given, then this one) gets its own
``lanner serve`` (one uvicorn worker) on
that same database, and the ``datasets_bench.LISTING_CASES`` are timed over one keep-alive connection, one
request at a time (``--requests`` after 3 warm-ups); a tree's samples from every round are pooled. The source
tree a server runs is chosen with PYTHONPATH, so both use this venv's packages. ``--py-spy PREFIX`` records a
flame graph of each server while it is timed (``PREFIX-baseline.svg``, ``PREFIX.svg``): py-spy slows what it
samples, so such a run's timings are for the profile, not for the record. Finally the SQL of three cases is
profiled in-process (``datasets_bench.profile_listing``) and, unless ``--no-doc``, the "## Image listing
(issue 19)" section of docs/benchmarks.md is rewritten.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from common import (
    DOC,
    HOST,
    ROOT,
    Server,
    free_port,
    local_client,
    run_cli,
    seed_items,
    venv_bin,
    verdict,
    write_section,
)
from datasets_bench import (
    LISTING_CASES,
    OWNER,
    PROFILE_RUNS,
    PROFILED_CASES,
    Profile,
    Timing,
    ensure_gnu_time,
    log,
    machine_info,
    make_zips,
    md_cell,
    profile_listing,
    sql_profile_rows,
    time_get,
    timed_import,
)

SECTION = "## Image listing (issue 19)"
TARGET_P95_MS = 20.0


@dataclass
class Tree:
    """One source tree under test and its pooled timings per case label."""
    name: str
    src: Path
    revision: str
    timings: dict[str, Timing] = field(default_factory=dict)

    def add(self, timing: Timing) -> None:
        pooled = self.timings.setdefault(timing.label, Timing(timing.label, timing.path, []))
        pooled.samples_ms += timing.samples_ms
        pooled.total, pooled.returned = timing.total, timing.returned


def _export(revision: str, into: Path) -> str:
    """``lanner/`` as of ``revision`` under ``into`` (``git archive``); returns the short commit."""
    commit = subprocess.run(["git", "rev-parse", "--short", f"{revision}^{{commit}}"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.strip()
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", commit, "lanner"], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return commit


def _start_py_spy(pid: int, out: Path) -> subprocess.Popen[bytes]:
    out.parent.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([venv_bin("py-spy"), "record", "--pid", str(pid), "--rate", "250", "--format",
                             "flamegraph", "-o", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)


def _stop_py_spy(proc: subprocess.Popen[bytes], out: Path) -> None:
    proc.send_signal(signal.SIGINT)  # py-spy writes the flame graph when interrupted
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    if not out.exists():
        raise RuntimeError(f"py-spy wrote no {out}: {err.decode(errors='replace')[-2000:]}")
    log(f"[py-spy] {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")


def time_tree(tree: Tree, env: dict[str, str], home: Path, api_key: str, requests: int,
              py_spy: Path | None) -> None:
    port = free_port()
    tree_env = {**env, "PYTHONPATH": str(tree.src), "LANNER_PUBLIC_URL": f"http://{HOST}:{port}"}
    server = Server(f"lanner serve ({tree.name})", [venv_bin("lanner"), "serve", "--host", HOST, "--port",
                                                      str(port)], tree_env, port, home / f"serve-{tree.name}.log")
    spy = None
    try:
        server.start()
        assert server.proc is not None
        if py_spy is not None:
            spy = _start_py_spy(server.proc.pid, py_spy)
            time.sleep(1.0)  # py-spy attaches before the first request
        with local_client(base_url=server.url, headers={"Authorization": f"Bearer {api_key}"}) as client:
            for label, path in LISTING_CASES:
                log(f"[{tree.name}]")
                tree.add(time_get(client, label, path, requests))
        if spy is not None:
            _stop_py_spy(spy, py_spy)  # type: ignore[arg-type]
            spy = None
    finally:
        if spy is not None:
            spy.kill()
            spy.wait()
        server.stop()


def render(info: dict[str, str], command: str, trees: list[Tree], start_load: str, list_images: int,
           requests: int, rounds: int, profiles: list[Profile]) -> str:
    current = trees[-1]
    baseline = trees[0] if len(trees) > 1 else None
    header = "| Request | p50 ms | p95 ms | max ms | images returned / total |"
    if baseline is not None:
        header = ("| Request | baseline p50 ms | baseline p95 ms | p50 ms | p95 ms | max ms | p95 ratio "
                  "| images returned / total |")
    rows = [header, "|---|" + "---:|" * (header.count("|") - 2)]
    for label, path in LISTING_CASES:
        t = current.timings[label]
        note = " (not a target case)" if label == LISTING_CASES[-1][0] else ""
        total = "not counted" if t.total is None else f"{t.total:,}"
        cells = f"{t.p50:.1f} | {t.p95:.1f} | {t.max:.1f}"
        if baseline is not None:
            b = baseline.timings[label]
            cells = f"{b.p50:.1f} | {b.p95:.1f} | {cells} | {t.p95 / b.p95:.2f}"
        rows.append(f"| {md_cell(label)}{note}: `{path}` | {cells} | {t.returned} / {total} |")
    targets = [current.timings[label] for label, _ in LISTING_CASES[:-1]]
    worst = max(targets, key=lambda t: t.p95)
    trees_line = f"this tree (commit {info['revision']})"
    if baseline is not None:
        trees_line = (f"the baseline (commit {baseline.revision}, `git archive`d) and {trees_line}, "
                      f"each with its own `lanner serve` on the same database, baseline first in each round")
    lines = [
        SECTION,
        "",
        f"`GET /api/datasets/{OWNER}/list/images` over a dataset of {list_images:,} items on the default SQLite "
        "database, built as in \"Datasets (issue 4)\" (a real small import whose items are replaced by "
        f"{list_images:,} rows reusing its images). Requests go one at a time over one keep-alive httpx "
        f"connection to `lanner serve` (one uvicorn worker): {requests} timed per case and round after 3 warm-up "
        f"requests, {rounds} round(s) pooled, with the SDK's defaults (`includeTotal`, thumbnails). Trees: "
        f"{trees_line}. The client, the server and the bench share the machine.",
        "",
        f"- Machine: {info['nproc']} CPUs ({info['cpu']}), {info['ram']} RAM; load average before the run "
        f"{start_load} (1/5/15 min), after it {info['load']}",
        f"- Date: {info['date']}",
        f"- Python {info['python']}, uvicorn {info['uvicorn']}, FastAPI {info['fastapi']}, "
        f"SQLAlchemy {info['sqlalchemy']}, SQLite {info['sqlite']}",
        f"- Command: `{command}`",
        "",
        *rows,
        "",
        "Where this tree's request time goes (the SQL profile of \"Datasets (issue 4)\": the same requests served "
        f"in-process, {PROFILE_RUNS} each after 2 warm-ups, every SELECT replayed and timed to its last row):",
        *sql_profile_rows(profiles),
        "",
        f"Target: p95 ≤ {TARGET_P95_MS:.0f} ms at {list_images:,} images, every target case: worst "
        f"{worst.p95:.1f} ms ({worst.label}) — {verdict(worst.p95 <= TARGET_P95_MS)}",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Image listing at depth (issue 19).")
    parser.add_argument("--list-images", type=int, default=100_000, help="items in the dataset (default 100000)")
    parser.add_argument("--seed-images", type=int, default=200, help="real images the items reuse (default 200)")
    parser.add_argument("--requests", type=int, default=50, help="timed requests per case and round (default 50)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds over the trees (default 1)")
    parser.add_argument("--baseline", metavar="REV", help="a git revision whose lanner/ is timed first")
    parser.add_argument("--py-spy", type=Path, help="flame graph path prefix (PREFIX.svg, PREFIX-baseline.svg)")
    parser.add_argument("--no-doc", action="store_true", help="do not rewrite docs/benchmarks.md")
    parser.add_argument("--keep-home", action="store_true", help="keep the temporary LANNER_HOME (its database)")
    args = parser.parse_args(argv)
    if min(args.list_images, args.seed_images, args.requests, args.rounds) < 1:
        parser.error("counts must be positive")

    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    command = (".venv/bin/python benchmarks/image_listing.py " + " ".join(sys.argv[1:] if argv is None
                                                                          else argv)).strip()
    start_load = " / ".join(f"{v:.2f}" for v in os.getloadavg())
    home = Path(tempfile.mkdtemp(prefix="lanner-listing-bench-"))
    try:
        trees = [Tree("this", ROOT, machine_info()["revision"])]
        if args.baseline:
            trees.insert(0, Tree("baseline", home / "baseline", _export(args.baseline, home / "baseline")))
        env = {k: v for k, v in os.environ.items() if not k.startswith("LANNER_")}
        env.update(LANNER_API_RATE_LIMIT="", LANNER_WORKER_RATE_LIMIT="", LANNER_HOME=str(home),
                   PYTHONPATH=str(ROOT), NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
        archive = home / "list.zip"
        make_zips([(archive, args.seed_images, 0)])
        run_cli(["users", "create", OWNER], env)
        api_key = run_cli(["keys", "create", OWNER], env)
        timed_import(ensure_gnu_time(), env, archive, "list", args.seed_images, home)
        seed_items(home, OWNER, "list", args.list_images)
        for _ in range(args.rounds):
            for tree in trees:
                spy = None
                if args.py_spy is not None:
                    suffix = "-baseline" if tree.name == "baseline" else ""
                    spy = args.py_spy.with_name(args.py_spy.name + suffix + ".svg").resolve()
                time_tree(tree, env, home, api_key, args.requests, spy)
        profiles = profile_listing(env, api_key, PROFILED_CASES, PROFILE_RUNS)
        print()
        for tree in trees:
            for label, _ in LISTING_CASES:
                t = tree.timings[label]
                print(f"{tree.name:<9} {label:<30} p50 {t.p50:6.1f} ms  p95 {t.p95:6.1f} ms  max {t.max:6.1f} ms")
        if not args.no_doc:
            write_section(SECTION, render(machine_info(), command, trees, start_load, args.list_images,
                                          args.requests, args.rounds, profiles))
            print(f"\nWrote {SECTION!r} in {DOC.relative_to(ROOT)}")
        worst = max(trees[-1].timings[label].p95 for label, _ in LISTING_CASES[:-1])
        return 0 if worst <= TARGET_P95_MS else 1
    finally:
        if args.keep_home:
            log(f"LANNER_HOME kept at {home}")
        else:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
