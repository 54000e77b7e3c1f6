"""One labelling session against a real ``lanner serve`` (local executor, CPU), shared by the end-to-end test
and ``benchmarks/assistant.py``: a person labels images of an unlabelled synthetic shapes dataset through the API
with the generator's labels, the assistant trains a round by itself, and its proposals on the images nobody
labelled are scored against the generator's ground truth.

Proposals come from the proposals API with the assistant's model (conf 0.25, its default); the mAP50 and the
check of "label next"'s scores use ``models.predict`` at conf 0.05 (the scoring floor) at the size the assistant
trained at."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from ultralytics_platform import Platform

from tests.assistant.conftest import Truth, unlabelled_shapes
from tests.datasets.helpers import package, upload_dataset
from tests.servers import Server, lanner_cli, start_server, wait_for

PROPOSAL_CONF = 0.25
UNCHANGED_IOU = 0.9  # a proposal a person would accept as drawn


@dataclass
class Outcome:
    map50: float  # proposals on the unlabelled images against the ground truth
    shown: int  # proposals made on those images
    unchanged: int  # of them, right class and IoU >= 0.9 with a ground-truth box not matched before
    seconds_to_first_proposal: float  # from the answer to the 20th label to the first proposal served
    state: dict[str, Any]  # GET .../assistant once the round was done
    label_next: dict[str, Any]
    scores_checked: list[tuple[float, float]] = field(default_factory=list)  # (stored, recomputed)


def box_iou(a: list[float], b: list[float]) -> float:
    """IoU of two normalized (cx, cy, w, h) boxes."""
    ax0, ay0, ax1, ay1 = a[0] - a[2] / 2, a[1] - a[3] / 2, a[0] + a[2] / 2, a[1] + a[3] / 2
    bx0, by0, bx1, by1 = b[0] - b[2] / 2, b[1] - b[3] / 2, b[0] + b[2] / 2, b[1] + b[3] / 2
    inter = max(0.0, min(ax1, bx1) - max(ax0, bx0)) * max(0.0, min(ay1, by1) - max(ay0, by0))
    union = a[2] * a[3] + b[2] * b[3] - inter
    return inter / union if union > 0 else 0.0


def map50(proposals: dict[str, list[dict[str, Any]]], truth: dict[str, list[dict[str, Any]]]) -> float:
    """Mean over the ground truth's classes of the all-point interpolated AP at IoU 0.5 (VOC/COCO style)."""
    aps = []
    for cls in sorted({t["classId"] for labels in truth.values() for t in labels}):
        total = sum(t["classId"] == cls for labels in truth.values() for t in labels)
        ranked = sorted(((p["confidence"], name, p) for name, ps in proposals.items() for p in ps
                         if p["classId"] == cls), key=lambda x: -x[0])
        used: set[tuple[str, int]] = set()
        hits = []
        for _, name, p in ranked:
            candidates = [(box_iou(p["bbox"], t["bbox"]), i) for i, t in enumerate(truth.get(name, []))
                          if t["classId"] == cls and (name, i) not in used]
            best = max(candidates, default=(0.0, -1))
            if best[0] >= 0.5:
                used.add((name, best[1]))
            hits.append(best[0] >= 0.5)
        tp = np.cumsum(hits) if hits else np.zeros(0)
        recall = np.concatenate([[0.0], tp / total, [1.0]]) if hits else np.array([0.0, 1.0])
        precision = np.concatenate([[1.0], tp / np.arange(1, len(hits) + 1), [0.0]]) if hits else np.array([1., 0.])
        precision = np.maximum.accumulate(precision[::-1])[::-1]
        aps.append(float(np.sum((recall[1:] - recall[:-1]) * precision[1:])))
    return float(np.mean(aps)) if aps else 0.0


def unchanged(proposals: dict[str, list[dict[str, Any]]], truth: dict[str, list[dict[str, Any]]]) -> tuple[int, int]:
    """(shown, accepted unchanged): a proposal is accepted as drawn when it has a ground-truth box's class and
    IoU >= 0.9 with it (each ground-truth box accepts one proposal, best confidence first)."""
    shown = accepted = 0
    for name, ps in proposals.items():
        used: set[int] = set()
        for p in sorted(ps, key=lambda x: -x["confidence"]):
            shown += 1
            for i, t in enumerate(truth.get(name, [])):
                if i not in used and t["classId"] == p["classId"] and box_iou(p["bbox"], t["bbox"]) >= UNCHANGED_IOU:
                    used.add(i)
                    accepted += 1
                    break
    return shown, accepted


def predict(http: httpx.Client, server: Server, key: str, ref: str, image: Path, *, conf: float,
            imgsz: int) -> list[dict[str, Any]]:
    """The model's detections on ``image`` as dataset labels with their confidence."""
    response = http.post(f"{server.url}/api/models/{ref}/predict", headers={"Authorization": f"Bearer {key}"},
                         files={"file": (image.name, image.read_bytes(), "image/jpeg")},
                         data={"conf": str(conf), "imgsz": str(imgsz), "normalize": "true"})
    assert response.status_code == 200, response.text
    rows = response.json()["images"][0]["results"]
    out = []
    for row in rows:
        box = row["box"]
        out.append({"classId": row["class"], "confidence": row["confidence"],
                    "bbox": [(box["x1"] + box["x2"]) / 2, (box["y1"] + box["y2"]) / 2, box["x2"] - box["x1"],
                             box["y2"] - box["y1"]]})
    return out


