"""How unsure a model is about an image, from its own predictions: the number "label next" sorts by.

- Boxes, masks, keypoints, rotated boxes: the most ambiguous detection decides, ``1 - |2c - 1|`` for a
  detection of confidence ``c`` (1 at c = 0.5, the model's coin toss; 0 at 0 or 1), over the detections it
  makes at ``SCORE_CONF`` and above. An image where it detects nothing at all scores 1: either it is empty or
  the model misses everything in it, and only a person can tell which. Least-confidence sampling on the single
  worst object, rather than an average, because one doubtful object is what a label of that image fixes.
- Whole-image classes: one minus the margin between the two likeliest classes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

SCORE_CONF = 0.05  # detections below this are noise, not doubt


def _numpy(value: Any) -> np.ndarray:
    return value.cpu().numpy() if hasattr(value, "cpu") else np.asarray(value)


def uncertainty(result: Any) -> float:
    """The uncertainty of one Ultralytics ``Results`` (0: sure, 1: no idea)."""
    if result.probs is not None:
        probs = np.sort(_numpy(result.probs.data).astype(np.float64).reshape(-1))[::-1]
        if probs.size == 0:
            return 1.0
        second = probs[1] if probs.size > 1 else 0.0
        return float(1.0 - (probs[0] - second))
    data = result.obb if result.obb is not None else result.boxes
    confidences = _numpy(data.conf).astype(np.float64) if data is not None and len(data) else np.zeros(0)
    confidences = confidences[confidences >= SCORE_CONF]
    if confidences.size == 0:
        return 1.0
    return float(np.max(1.0 - np.abs(2.0 * confidences - 1.0)))
