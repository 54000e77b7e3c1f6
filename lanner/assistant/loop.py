"""The assistants' background loop: every ``LANNER_ASSISTANT_POLL_SECONDS`` (or at once when a request woke it)
each assistant with work is stepped, in its own transactions, so one broken dataset never stops the others:

1. a training round follows its run (``rounds.watch``);
2. a round whose run completed scores every unlabelled image of the dataset with its model, through shared
   inference's model cache and runtime on this thread, never on a request (``Predictor.run_here``);
3. an enabled assistant with enough new labels starts its next round (``rounds.due``, ``rounds.start``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial

from sqlalchemy import or_, select

from lanner.assistant import rounds, scoring, training_data
from lanner.assistant.models import SCORING, TRAINING, Assistant, AssistantRound
from lanner.context import AppContext
from lanner.datasets import service as datasets_service
from lanner.datasets.models import Dataset, DatasetItem
from lanner.gpus.catalogue import get_catalogue
from lanner.inference.images import decode_image
from lanner.inference.predictor import Predictor, Weights
from lanner.inference.service import DatasetPixels
from lanner.integrations.pixels import ObjectChanged
from lanner.periodic import BackgroundLoop
from lanner.projects.models import ModelRecord
from lanner.training.executors import Executor

log = logging.getLogger("lanner.assistant")
SCORE_BATCH = 16
SCORE_IOU = 0.7


class AssistantLoop(BackgroundLoop):
    def __init__(self, ctx: AppContext, *, executor: Callable[[], Executor], predictor: Predictor) -> None:
        """``executor``: the training runtime's current executor (tests swap it for a fake one)."""
        super().__init__("lanner-assistant", lambda: ctx.settings.assistant_poll_seconds, log,
                         lease=ctx.lease("lanner-assistant"))
        self.ctx = ctx
        self._executor = executor
        self.predictor = predictor

    def one_pass(self) -> None:
        with self.ctx.db.session() as session:
            busy = select(AssistantRound.assistant_id).where(AssistantRound.status.in_((TRAINING, SCORING)))
            ids = list(session.scalars(select(Assistant.id).where(
                or_(Assistant.enabled.is_(True), Assistant.id.in_(busy))).order_by(Assistant.created_at)))
        for assistant_id in ids:
            try:
                self.step(assistant_id)
            except Exception:
                log.exception("assistant %s: pass failed; the next pass retries", assistant_id)

    def step(self, assistant_id: str) -> None:
        with self.ctx.db.session() as session:
            assistant = session.get(Assistant, assistant_id)
            dataset = session.get(Dataset, assistant.dataset_id) if assistant else None
            if assistant is None or dataset is None or dataset.deleted_at is not None:
                return
            last = rounds.latest_round(session, assistant)
            if last is not None and last.status == TRAINING:
                rounds.watch(session, last)
                session.commit()
            if last is not None and last.status == SCORING:
                number = last.round
            else:
                number = None
                labelled = training_data.labelled_count(session, dataset)
                images = datasets_service.dataset_counts(session, dataset)["images"]
                if rounds.due(assistant, labelled, last, images):
                    entry = rounds.start(session, assistant, dataset, labelled,
                                         catalogue=get_catalogue(self.ctx.settings), executor=self._executor(),
                                         executor_name=self.ctx.settings.executor)
                    session.commit()
                    log.info("assistant of dataset %s: round %d %s", dataset.slug, entry.round, entry.status)
        if number is not None:
            self.score(assistant_id, number)

    def score(self, assistant_id: str, number: int) -> None:
        """Score the unlabelled images with round ``number``'s model, then complete the round."""
        settings, blobs = self.ctx.settings, self.ctx.blobs
        with self.ctx.db.session() as session:
            assistant = session.get(Assistant, assistant_id)
            assert assistant is not None
            entry = session.scalar(select(AssistantRound).where(AssistantRound.assistant_id == assistant_id,
                                                                AssistantRound.round == number))
            model = session.get(ModelRecord, entry.model_id) if entry and entry.model_id else None
            dataset = session.get(Dataset, assistant.dataset_id)
            if entry is None or model is None or not model.weights_sha256 or dataset is None:
                return
            digest, imgsz, owner_id = model.weights_sha256, assistant.imgsz, dataset.owner_id
            items = session.execute(select(DatasetItem.key, DatasetItem.sha256).where(
                DatasetItem.manifest_id == dataset.manifest_id, DatasetItem.labels.is_(None),
                DatasetItem.class_id.is_(None)).order_by(DatasetItem.key)).all()
        weights = Weights(digest, partial(blobs.copy_to, digest))
        scores: dict[str, float] = {}
        for start in range(0, len(items), SCORE_BATCH):
            chunk = items[start:start + SCORE_BATCH]
            images, keys = [], []
            with self.ctx.db.session() as session:  # a bucket image is read from its pinned object
                pixels = DatasetPixels(session, settings, blobs, owner_id, listed=True)
                for key, sha in chunk:
                    try:
                        data = pixels.read(sha, max_bytes=settings.inference_max_bytes)
                    except ObjectChanged as changed:  # recorded on its pin; the others are still scored
                        log.warning("assistant %s: image %s not scored: %s", assistant_id, key, changed)
                        continue
                    images.append(decode_image(data, max_pixels=settings.inference_max_pixels, field="image"))
                    keys.append(key)
            results = self.predictor.run_here(weights, images, conf=scoring.SCORE_CONF, iou=SCORE_IOU, imgsz=imgsz)
            scores.update({key: scoring.uncertainty(result) for key, result in zip(keys, results, strict=True)})
        with self.ctx.db.session() as session:
            assistant = session.get(Assistant, assistant_id)
            entry = session.scalar(select(AssistantRound).where(AssistantRound.assistant_id == assistant_id,
                                                                AssistantRound.round == number))
            if assistant is None or entry is None or not rounds.store_scores(session, assistant, entry, scores):
                return
            session.commit()
        log.info("assistant %s: round %d scored %d unlabelled images", assistant_id, number, len(scores))
