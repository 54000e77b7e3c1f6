"""Rounds fit the dataset (``rounds.next_round_at``, ``rounds.due``) and the state agrees with the counts
(``service.status``): a 40-image dataset never waits for 64 labels, and "waiting for labels" never shows beside
enough of them."""

from __future__ import annotations

from lanner.assistant import rounds
from lanner.assistant.models import COMPLETED, TRAINING, Assistant, AssistantRound
from lanner.assistant.service import status


def _assistant(min_labels: int = 20, every: int = 25) -> Assistant:
    return Assistant(enabled=True, min_labels=min_labels, every=every)


def _round(labelled: int, state: str = COMPLETED) -> AssistantRound:
    return AssistantRound(round=1, labelled=labelled, status=state)


def test_the_next_round_fits_the_dataset():
    assistant = _assistant()
    assert rounds.next_round_at(assistant, None, 1000) == 20
    assert rounds.next_round_at(assistant, None, 12) == 12  # a smaller dataset: every image labelled
    assert rounds.next_round_at(assistant, _round(20), 1000) == 45
    assert rounds.next_round_at(assistant, _round(39), 40) == 40  # was 64 on a 40-image dataset
    assert rounds.next_round_at(assistant, _round(40), 40) is None  # nothing left to label
    assert rounds.due(assistant, 40, _round(39), 40) and not rounds.due(assistant, 39, _round(39), 40)
    assert not rounds.due(assistant, 40, _round(40), 40)
    assert rounds.due(assistant, 12, None, 12) and not rounds.due(assistant, 11, None, 12)
    assert not rounds.due(assistant, 40, _round(10, TRAINING), 40)


def test_the_state_agrees_with_the_counts():
    assistant = _assistant()
    assert status(assistant, None, labelled=39, next_at=20) == ("starting", None)  # was "waiting" with 39 of 20
    assert status(assistant, None, labelled=19, next_at=20) == ("waiting", None)
    assert status(assistant, _round(39), labelled=40, next_at=None) == ("ready", None)
