"""Streaming overhead benchmark (issue 19): how much longer the same short ``yolo train`` takes when it streams
to Lanner (the platform environment variables set) than when it does not, with Lanner serving on the same
machine in both cases.

    .venv/bin/python benchmarks/streaming_overhead.py [--pairs 5] [--epochs 3] [--profile docs/profiles/x.svg]

What it does, all on 127.0.0.1 in a throw-away folder:

1. Makes a LANNER_HOME, a user ``bench`` and an API key through the ``lanner`` CLI, and starts ``lanner serve``
   (its default settings: supervisor, maintenance and rate limits as shipped).
2. Writes a 64-image synthetic detection dataset (``lanner.synthetic``, 48 train / 16 val) and points the
   trainer's settings (runs, datasets, weights) at the temporary folder.
3. Runs ``yolo train model=yolo11n.yaml imgsz=160 epochs=3 device=cpu plots=False project=bench/stream`` in a
   clean environment (no ``PYTEST_*``, which disables the platform callbacks), alternately with
   ``ULTRALYTICS_PLATFORM_URL`` + ``ULTRALYTICS_API_KEY`` ("streamed") and without ("plain"), ``--pairs`` pairs,
   the order inside a pair changing every pair (``pair_order``) so drift in the machine's speed falls on both sides.
4. Per run: the trainer's wall time (process start to exit), and the CPU seconds ``lanner serve`` spent during it
   (``/proc``), so the server's share is measured rather than guessed. Every streamed run is read back through
   the official SDK (completed, its epochs, console and weights stored), so a run that silently stopped
   streaming cannot pass as a fast one.
5. Prints each pair's ratio (streamed / plain) and the median, and rewrites the "## Streaming overhead
   (issue 19)" section of docs/benchmarks.md (``--no-doc`` to skip).

Before the pairs, one run of each kind warms the caches (not counted). ``--stub`` adds a third run to each pair,
streamed to benchmarks/stub_platform.py (answers at once, stores nothing: the trainer's own cost of streaming).
``--profile PATH`` adds one more streamed run, not counted, with py-spy recording the server (only what holds
the GIL, the server being idle most of the time; a flame graph at PATH); ``--profile-plain PATH`` the same during a
plain run (what the idle server costs in both arms: its background loops); ``--probe`` one more, not counted, with
the trainer's platform integration timed (benchmarks/trainer_probe), and with ``--stub`` the same run streamed to
the stub, side by side: what waiting on Lanner costs the trainer beyond what streaming costs it anyway.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from common import (
    DOC,
    HOST,
    ROOT,
    FlameGraph,
    Server,
    cpu_model,
    free_port,
    local_client,
    ram_bytes,
    run_cli,
    venv_bin,
    verdict,
    write_section,
)

SECTION = "## Streaming overhead (issue 19)"
PROBE_DIR = Path(__file__).resolve().parent / "trainer_probe"
OWNER, PROJECT = "bench", "stream"
TARGET_RATIO = 1.02


@dataclass
class Run:
    mode: str  # "streamed" or "plain"
    pair: int
    wall_s: float
    server_cpu_s: float
    trainer_cpu_s: float
    name: str
    stub_cpu_s: float = 0.0  # the stub platform's CPU seconds during the run (with --stub)


def start_lanner(root: Path, servers: list[Server], settings: dict[str, str] | None = None,
                 pythonpath: str | None = None) -> tuple[Server, dict[str, str], str]:
    """A fresh LANNER_HOME under ``root`` with the user ``bench`` and an API key, and ``lanner serve`` on it with
    its default settings but ``settings`` (``LANNER_*`` variables; appended to ``servers``, which the caller
    stops; ``pythonpath``: where its ``lanner`` comes from, this checkout by default). Returns the server, its
    environment and the key."""
    home = root / "home"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANNER_", "PYTEST_"))}
    env.update(LANNER_HOME=str(home), LANNER_PUBLIC_URL=f"http://{HOST}:{port}",
               NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost", **(settings or {}))
    # This checkout's lanner (the doc names its commit), not whichever checkout the venv's editable install points
    # at; a PYTHONPATH set by the caller still comes first (comparing revisions: a `git archive` of lanner/).
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath or env.get("PYTHONPATH", ""), str(ROOT)) if p)
    run_cli(["users", "create", OWNER], env)
    api_key = run_cli(["keys", "create", OWNER], env)
    home.mkdir(exist_ok=True)
    server = Server("lanner serve", [venv_bin("lanner"), "serve", "--host", HOST, "--port", str(port)], env, port,
                    root / "serve.log")
    servers.append(server)
    server.start()
    return server, env, api_key


def start_stub(root: Path, env: dict[str, str], servers: list[Server]) -> Server:
    port = free_port()
    stub = Server("stub platform", [sys.executable, str(Path(__file__).resolve().parent / "stub_platform.py"),
                                    "--host", HOST, "--port", str(port)], env, port, root / "stub.log")
    servers.append(stub)
    stub.start()
    return stub


def make_dataset(root: Path) -> Path:
    from lanner.synthetic import make_detection_dataset

    return make_detection_dataset(root / "shapes", train=48, val=16, size=160)


def trainer_env(work: Path, url: str | None, api_key: str | None) -> dict[str, str]:
    """What a user's shell gives ``yolo``: nothing of pytest or of the bench's own environment."""
    env = {"PATH": f"{Path(venv_bin('yolo')).parent}:/usr/bin:/bin", "HOME": str(work),
           "YOLO_CONFIG_DIR": str(work / "config"), "OMP_NUM_THREADS": "2", "MPLBACKEND": "Agg",
           "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
    if url and api_key:
        env.update(ULTRALYTICS_PLATFORM_URL=url, ULTRALYTICS_API_KEY=api_key)
    return env


def yolo_settings(work: Path) -> None:
    """Runs, datasets and weights under ``work`` (the defaults are under the repository's git root)."""
    done = subprocess.run([venv_bin("yolo"), "settings", f"runs_dir={work / 'runs'}",
                           f"datasets_dir={work / 'datasets'}", f"weights_dir={work / 'weights'}", "sync=False"],
                          cwd=work, env=trainer_env(work, None, None), capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"yolo settings failed: {done.stdout}{done.stderr}")


def train_argv(args: argparse.Namespace, data: Path, name: str) -> list[str]:
    return [venv_bin("yolo"), "train", "model=yolo11n.yaml", f"data={data}", f"epochs={args.epochs}", "imgsz=160",
            "device=cpu", "plots=False", f"workers={args.workers}", f"batch={args.batch}",
            f"project={OWNER}/{PROJECT}", f"name={name}", "exist_ok=False", "seed=0", "deterministic=True"]


def cpu_seconds(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def train_once(args: argparse.Namespace, work: Path, data: Path, server: Server, api_key: str, *, mode: str,
               pair: int, targets: dict[str, str], profile: Path | None = None, probe: Path | None = None,
               stub_pid: int | None = None) -> Run:
    """One ``yolo train``: ``mode`` "plain" (no platform variables) or a key of ``targets`` (the URL it streams
    to: "streamed" is Lanner, "stub" the platform that stores nothing)."""
    name = f"{mode}-{pair}" if probe is None else f"{mode}-probe"
    streamed = mode != "plain"
    env = trainer_env(work, targets.get(mode), api_key if streamed else None)
    if probe is not None:
        env.update(PYTHONPATH=str(PROBE_DIR), LANNER_TRAINER_PROBE=str(probe))
    assert server.proc is not None
    with FlameGraph(server.proc.pid, profile, gil=True):  # mostly idle: only what holds the GIL
        server_before = cpu_seconds(server.proc.pid)
        stub_before = cpu_seconds(stub_pid) if stub_pid else 0.0
        children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.Popen(train_argv(args, data, name), cwd=work, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        output, _ = proc.communicate(timeout=args.timeout)
        wall = time.perf_counter() - t0
        server_cpu = cpu_seconds(server.proc.pid) - server_before
        stub_cpu = cpu_seconds(stub_pid) - stub_before if stub_pid else 0.0
        children = resource.getrusage(resource.RUSAGE_CHILDREN)  # the trainer, reaped by communicate()
        trainer_cpu = (children.ru_utime + children.ru_stime) - (children_before.ru_utime + children_before.ru_stime)
    if proc.returncode != 0:
        raise RuntimeError(f"yolo train ({mode}) failed with {proc.returncode}:\n{output[-4000:]}")
    failures = [line for line in output.splitlines() if "Platform: Failed" in line or "will not be" in line]
    if streamed and failures:
        raise RuntimeError(f"the streamed run did not stream everything: {failures[:5]}")
    if not streamed and "Streaming training metrics" in output:
        raise RuntimeError("the plain run streamed: the platform variables leaked into its environment")
    return Run(mode=mode, pair=pair, wall_s=wall, server_cpu_s=server_cpu, trainer_cpu_s=trainer_cpu, name=name,
               stub_cpu_s=stub_cpu)


def check_streamed(url: str, api_key: str, run: Run, epochs: int) -> dict[str, Any]:
    """The streamed run is in Lanner: completed, every epoch once, console and weights stored."""
    from ultralytics_platform import Platform

    client = Platform(base_url=url, api_key=api_key, max_retries=0, http_client=local_client())
    try:
        model = client.models.retrieve(OWNER, PROJECT, run.name)["model"]
    finally:
        client.close()
    epochs_seen = [r["epoch"] for r in model["trainResults"]]
    problems = []
    if model["status"] != "completed":
        problems.append(f"status {model['status']}")
    if epochs_seen != list(range(epochs)):
        problems.append(f"epochs {epochs_seen}")
    if not model.get("consoleChunks"):
        problems.append("no console")
    if not model.get("hasWeights"):
        problems.append("no weights")
    if problems:
        raise RuntimeError(f"streamed run {run.name} is not stored as trained: {', '.join(problems)}")
    return {"epochs": len(epochs_seen), "console_chunks": len(model["consoleChunks"])}


def pair_order(modes: list[str], pair: int) -> list[str]:
    """The order of the runs of pair ``pair`` (from 1): rotations of ``modes``, forward in odd pairs and reversed
    in even ones, so that every mode takes every place and follows every other mode equally often (with three
    modes, six pairs make all six orders): whatever a run leaves behind (the server's work after a streamed run,
    the page cache) falls on each kind alike."""
    base = modes if pair % 2 else modes[::-1]
    shift = ((pair - 1) // 2) % len(modes)
    return base[shift:] + base[:shift]


def ratios(runs: list[Run], mode: str = "streamed") -> list[tuple[int, float, float, float]]:
    """(pair, ``mode`` s, plain s, ratio) per pair."""
    out = []
    for pair in sorted({r.pair for r in runs}):
        streamed = next(r for r in runs if r.pair == pair and r.mode == mode)
        plain = next(r for r in runs if r.pair == pair and r.mode == "plain")
        out.append((pair, streamed.wall_s, plain.wall_s, streamed.wall_s / plain.wall_s))
    return out


def _section_text() -> str:
    """This section of docs/benchmarks.md as it stands ("" when missing)."""
    text = DOC.read_text() if DOC.exists() else ""
    start = text.find(SECTION)
    if start == -1:
        return ""
    following = re.search(r"^## ", text[start + len(SECTION):], re.M)
    return text[start:start + len(SECTION) + following.start()] if following else text[start:]


def section_parts() -> dict[str, str]:
    """The ``### `` parts of this section by heading: written by hand ("What moved the numbers") or by
    benchmarks/stream_replay.py. A rerun of this benchmark rewrites the text above them and keeps them."""
    parts = re.split(r"^(?=### )", _section_text(), flags=re.M)[1:]
    return {part.splitlines()[0]: part.rstrip("\n") + "\n" for part in parts}


def write_section_keeping_parts(generated: str, parts: dict[str, str]) -> None:
    write_section(SECTION, "\n".join([generated.rstrip("\n") + "\n", *parts.values()]))


def write_part(heading: str, text: str) -> None:
    """Replace (or add) the part headed ``heading`` (``### ...``) of this section, keeping the rest as it is."""
    parts = section_parts()
    parts[heading] = text.rstrip("\n") + "\n"
    head = re.split(r"^(?=### )", _section_text(), flags=re.M)[0]
    write_section_keeping_parts(head or f"{SECTION}\n\nNot measured yet: run benchmarks/streaming_overhead.py.\n",
                                parts)


def git_revision() -> str:
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "lanner"], cwd=ROOT, capture_output=True,
                           text=True).stdout.strip()
    return (rev.stdout.strip() or "unknown") + (" + uncommitted changes under lanner/" if dirty else "")


def probe_table(probed: dict[str, dict[str, list[float]]]) -> list[str]:
    """One row per timed thing, ``calls / wall s / CPU s`` per streamed kind (Lanner, the stub)."""
    kinds = list(probed)
    keys = sorted({k for timings in probed.values() for k in timings},
                  key=lambda k: -max(t.get(k, [0, 0.0, 0.0])[1] for t in probed.values()))
    rows = ["| what | " + " | ".join(f"{kind}: calls, wall s, CPU s" for kind in kinds) + " |",
            "|---|" + "---:|" * len(kinds)]
    for key in keys:
        cells = []
        for kind in kinds:
            calls, wall, cpu = probed[kind].get(key, [0, 0.0, 0.0])
            cells.append(f"{int(calls)}, {wall:.3f}, {cpu:.3f}")
        if max(probed[kind].get(key, [0, 0.0, 0.0])[1] for kind in kinds) >= 0.001:
            rows.append(f"| {key} | " + " | ".join(cells) + " |")
    return rows


def cpu_line(runs: list[Run], modes: tuple[str, ...]) -> str:
    """CPU seconds, which the machine's other work does not change the way it changes wall time: each streamed
    kind's extra over the plain run of its pair (median over the pairs), the trainer's and the servers'."""

    def extra(mode: str, of: str) -> float:
        by_pair = {(r.pair, r.mode): getattr(r, of) for r in runs}
        return statistics.median(by_pair[(p, mode)] - by_pair[(p, "plain")] for p in {r.pair for r in runs})

    plain = statistics.median(r.trainer_cpu_s for r in runs if r.mode == "plain")
    parts = [f"{mode}: trainer {extra(mode, 'trainer_cpu_s'):+.2f} s ({extra(mode, 'trainer_cpu_s') / plain:+.1%}), "
             f"lanner serve {extra(mode, 'server_cpu_s'):+.2f} s" for mode in modes if mode != "plain"]
    if "stub" in modes:
        parts.append("the stub platform itself "
                     f"{statistics.median(r.stub_cpu_s for r in runs if r.mode == 'stub'):.2f} s per stub run")
    return ("CPU seconds over the plain run of the same pair (medians over the pairs; plain trainer CPU "
            f"{plain:.1f} s): " + "; ".join(parts) + ".")


def render(args: argparse.Namespace, runs: list[Run], stored: list[dict[str, Any]], facts: dict[str, str],
           probed: dict[str, dict[str, list[float]]]) -> str:
    per_pair = ratios(runs)
    stub = ratios(runs, "stub") if args.stub else []
    median = statistics.median(r for *_, r in per_pair)
    modes = ("streamed", "stub", "plain") if args.stub else ("streamed", "plain")
    server_cpu = {mode: statistics.median(r.server_cpu_s for r in runs if r.mode == mode) for mode in modes}
    trainer_cpu = {mode: statistics.median(r.trainer_cpu_s for r in runs if r.mode == mode) for mode in modes}
    stub_head = " stub s | stub / plain |" if stub else ""
    rows = [f"| pair | order | streamed s | plain s | streamed / plain |{stub_head} server CPU s (streamed / plain) |",
            "|---:|---|---:|---:|---:|" + ("---:|---:|" if stub else "") + "---:|"]
    for i, (pair, streamed_s, plain_s, ratio) in enumerate(per_pair):
        order = " → ".join(r.mode for r in runs if r.pair == pair)
        cpu = {r.mode: r.server_cpu_s for r in runs if r.pair == pair}
        stub_cells = f" {stub[i][1]:.1f} | {stub[i][3]:.3f} |" if stub else ""
        rows.append(f"| {pair} | {order} | {streamed_s:.1f} | {plain_s:.1f} | {ratio:.3f} |{stub_cells} "
                    f"{cpu['streamed']:.2f} / {cpu['plain']:.2f} |")
    chunks = statistics.median(s["console_chunks"] for s in stored)
    lines = [
        SECTION,
        "",
        f"The same `yolo train` (yolo11n.yaml, imgsz 160, {args.epochs} epochs, 64 synthetic images from "
        f"`lanner.synthetic`, CPU, plots=False, workers={args.workers}, batch={args.batch}) with "
        "`ULTRALYTICS_PLATFORM_URL` and `ULTRALYTICS_API_KEY` pointing at a real `lanner serve` (streamed) "
        "against the same command without them (plain), in a clean environment (no `PYTEST_*`). The server runs "
        "on the same machine in both cases and shares its 2 cores with the trainer; the order within a pair "
        "changes every pair (forward and reversed rotations: each kind takes each place and follows each other "
        "kind alike). Not counted: one run of each kind first (cold caches, the server's first "
        "statements). Every streamed run was read back through the SDK: completed, "
        f"{args.epochs} epochs, console (median {chunks:.0f} chunks) and weights stored."
        + (" **stub**: the same run streamed to `benchmarks/stub_platform.py`, which answers every call at once "
           "and stores nothing: what streaming costs the trainer with no server work at all." if stub else ""),
        "",
        f"- Machine: {facts['machine']}",
        f"- Date: {facts['date']}; commit {facts['revision']}; load average before / after: {facts['load_before']}"
        f" / {facts['load_after']}",
        f"- Command: `{facts['command']}`",
        "",
        *rows,
        "",
        f"Median streamed / plain: **{median:.3f}** (range {min(r for *_, r in per_pair):.3f}–"
        f"{max(r for *_, r in per_pair):.3f}); target ≤ {TARGET_RATIO} — {verdict(median <= TARGET_RATIO)}.",
    ]
    if stub:
        over_stub = [s / t for (_, s, _, _), (_, t, _, _) in zip(per_pair, stub, strict=True)]
        lines += [f"Median stub / plain: **{statistics.median(r for *_, r in stub):.3f}** (range "
                  f"{min(r for *_, r in stub):.3f}–{max(r for *_, r in stub):.3f}): what streaming costs the "
                  "trainer itself.",
                  f"Median streamed / stub: **{statistics.median(over_stub):.3f}** (range {min(over_stub):.3f}–"
                  f"{max(over_stub):.3f}): what Lanner adds on top."]
    lines += ["", cpu_line(runs, modes)]
    lines += [
        "",
        "Per run, medians: " + "; ".join(f"{mode}: trainer CPU {trainer_cpu[mode]:.1f} s, lanner serve CPU "
                                        f"{server_cpu[mode]:.2f} s" for mode in modes) + ".",
        "",
    ]
    if probed:
        lines += ["Where the trainer's time goes when it streams (`--probe`: one more run per streamed kind, not "
                  "counted, with `benchmarks/trainer_probe` timing the platform integration inside `yolo`; wall s "
                  "and CPU s of the calling thread, summed over calls; the training thread waits for the callbacks, "
                  "`training_started`, `checkpoint_saved`, `training_complete` and the upload):", "",
                  *probe_table(probed)]
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description="Streaming overhead: yolo train with and without Lanner.")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--timeout", type=int, default=1800, help="seconds one training run may take")
    parser.add_argument("--stub", action="store_true", help="a third run per pair, streamed to "
                        "benchmarks/stub_platform.py (answers at once, stores nothing)")
    parser.add_argument("--profile", type=Path, help="py-spy flame graph of the server during one extra "
                        "streamed run (not counted)")
    parser.add_argument("--profile-plain", type=Path, help="py-spy flame graph of the server during one extra "
                        "plain run (not counted): its idle background work")
    parser.add_argument("--probe", action="store_true", help="one more streamed run (not counted) with the "
                        "trainer's platform callbacks timed (benchmarks/trainer_probe)")
    parser.add_argument("--no-doc", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    if args.pairs < 1 or args.epochs < 1:
        parser.error("--pairs and --epochs must be positive")
    sys.stdout.reconfigure(line_buffering=True)
    command = ".venv/bin/python benchmarks/streaming_overhead.py " + " ".join(sys.argv[1:])
    root = Path(tempfile.mkdtemp(prefix="lanner-stream-"))
    work = root / "work"
    work.mkdir(parents=True)
    servers: list[Server] = []
    try:
        server, env, api_key = start_lanner(root, servers)
        stub_pid: int | None = None
        targets = {"streamed": server.url}
        modes = ["streamed", "plain"]
        if args.stub:
            stub = start_stub(root, env, servers)
            assert stub.proc is not None
            targets["stub"], stub_pid = stub.url, stub.proc.pid
            modes.insert(1, "stub")
        data = make_dataset(root)
        yolo_settings(work)

        def once(mode: str, pair: int, **extra: Any) -> Run:
            return train_once(args, work, data, server, api_key, mode=mode, pair=pair, targets=targets,
                              stub_pid=stub_pid, **extra)

        # Not counted: a run of each kind first (cold caches, first imports, the server's first
        # statements), and the profiled run (py-spy stops the server at every sample).
        for mode in modes:
            once(mode, 0)
        if args.profile:
            once("streamed", -1, profile=args.profile)
        if args.profile_plain:
            once("plain", -1, profile=args.profile_plain)
        load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
        runs: list[Run] = []
        stored: list[dict[str, Any]] = []
        for pair in range(1, args.pairs + 1):
            for mode in pair_order(modes, pair):
                run = once(mode, pair)
                runs.append(run)
                if mode == "streamed":
                    stored.append(check_streamed(server.url, api_key, run, args.epochs))
                print(f"[pair {pair}] {mode:<8} {run.wall_s:6.1f} s  server CPU {run.server_cpu_s:5.2f} s  "
                      f"trainer CPU {run.trainer_cpu_s:6.1f} s", file=sys.stderr)
        load_after = " ".join(f"{x:.2f}" for x in os.getloadavg())
        probed: dict[str, dict[str, list[float]]] = {}
        if args.probe:  # after the pairs: not counted
            for mode in [m for m in modes if m != "plain"]:
                probe_file = root / f"trainer-probe-{mode}.json"
                once(mode, 0, probe=probe_file)
                probed[mode] = json.loads(probe_file.read_text())
            for row in probe_table(probed):
                print(row)
        for mode in [m for m in modes if m != "plain"]:
            per_pair = ratios(runs, mode)
            for pair, streamed_s, plain_s, ratio in per_pair:
                print(f"pair {pair}: {mode} {streamed_s:.1f} s, plain {plain_s:.1f} s, ratio {ratio:.3f}")
            print(f"median {mode} / plain {statistics.median(r for *_, r in per_pair):.3f}")
        median = statistics.median(r for *_, r in ratios(runs))
        print(f"median ratio {median:.3f} (target <= {TARGET_RATIO}: {verdict(median <= TARGET_RATIO)})")
        if not args.no_doc:
            date = subprocess.run(["date", "-u"], capture_output=True, text=True).stdout.strip()
            facts = {"machine": f"{os.cpu_count()} CPUs ({cpu_model()}), {ram_bytes() / 2**30:.1f} GiB RAM",
                     "date": date, "revision": git_revision(), "load_before": load_before,
                     "load_after": load_after, "command": command.strip()}
            write_section_keeping_parts(render(args, runs, stored, facts, probed), section_parts())
            print(f"Wrote {SECTION!r} in {DOC.relative_to(ROOT)}")
        return 0 if median <= TARGET_RATIO else 1
    finally:
        for running in servers:
            running.stop()
        if args.keep:
            print(f"kept {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