def start(tmp_path: Path, base_weights: Path | None) -> tuple[Server, str]:
    home = tmp_path / "home"
    home.mkdir(parents=True)
    lanner_cli(home, "users", "create", "alice")
    key = lanner_cli(home, "keys", "create", "alice")
    lanner_cli(home, "credits", "add", "alice", "5")
    if base_weights is not None:  # the operator's official yolo11n: round 1 fine-tunes it
        lanner_cli(home, "models", "add-official", str(base_weights), "--name", "yolo11n")
    return start_server(home, LANNER_SUPERVISOR_INTERVAL_SECONDS="0.5", LANNER_ASSISTANT_POLL_SECONDS="0.5"), key


def session(tmp_path: Path, base_weights: Path | None, *, labels: int = 20, train: int = 40, val: int = 10,
            size: int = 96, epochs: int = 30, timeout: float = 900) -> Outcome:
    server, key = start(tmp_path, base_weights)
    try:
        return _session(tmp_path, server, key, labels=labels, train=train, val=val, size=size, epochs=epochs,
                        timeout=timeout)
    finally:
        server.stop()


def _session(tmp_path: Path, server: Server, key: str, *, labels: int, train: int, val: int, size: int,
             epochs: int, timeout: float) -> Outcome:
    headers = {"Authorization": f"Bearer {key}"}
    data, truth = unlabelled_shapes(tmp_path / "raw", train=train, val=val, size=size, seed=1)
    files = {p.name: p for p in (data.parent / "images").rglob("*.jpg")}
    platform = Platform(base_url=server.url, api_key=key, timeout=60)
    base = f"{server.url}/api/datasets/alice/raw"
    with httpx.Client(timeout=120) as http:
        upload_dataset(platform, http, "alice", "raw", package(data.parent, tmp_path / "zip"))
        shutil.rmtree(tmp_path / "zip")
        enabled = http.put(f"{base}/assistant", headers=headers, json={
            "enabled": True, "minLabels": labels, "epochs": epochs, "imgsz": size, "gpuType": "cpu"})
        assert enabled.status_code == 200, enabled.text
        ids = {i["name"]: i["id"] for i in http.get(f"{base}/images", headers=headers,
                                                      params={"limit": 1000}).json()["images"]}
        keys = {name: image_id.rsplit("-", 1)[1] for name, image_id in ids.items()}
        labelled: list[str] = []
        while len(labelled) < labels:  # as a person in the editor: the image "label next" offers, saved
            name = http.get(f"{base}/label-next", headers=headers, params={"limit": 1}).json()["images"][0]["name"]
            opened = http.get(f"{base}/annotate/{keys[name]}", headers=headers).json()
            saved = http.put(f"{base}/annotate/{keys[name]}", headers=headers, json={
                "labels": truth.labels[name], "revision": opened["revision"], "editId": f"edit-{name}"})
            assert saved.status_code == 200, saved.text
            labelled.append(name)
        last_label = time.perf_counter()
        unseen = sorted(set(ids) - set(labelled))

        def propose(names: list[str]) -> dict[str, list[dict[str, Any]]]:
            """The proposals API, as the editor asks it with the assistant's model."""
            answer = http.post(f"{base}/proposals", headers=headers, json={
                "model": ref, "keys": [keys[n] for n in names], "conf": PROPOSAL_CONF})
            assert answer.status_code == 200, answer.text
            by_key = answer.json()["images"]
            return {n: by_key.get(keys[n], []) for n in names}

        def ready() -> dict[str, Any] | None:
            state = http.get(f"{base}/assistant", headers=headers).json()
            assert state["status"] != "failed", state
            return state if state["model"] is not None else None

        state = wait_for(ready, timeout=timeout, what="the assistant's first round", every=0.5)
        ref = state["model"]["ref"]
        proposals = propose(unseen[:1])
        seconds = time.perf_counter() - last_label
        proposals.update(propose(unseen[1:]))
        truth_unseen = {name: truth.labels[name] for name in unseen}
        shown, accepted = unchanged(proposals, truth_unseen)
        low = {name: predict(http, server, key, ref, files[name], conf=0.05, imgsz=size) for name in unseen}
        score = map50(low, truth_unseen)  # mAP over the whole ranking, down to the scoring floor
        nxt = http.get(f"{base}/label-next", headers=headers, params={"limit": 200}).json()
        checked = [(image["score"], _uncertainty([p["confidence"] for p in low[image["name"]]]))
                   for image in nxt["images"]]
    return Outcome(map50=score, shown=shown, unchanged=accepted, seconds_to_first_proposal=seconds, state=state,
                   label_next=nxt, scores_checked=checked)


def _uncertainty(confidences: list[float]) -> float:
    """``lanner.assistant.scoring.uncertainty`` recomputed from the served confidences (at conf 0.05)."""
    return max((1 - abs(2 * c - 1) for c in confidences), default=1.0)


__all__ = ["Outcome", "Truth", "box_iou", "map50", "session", "unchanged"]
