"""Label errors injected into a synthetic YOLO dataset, as a labeller makes them: a box given the other class
(``class``), a box never drawn (``missing``), a box drawn half a width off its object (``shifted``). The review
benchmark and tests inject them and check where the scored images land in the Review queue."""

from __future__ import annotations

from pathlib import Path

import numpy as np

KINDS = ("class", "missing", "shifted")


def read_labels(path: Path) -> list[dict]:
    rows = [line.split() for line in path.read_text().splitlines() if line.strip()]
    return [{"classId": int(r[0]), "bbox": [float(v) for v in r[1:5]]} for r in rows]


def write_labels(path: Path, labels: list[dict]) -> None:
    path.write_text("".join(f"{label['classId']} " + " ".join(f"{v:.6f}" for v in label["bbox"]) + "\n"
                            for label in labels))


def inject(labels_dir: Path, count: int, *, seed: int = 11) -> dict[str, str]:
    """Corrupt one box in each of ``count`` distinct label files (kinds in turn); the file stems and the kind."""
    rng = np.random.default_rng(seed)
    files = sorted(labels_dir.glob("*.txt"))
    chosen = rng.choice(len(files), size=count, replace=False)
    errors = {}
    for n, index in enumerate(sorted(int(i) for i in chosen)):
        path, kind = files[index], KINDS[n % len(KINDS)]
        labels = read_labels(path)
        victim = int(rng.integers(0, len(labels)))
        box = labels[victim]
        if kind == "class":
            box["classId"] = 1 - box["classId"]
        elif kind == "missing":
            labels.pop(victim)
        else:
            angle = float(rng.uniform(0, 2 * np.pi))
            cx = min(max(box["bbox"][0] + 0.5 * box["bbox"][2] * np.cos(angle), 0.0), 1.0)
            cy = min(max(box["bbox"][1] + 0.5 * box["bbox"][3] * np.sin(angle), 0.0), 1.0)
            box["bbox"] = [cx, cy, box["bbox"][2], box["bbox"][3]]
        write_labels(path, labels)
        errors[path.stem] = kind
    return errors
