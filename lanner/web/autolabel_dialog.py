"""What the dataset page's "Auto-annotate" dialog offers (``_dataset_autolabel.html``)."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.annotation import proposals
from lanner.datasets.models import Dataset


def offer(request: Request, session: Session, user: Principal, dataset: Dataset, is_owner: bool
          ) -> dict[str, Any] | None:
    """The models it may use (of the dataset's task, readable by the owner, with weights: the editor's proposal
    models) and the price per image; None (no button) for a reader, or when there is no model to use."""
    if not is_owner:
        return None
    models = proposals.proposal_models(session, user, dataset)
    price = request.app.state.lanner.settings.autolabel_price_per_image
    return {"models": models, "price": price} if models else None
