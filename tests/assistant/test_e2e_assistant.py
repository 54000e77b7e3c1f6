"""End to end on the CPU: a person labels 20 images of an unlabelled synthetic shapes dataset through the API,
the assistant trains a real round by itself (``lanner serve``, the local executor), fine-tuning the operator's
official yolo11n — here the session's shape localizer, a one-class detector pretrained on other images that finds
shapes but cannot tell circles from squares: what separates them it learns from the person's 20 labels. Then

- the round completes with the run's own mAP50 on labelled validation images, and its proposals on the 30
  images nobody labelled reach mAP50 >= 0.15 against the generator's ground truth (measured 0.32 at 30 epochs,
  96 px; the base model alone proposes nothing here: its only class, "shape", maps to none of the dataset's);
- "label next" offers every unlabelled image, ordered by the uncertainty its model has about each (each score
  recomputed from the model's served confidences).
"""

from __future__ import annotations

import pytest

from tests.assistant.scenario import session

pytestmark = pytest.mark.e2e
MIN_MAP50 = 0.15


def test_the_assistant_trains_on_twenty_labels_and_proposes_on_unseen_images(tmp_path, localizer_weights):
    outcome = session(tmp_path, localizer_weights)
    print(f"mAP50 {outcome.map50:.3f}, unchanged {outcome.unchanged}/{outcome.shown}, "
          f"{outcome.seconds_to_first_proposal:.1f} s, round {outcome.state['rounds']}")
    (first,) = outcome.state["rounds"]
    assert first["status"] == "completed" and first["labelled"] == 20 and first["scored"] == 30
    assert first["mAP50"] is not None and 0 <= first["mAP50"] <= 1  # the run's own, on labelled val images
    assert first["modelRef"] == outcome.state["model"]["ref"] == "alice/raw-assistant/round-1"
    assert outcome.map50 >= MIN_MAP50 and outcome.shown > 0

    nxt = outcome.label_next
    assert nxt["basis"] == "assistant round 1" and len(nxt["images"]) == 30
    scores = [image["score"] for image in nxt["images"]]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) > 1
    for stored, recomputed in outcome.scores_checked:  # the order is the model's own uncertainty
        assert stored == pytest.approx(recomputed, abs=2e-3)
