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
    models) and the price per image; None (no button) for a reader. With no model to use, ``models`` is empty:
    the page shows the button disabled with why and the next step (train one on this dataset), so the feature
    is found before it can be used."""
    if not is_owner:
        return None
    models = proposals.proposal_models(session, user, dataset)
    price = request.app.state.lanner.settings.autolabel_price_per_image
    return {"models": models, "price": price,
            "missing": None if models else f"No {dataset.task} model with weights that you can use yet"}
