"""Server-rendered pages: login and a workspace overview of projects, models and runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.templating import Jinja2Templates
from sqlalchemy import select

from lanner.accounts.dependencies import OptionalPrincipal
from lanner.deps import DbSession
from lanner.projects.models import ModelRecord, Project

templates = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))
STATIC_DIR = Path(__file__).parent / "static"  # the pages' CSS and JS, mounted at /static by create_app
router = APIRouter(include_in_schema=False)


@router.get("/login", response_class=HTMLResponse)
def login_page(request: Request) -> Any:
    return templates.TemplateResponse(request, "login.html", {})


@router.get("/", response_class=HTMLResponse)
def home(request: Request, session: DbSession, principal: OptionalPrincipal) -> Any:
    if principal is None:
        return RedirectResponse("/login", status_code=303)
    projects = list(session.scalars(select(Project).where(Project.owner_id == principal.user_id)
                                    .order_by(Project.created_at.desc())))
    models = list(session.scalars(select(ModelRecord).where(ModelRecord.owner_id == principal.user_id)
                                  .order_by(ModelRecord.created_at.desc())))
    by_project: dict[str, list[ModelRecord]] = {}
    for model in models:
        by_project.setdefault(model.project_id, []).append(model)
    return templates.TemplateResponse(request, "home.html", {
        "username": principal.username, "projects": projects, "models": by_project,
    })
