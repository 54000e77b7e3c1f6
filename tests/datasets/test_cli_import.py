"""``lanner datasets import``: its progress bars (on stderr), one per stage, each ending at its total."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.servers import VENV_BIN, lanner_cli, lanner_env


def test_each_progress_bar_ends_at_its_total(tmp_path: Path) -> None:
    from lanner.synthetic import make_detection_dataset

    home = tmp_path / "home"
    lanner_cli(home, "users", "create", "erin")
    make_detection_dataset(tmp_path / "shapes", train=6, val=3)
    done = subprocess.run([str(VENV_BIN / "lanner"), "datasets", "import", str(tmp_path / "shapes"), "--owner", "erin",
                           "--name", "shapes"], capture_output=True, text=True, env=lanner_env(home, COLUMNS="100"),
                          check=False)
    assert done.returncode == 0, done.stderr
    bars = {match[0]: (int(match[1]), int(match[2]))
            for match in re.findall(r"^(\w+)\s.*?(\d+)/(\d+)\s", done.stderr, flags=re.MULTILINE)}
    assert bars == {"unpacked": (9, 9), "images": (9, 9), "health": (1, 1)}, done.stderr
    assert "imported 9 images into erin/shapes" in done.stderr
