"""Every operation of the OpenAPI document, fuzzed with schemathesis (``tests/fuzzing.py``): no 5xx, and every
4xx is ``{"error": "..."}``. A bounded, derandomized run on SQLite for ``make test``; ``benchmarks/fuzz_api.py``
runs many more cases (docs/fuzzing.md). ``make test`` sends 40 cases per operation; ``make test-fast``, the
edit-run loop, sends ``--fuzz-examples`` of them (10, derandomized too: a quarter of the time)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import fuzzing
from tests.conftest import copy_of
from tests.world import openapi_document, operations

DOCUMENT = openapi_document()


@pytest.fixture(scope="module")
def fuzz_target(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path) -> Iterator[fuzzing.Target]:
    work = tmp_path_factory.mktemp("fuzz")
    with fuzzing.target(work, copy_of(sqlite_template, work)) as t:
        yield t


def _ordered() -> list[tuple[str, str]]:
    ops = [op for op in operations(DOCUMENT) if op not in fuzzing.SKIPPED]
    return sorted(ops, key=lambda op: op[0] == "DELETE")  # as Target.operations: deletes last


@pytest.mark.parametrize("method, path", _ordered(), ids=[f"{m} {p}" for m, p in _ordered()])
def test_no_server_error_and_one_error_shape(fuzz_target: fuzzing.Target, method: str, path: str,
                                             request: pytest.FixtureRequest) -> None:
    before = len(fuzz_target.failures)
    sent = fuzzing.fuzz(fuzz_target, method, path, examples=request.config.getoption("fuzz_examples"))
    assert sent > 0
    found = fuzz_target.failures[before:]
    assert not found, f"{len(found)} failing case(s):\n" + "\n".join(str(f) for f in found[:5])


def test_skipped_operations_exist_and_say_why() -> None:
    ops = set(operations(DOCUMENT))
    for op, reason in fuzzing.SKIPPED.items():
        assert op in ops, f"{op} is skipped but no longer in the OpenAPI document"
        assert reason.strip(), f"{op} is skipped without a reason"
