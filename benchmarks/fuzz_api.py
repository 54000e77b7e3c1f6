"""The long API fuzzing run (docs/fuzzing.md): the same harness as ``tests/test_fuzz.py`` (``tests/fuzzing.py``),
with many more cases per operation, a random seed (printed, to replay a run) and SQLite or PostgreSQL.

    .venv/bin/python benchmarks/fuzz_api.py [--examples 500] [--seed N] [--database sqlite|postgresql]
                                            [--only SUBSTRING]

Prints every failing case (a curl command to replay it) and a markdown summary: operations, cases sent,
failures per operation, time. Exit status 1 when anything failed.
"""

from __future__ import annotations

import argparse
import collections
import os
import platform
import random
import sys
import time
from datetime import UTC, datetime

from common import ROOT, cpu_model, ram_bytes

sys.path.insert(0, str(ROOT))  # the harness lives in the tests package

from tests import fuzzing  # noqa: E402
from tests.pg import PostgresCluster  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=500, help="cases per operation")
    parser.add_argument("--seed", type=int, default=None, help="hypothesis seed (default: a random one)")
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--only", default=None, help="fuzz only operations whose path contains this")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(2**32)

    cluster = None
    url = None
    if args.database == "postgresql":
        cluster = PostgresCluster().start()
        cluster.execute("CREATE DATABASE lanner_fuzz")
        url = cluster.url("lanner_fuzz")
    started = time.monotonic()
    sent: dict[str, int] = {}
    try:
        with fuzzing.target(database_url=url) as t:
            for method, path in t.operations():
                if args.only and args.only not in path:
                    continue
                before = time.monotonic()
                sent[f"{method} {path}"] = fuzzing.fuzz(t, method, path, examples=args.examples, seed=seed)
                print(f"{method:6} {path:60} {sent[f'{method} {path}']:6} cases "
                      f"{time.monotonic() - before:6.1f} s", flush=True)
            failures = list(t.failures)
    finally:
        if cluster is not None:
            cluster.stop()
    elapsed = time.monotonic() - started

    per_operation = collections.Counter(f.operation for f in failures)
    distinct = {(f.operation, f.status, f.body[:120]) for f in failures}
    for failure in failures[:50]:
        print(failure)
    print()
    print(f"- Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; machine: {os.cpu_count()} CPUs ({cpu_model()}), "
          f"{ram_bytes() / 1024**3:.1f} GiB RAM; Python {platform.python_version()}")
    print(f"- Command: `benchmarks/fuzz_api.py --examples {args.examples} --seed {seed} "
          f"--database {args.database}`")
    print(f"- Operations: {len(sent)}; skipped: {len(fuzzing.SKIPPED)}; cases sent: {sum(sent.values()):,}; "
          f"time: {elapsed:.0f} s")
    print(f"- Failing cases: {len(failures)} ({len(distinct)} distinct) in {len(per_operation)} operation(s)")
    for operation, count in per_operation.most_common():
        print(f"  - {operation}: {count}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
