"""Where the dataset page leads next, beyond its own forms (issue 31, "every page leads to the next step"): the
Review page, for whoever may read the review scores (a member of the dataset's workspace, a team's viewer
included: the review API's ``members_dataset``; an outsider reading a public dataset is not told the scores
exist), and the collect workflows that fill the dataset from a deployment's uncertain predictions, each
deployment with its count today of the daily cap, linked to it. A deployment of a workspace the visitor is not
in is left out (a team's dataset may be fed by a member's personal deployment), as is the whole line for an
outsider: the page tells no one of deployments they could not open."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from sqlalchemy.orm import Session

from lanner.accounts.principal import Principal
from lanner.datasets.models import Dataset
from lanner.review import service as review_service
from lanner.teams import permissions
from lanner.workflows import views as workflow_views


def offer(request: Request, session: Session, user: Principal, dataset: Dataset, base: str) -> dict[str, Any]:
    """``review_url`` (None: not a member) and ``feeders`` (``workflows.views.feeding``, each with ``url``, the
    model page's deployments table, and for an editor of the deployment ``settings``, its collect page)."""
    if not review_service.is_member(session, user, dataset):
        return {"review_url": None, "feeders": []}
    feeders = []
    for entry in workflow_views.feeding(session, dataset, request.app.state.workflows.clock()):
        role = permissions.role_in(session, user_id=user.user_id, owner_id=entry["owner_id"])
        if role is None:
            continue
        model = f"/{entry['owner']}/{entry['project']}/{entry['model']}"
        feeders.append({**entry, "url": f"{model}#deployments-section",
                        "settings": f"{model}/deployments/{entry['slug']}/collect"
                        if permissions.allows(role, "write") else None})
    return {"review_url": f"{base}/review", "feeders": feeders}
