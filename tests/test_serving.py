"""How ``lanner serve`` builds its app (``lanner.app.create_served_app``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.servers import lanner_env

FREEZE_CHECK = """
import gc
from fastapi.testclient import TestClient
from lanner.app import create_app
from lanner.config import Settings
app = create_app(Settings(), freeze_gc={freeze})
with TestClient(app):
    print(gc.get_freeze_count())
"""


def _frozen_after_start(home: Path, *, freeze: bool) -> int:
    done = subprocess.run([sys.executable, "-c", FREEZE_CHECK.format(freeze=freeze)], env=lanner_env(home),
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return int(done.stdout.strip().splitlines()[-1])


def test_a_served_app_hides_its_start_up_objects_from_the_collector(tmp_path: Path) -> None:
    """Full collections then walk only what requests make (they took ~100 ms under webhook load, the whole
    p99); a test process, which builds many apps, keeps the collector as it is."""
    assert _frozen_after_start(tmp_path / "served", freeze=True) > 10_000
    assert _frozen_after_start(tmp_path / "tested", freeze=False) == 0
