"""Two users, every page: alice and bob each own a private dataset (with a version, class names and a dataset in
the trash), a project whose model has a run with metrics and console output, API keys, credit transactions and a
team with a pending invitation, all named ``<user>-secret-...``. Bob, signed in in the browser, opens every
page of the web app, his own and alice's:

- his own pages answer and show his things, and no page, htmx fragment, event stream or download he can reach
  holds anything of alice's (her names, class names, ids, key prefixes, amounts, descriptions, console lines);
- alice's addresses (and his with one of her identifiers in them) answer 404, exactly as the same address with
  names that exist nowhere does: a page tells bob nothing about what alice has, not even that it exists;
- his writes aimed at alice's things (clone, delete, version, restore, revoke, cancel, her team's members and
  invitations) change nothing of hers.

The addresses come from the app's routers (``lanner.app.ROUTERS``), so a new page is covered once it is
classified below, and a route that is not classified fails ``test_every_web_route_is_classified`` with what to
add. The API's own matrix is ``tests/test_route_matrix.py``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from fastapi.routing import APIRoute
from playwright.sync_api import expect

from lanner.accounts import service as accounts_service
from lanner.accounts.principal import Principal
from lanner.app import ROUTERS
from lanner.billing import service as billing_service
from lanner.synthetic import CLASSES, make_detection_dataset
from lanner.teams import queries as team_queries
from lanner.web.templating import money
from tests.ledger import make_run, spend_on
from tests.web.conftest import User, WebServer, a_run, screenshot, signed_in, webhook
from tests.web.pages import token_of
from tests.workflows.test_workflows_sdk import collect_graph

pytestmark = pytest.mark.browser

# Pages without an identifier in the path: the caller's own things, or what every user sees. Each -> what bob's
# answer must show of his own (a template over ``Workspace``'s fields), so a page that shows nothing is caught.
OWN_PAGES: dict[str, str] = {
    "/": "{dataset_name}",  # the dashboard: his datasets, projects, credit
    "/login": "{dataset_name}",  # signed in: straight on to the dashboard
    "/datasets": "{dataset_name}",
    "/datasets/trash": "{trashed_name}",
    "/projects": "{project}",
    "/account": "{topup_description}",
    "/account/keys": "{key_name}",
    "/teams": "{team}",  # his teams
    "/train": "{dataset_name}",  # his datasets to train on
    "/gpus": "h100-sxm",  # the catalogue (the same for everyone) and the estimator's accuracy over all runs
    "/metrics": "lanner_endpoint_requests",  # his endpoints in Prometheus text (the metric names, with none)
    "/docs": "swagger-ui",  # the API reference: the same for everyone, nobody's data
    "/workflows": "{workflow_name}",  # his workspace's saved workflows
}
# Pages for server admins only: anyone else gets 403 and nothing of them (tests/web/test_operator_pages.py checks
# the 403 and what an admin sees; these pages show the server's pools, nobody's own things).
ADMIN_PAGES = frozenset({"/operator/pools"})
# Pages of one thing named by the path: bob's own answer 200 and show the second value; alice's answer 404.
RESOURCE_PAGES: dict[str, str] = {
    "/datasets/{owner}/{slug}": "{class_name}",
    "/datasets/{owner}/{slug}/import-report": "{dataset_name}",
    "/datasets/{owner}/{slug}/images/{image_id}": "{class_name}",
    "/datasets/{owner}/{slug}/annotate": "{dataset_name}",  # on to the first image's editor
    "/datasets/{owner}/{slug}/annotate/{image_key}": "{dataset_name}",
    "/datasets/{owner}/{slug}/compare": "{class_name}",
    "/datasets/{owner}/{slug}/assistant/live": "{class_name}",  # a page's poll; a plain visit goes to the section
    "/datasets/{owner}/{slug}/similar/{image_key}": "{class_name}",  # the similar strip; a plain visit: the image
    "/datasets/{owner}/{slug}/map": "{dataset_name}",  # the map page (no embeddings here: the button to make them)
    "/datasets/{owner}/{slug}/map/points": "{class_name}",  # the map's points, or its state, with the class names
    "/datasets/{owner}/{slug}/review": "{dataset_name}",  # the Review queue's page (no scores here: compute)
    "/datasets/{owner}/{slug}/label-queue": "{dataset}",  # the editor's next unlabelled image (its url, his slug)
    "/{owner:owner}/{project}": "{model}",
    "/{owner:owner}/{project}/-/compare": "{project}",
    "/{owner:owner}/{project}/{model}": "{console}",
    "/{owner:owner}/{project}/{model}/deployments": "{model}",  # the table (it polls its own URL)
    "/{owner:owner}/{project}/{model}/exports": "No export yet",  # the exports list (polled while one runs)
    "/teams/{team}": "{team}",
    "/teams/{team}/activity": "created",  # an admin's (his team's creation); alice's: 404 like a missing team
}
# Pages of a thing neither workspace holds, each with the reason and where its owner's view is tested: checked
# like alice's resource pages (bob gets the 404 of a name that exists nowhere, and nothing of hers).
ABSENT_PAGES: dict[str, str] = {
    "/{owner:owner}/{project}/{model}/deployments/{deployment}/collect": "a deployment's collect settings: the "
    "workspaces' models have no weights to deploy (tests/web/test_collect_browser.py walks its owner's page)",
}
# Server-Sent Events -> the event bob's stream sends first and what it shows (checked like a page); alice's: 404.
STREAMS: dict[str, tuple[str, str]] = {
    "/account/live": ("balance", "available"),
    "/{owner:owner}/{project}/{model}/live": ("run", "{console}"),
}
# Downloads: a redirect to a signed URL (whose content is checked too); 404 for alice's.
DOWNLOADS: set[str] = {"/datasets/{owner}/{slug}/export"}
# Writes naming one of alice's things -> bob's answer, which must be the answer for a name that exists nowhere.
WRITES: dict[str, int] = {
    "/datasets/trash/{dataset_id}/restore": 303,  # back to his trash: "no longer in the trash"
    "/datasets/{owner}/{slug}/clone": 404,
    "/datasets/{owner}/{slug}/delete": 404,
    "/datasets/{owner}/{slug}/versions": 404,
    "/datasets/{owner}/{slug}/assistant": 404,  # the assistant's settings: the owner's only
    "/datasets/{owner}/{slug}/embeddings": 404,  # starts the analysis (the similar strip's button)
    "/datasets/{owner}/{slug}/map/selection": 404,  # stores a lasso's images (her selections: ?sel=, 404 to him)
    "/datasets/{owner}/{slug}/selection/dataset": 404,  # a new dataset of a selection's images (hers: 404)
    "/datasets/{owner}/{slug}/selection/adopt": 404,  # a selection's images added to another dataset (hers: 404)
    "/datasets/{owner}/{slug}/review/compute": 404,  # starts a scores job on her dataset
    "/datasets/{owner}/{slug}/review/next": 404,  # the next image to review (marks it reviewed)
    "/account/keys/{key_id}/revoke": 303,  # back to his keys: "already revoked"
    "/{owner:owner}/{project}/{model}/cancel": 404,
    "/{owner:owner}/{project}/{model}/deployments": 404,
    "/{owner:owner}/{project}/{model}/exports": 404,
    "/{owner:owner}/{project}/{model}/deployments/{deployment}/stop": 404,
    "/{owner:owner}/{project}/{model}/deployments/{deployment}/start": 404,
    "/{owner:owner}/{project}/{model}/deployments/{deployment}/delete": 404,
    "/{owner:owner}/{project}/{model}/deployments/{deployment}/collect": 404,  # its collect settings
    "/workflows/{workflow_id}/delete": 404,  # deletes her workflow (the Workflows page's button)
    "/teams/{team}/members": 404,
    "/teams/{team}/members/{username}": 404,  # his team, her name: not a member, 404 like a name nobody has
    "/teams/{team}/members/{username}/remove": 404,
    "/teams/{team}/leave": 404,
    "/teams/{team}/invitations": 404,
    "/teams/{team}/invitations/{invitation_id}/revoke": 404,
    "/teams/{team}/credit": 404,  # funding her team from his credit: not his team
}
# Writes that name nothing but the caller's own account, each with the reason.
OWN_WRITES: dict[str, str] = {
    "/login": "signs a visitor in: alice's password is the credential",
    "/logout": "ends the caller's own session",
    "/datasets": "creates a dataset in the caller's workspace",
    "/account/keys": "creates a key for the caller",
    "/train": "estimates or launches in the caller's workspace (a launch on alice's dataset: the writes test)",
    "/teams": "creates a team the caller owns",
    "/invitations/accept": "joins the team of the invitation token in the body: the token is the credential",
    "/invitations/{token}/signup": "creates an account (LANNER_SIGNUPS only) that joins the team of the token in "
                                   "the path: the token is the credential (tests/web/test_invitation_signup_pages.py)",
}
# Pages whose path holds a credential, each with the reason: whoever holds it is meant to see what it opens.
TOKEN_PAGES: dict[str, str] = {
    "/invitations/{token}": "an invitation link shows its team and role to whoever opens it, as an admin meant "
                            "by sharing it; an unknown, used, revoked or expired one is one 404 page "
                            "(tests/web/test_team_pages.py)",
    "/invitations/{token}/signup": "the same offer with a sign-up form (LANNER_SIGNUPS) or the message to ask the "
                                   "operator for an account; a spent token is the same 404 page",
}
# Identifiers in the query string: each -> the status bob gets with alice's (the train dialog shows the error
# next to the field: "not found", as for a dataset that does not exist).
QUERY_PAGES: dict[str, int] = {
    "/train?dataset=ul://{owner}/datasets/{slug}": 200,
    "/train?dataset=ul://{owner}/datasets/{slug}&model=ul://{owner}/{project}/{model}": 200,
    "/{owner}/{project}/-/compare?models={model}": 404,
    "/datasets/{owner}/{slug}/compare?base=1&head=0": 404,
    "/datasets/{owner}/{slug}?class=0": 404,
    "/datasets?owner={owner}": 404,  # a workspace's list: the caller's own or a team's they are in
    "/projects?owner={owner}": 404,
    "/datasets?owner={team}": 404,
    "/projects?owner={team}": 404,
    "/workflows?owner={owner}": 404,
    "/workflows?owner={team}": 404,
}
# Path and query parameters -> the ``Workspace`` field that holds their value.
PARAMETERS = {"owner": "username", "slug": "dataset", "image_id": "image_id", "image_key": "image_key",
              "project": "project", "model": "model", "dataset_id": "trashed_id", "key_id": "key_id",
              "deployment": "deployment", "team": "team", "username": "username",
              "invitation_id": "invitation_id", "workflow_id": "workflow_id"}
HTML = {"Accept": "text/html"}
HTMX = {"HX-Request": "true"}


def web_routes() -> set[tuple[str, str]]:
    """(method, path) of every route the web app serves (everything outside /api)."""
    return {(method, route.path) for router in ROUTERS for route in router.routes
            if isinstance(route, APIRoute) and not route.path.startswith("/api/")
            for method in route.methods - {"HEAD"}}


def test_every_web_route_is_classified() -> None:
    known = {("GET", p) for p in [*OWN_PAGES, *RESOURCE_PAGES, *STREAMS, *DOWNLOADS, *TOKEN_PAGES, *ADMIN_PAGES,
                                  *ABSENT_PAGES]}
    known |= {("POST", p) for p in [*WRITES, *OWN_WRITES]}
    missing = sorted(web_routes() - known)
    assert not missing, (f"classify these routes in {__name__}: OWN_PAGES, RESOURCE_PAGES, ABSENT_PAGES, STREAMS, "
                         f"DOWNLOADS or "
                         f"TOKEN_PAGES (GET), WRITES or OWN_WRITES (POST): {missing}")
    gone = sorted(known - web_routes())
    assert not gone, f"these routes no longer exist: drop them from {__name__}: {gone}"
    named = {name for path in [*RESOURCE_PAGES, *STREAMS, *DOWNLOADS, *WRITES, *QUERY_PAGES]
             for name in _parameters(path)}
    assert named <= set(PARAMETERS), f"map these parameters in PARAMETERS: {sorted(named - set(PARAMETERS))}"


@dataclass
class Workspace:
    """One user's private things; ``secrets`` are the strings only a leak would put in another user's page."""

    user: User
    username: str
    dataset: str = ""
    dataset_name: str = ""
    dataset_id: str = ""
    class_name: str = ""
    image_id: str = ""
    image_key: str = ""  # the image's key within its dataset (the editor's address)
    version_description: str = ""
    trashed_name: str = ""
    trashed_id: str = ""
    project: str = ""
    model: str = ""
    model_id: str = ""
    billed_model: str = ""
    console: str = ""
    key_name: str = ""
    deployment: str = ""  # a deployment name (the model has no weights to deploy: a name that exists nowhere)
    key_id: str = ""
    key: str = ""
    topup_description: str = ""
    team: str = ""  # a team the user owns, with a pending invitation
    invitation_id: str = ""
    workflow_id: str = ""  # a saved workflow (its deployment exists nowhere: saved with a block error)
    workflow_name: str = ""
    amounts: list[str] = field(default_factory=list)

    def secrets(self) -> set[str]:
        return {self.username, self.dataset, self.dataset_name, self.dataset_id, self.class_name, self.image_id,
                self.version_description, self.trashed_name, self.trashed_id, self.project, self.model,
                self.model_id, self.billed_model, self.console, self.key_name, self.key_id, self.key,
                self.key[:7], self.user.key, self.user.key[:7], self.topup_description, self.team,
                self.invitation_id, self.workflow_id, self.workflow_name, *self.amounts}

    def url(self, template: str, **others: str) -> str:
        """``template`` with this workspace's values, except the parameters given in ``others``."""
        values = {name: others.get(name, getattr(self, attribute)) for name, attribute in PARAMETERS.items()}
        return re.sub(r"{(\w+)(?::\w+)?}", lambda m: values[m.group(1)], template)


def _parameters(template: str) -> list[str]:
    return re.findall(r"{(\w+)(?::\w+)?}", template)


def _workspace(web_server: WebServer, username: str, folder: Path, *, seed: int, top_up: int, charge: int
               ) -> Workspace:
    """A private dataset (imported by ``lanner datasets import``, its classes renamed), a version and a dataset in
    the trash, a running model with a console line, a charged run, a top-up and a second API key."""
    secret = f"{username}-secret"
    user = web_server.user(username)
    space = Workspace(user, username, dataset=f"{secret}-shapes", dataset_name=f"{secret}-shapes",
                      class_name=f"{secret}-{CLASSES[0]}", version_description=f"{secret}-version",
                      trashed_name=f"{secret}-trashed", project=f"{secret}-project", model=f"{secret}-model",
                      billed_model=f"{secret}-billed", console=f"{secret}-console", key_name=f"{secret}-key",
                      deployment=f"{secret}-endpoint", topup_description=f"{secret}-topup", team=f"{secret}-team",
                      workflow_name=f"{secret}-workflow")
    root = make_detection_dataset(folder / username, train=4, val=2, size=64, seed=seed).parent
    data_yaml = root / "data.yaml"
    names = "".join(f"  {i}: {secret}-{name}\n" for i, name in enumerate(CLASSES))
    data_yaml.write_text(re.sub(r"names:\n(?:  .*\n)+", lambda _: "names:\n" + names, data_yaml.read_text()))
    web_server.cli("datasets", "import", str(root), "--owner", username, "--name", space.dataset_name)

    def ok(method: str, path: str, **body: Any) -> Any:
        response = web_server.api(user, method, path, **({"json": body} if body else {}))
        assert response.status_code < 300, f"{method} {path}: {response.text}"
        return response.json()

    base = f"/api/datasets/{username}/{space.dataset}"
    space.dataset_id = ok("GET", base)["dataset"]["id"]
    space.image_id = ok("GET", f"{base}/images?limit=1")["images"][0]["id"]
    space.image_key = space.image_id.rpartition("-")[2]
    ok("POST", f"{base}/export", description=space.version_description)
    space.trashed_id = ok("POST", "/api/datasets", name=space.trashed_name, visibility="private")["id"]
    ok("DELETE", f"/api/datasets/{username}/{space.trashed_name}")
    space.model_id = a_run(web_server, user, space.model, 5, project=space.project)
    webhook(web_server, user, "console_output", {"chunkId": 2, "content": f"{space.console}\n", "lineCount": 1},
            modelId=space.model_id)
    ok("POST", "/api/teams", name=space.team)
    ok("POST", f"/api/teams/{space.team}/invitations", role="editor")
    with web_server.db.session() as session:
        owner = Principal.of(accounts_service.require_user(session, username=username))
        space.invitation_id = team_queries.pending_invitations(session, owner, space.team)[0]["id"]
    space.workflow_id = ok("PUT", "/api/workflows", name=space.workflow_name, version=0,
                           graph=collect_graph(space.deployment, space.dataset))["id"]
    created = ok("POST", "/api/api-keys", name=space.key_name)
    space.key_id, space.key = created["keyId"], created["key"]
    with web_server.db.session() as session:
        billing_service.top_up(session, user_id=user.user_id, micros=top_up, description=space.topup_description)
    run_id, model_id = make_run(web_server.db, user.user_id, project=space.project, model=space.billed_model)
    spend_on(web_server.db, user.user_id, run_id, model_id, hold=2 * charge, charge=charge)
    space.amounts = [money(top_up, signed=True), money(charge), money(top_up - charge)]  # as the account shows them
    return space


@pytest.fixture(scope="module")
def workspaces(web_server: WebServer, tmp_path_factory: pytest.TempPathFactory) -> tuple[Workspace, Workspace]:
    folder = tmp_path_factory.mktemp("datasets")
    alice = _workspace(web_server, "alice", folder, seed=11, top_up=73_190_000, charge=4_870_000)
    bob = _workspace(web_server, "bob", folder, seed=12, top_up=21_460_000, charge=1_620_000)
    return alice, bob


class Leaks:
    """What bob was shown that is alice's (``secrets``), leaving out what his own request put there."""

    def __init__(self, alice: Workspace, bob: Workspace) -> None:
        self.secrets = alice.secrets() - bob.secrets()  # a key prefix both happen to share is no leak

    def check(self, what: str, body: str) -> None:
        shown = sorted(s for s in self.secrets if s in body and s not in unquote(what))
        assert not shown, f"{what} shows alice's {shown}"


def _body(page: Any, request: Any) -> str:
    """What a script of the page fetched; the browser may have dropped the body already (a later navigation, or
    its cache under load), then the same GET is asked again with the same cookies."""
    try:
        return str(request.response().text())
    except Exception:
        if request.method != "GET":
            raise
        return str(page.request.get(request.url, max_redirects=0).text())


def _visit(page: Any, leaks: Leaks, url: str, expected: str) -> None:
    """Open ``url`` as a page (with whatever it fetches), then as htmx asks for it: 200, ``expected`` shown, no
    leak."""
    fetched: list[Any] = []

    def record(request: Any) -> None:
        fetched.append(request)

    page.on("requestfinished", record)
    response = page.goto(url)
    assert response is not None and response.status == 200, f"{url}: {response and response.status}"
    page.wait_for_load_state("load")
    html = page.content()
    assert expected in html, f"{url} does not show {expected!r}"
    leaks.check(url, html)
    page.remove_listener("requestfinished", record)
    for request in fetched:
        if request.resource_type in ("xhr", "fetch"):
            leaks.check(f"{url} -> {request.url}", _body(page, request))
    fragment = page.request.get(url, headers=HTMX, max_redirects=0)
    assert fragment.status in (200, 204), f"{url} (htmx): {fragment.status}"  # 204: an HX-Redirect (/login)
    leaks.check(f"{url} (htmx)", fragment.text())


def _first_event(page: Any, url: str, event: str) -> str:
    """The data of the first ``event`` of the stream at ``url``, read by the browser's EventSource."""
    return str(page.evaluate("""([url, event]) => new Promise((resolve, reject) => {
        const source = new EventSource(url);
        const timer = setTimeout(() => { source.close(); reject(new Error('no ' + event + ' event')); }, 10000);
        source.addEventListener(event, (e) => { clearTimeout(timer); source.close(); resolve(e.data); });
    })""", [url, event]))


def test_bobs_pages_show_his_things_and_none_of_alices(page: Any, web_server: WebServer,
                                                      workspaces: tuple[Workspace, Workspace]) -> None:
    alice, bob = workspaces
    leaks = Leaks(alice, bob)
    signed_in(page, bob.user)
    pages = {**OWN_PAGES, **{bob.url(path): shown for path, shown in RESOURCE_PAGES.items()},
             **{bob.url(path): "" for path in QUERY_PAGES}}
    for url, shown in pages.items():
        _visit(page, leaks, url, shown.format(**vars(bob)))
    page.goto("/account")  # the amounts looked for are written as the page writes them
    assert all(amount in page.content() for amount in bob.amounts), bob.amounts
    page.goto(bob.url("/train?dataset=ul://{owner}/datasets/{slug}"))
    expect(page.locator("#gpu-table tbody tr").first).to_be_visible()  # his dataset: the estimate

    page.goto(bob.url("/{owner}/{project}/{model}"))  # the live page fills its figures from the stream
    expect(page.locator("[data-live-field=epochs]")).to_have_text("2 / 5")
    for path, (event, shown) in STREAMS.items():
        data = _first_event(page, bob.url(path), event)
        assert shown.format(**vars(bob)) in data, f"{bob.url(path)} ({event}): {data}"
        leaks.check(f"{bob.url(path)} ({event})", data)
    leaks.check("the model page, live", page.content())

    for path in DOWNLOADS:
        url = web_server.url + bob.url(path)
        redirect = page.request.get(url, max_redirects=0)
        assert redirect.status == 303, f"{url}: {redirect.status}"
        download = page.request.get(redirect.headers["location"])
        assert download.status == 200 and bob.class_name in download.text()
        leaks.check(url, download.text())


def _variants(template: str, alice: Workspace, bob: Workspace) -> list[tuple[str, str]]:
    """(alice's address, the same with names that exist nowhere): every identifier hers, then each one of hers in
    bob's address."""
    names = list(dict.fromkeys(_parameters(template)))
    if not names:  # the caller's own (/account/live)
        return []
    ghosts = {name: f"ghost-{name.replace('_', '-')}" for name in names}
    out = [(alice.url(template), alice.url(template, **ghosts))]
    if len(names) > 1:
        for name in names:
            mine = {n: bob.url(f"{{{n}}}") for n in names if n != name}
            out.append((alice.url(template, **mine), alice.url(template, **mine, **{name: ghosts[name]})))
    return out


def _same_answer(alice: Workspace, what: str, answer: Any, ghost_url: str, ghost: Any) -> None:
    """Alice's thing answers as something that does not exist: same status, same body once the names agree."""
    assert answer.status == ghost.status, f"{what}: {answer.status}, but {ghost.status} for {ghost_url}"
    body = ghost.text()
    for name in PARAMETERS:
        body = body.replace(f"ghost-{name.replace('_', '-')}", alice.url(f"{{{name}}}"))
    assert answer.text() == body, f"{what} answers otherwise than {ghost_url}"
    location = answer.headers.get("location")
    assert location == ghost.headers.get("location"), f"{what} redirects to {location}"


def test_alices_addresses_are_404_for_bob(page: Any, web_server: WebServer,
                                          workspaces: tuple[Workspace, Workspace]) -> None:
    alice, bob = workspaces
    leaks = Leaks(alice, bob)
    signed_in(page, bob.user)
    targets = {**{path: 404 for path in [*RESOURCE_PAGES, *STREAMS, *DOWNLOADS, *ABSENT_PAGES]}, **QUERY_PAGES}
    for template, status in targets.items():
        for url, ghost_url in _variants(template, alice, bob):
            for headers in (HTML, HTMX):
                answer = page.request.get(web_server.url + url, headers=headers, max_redirects=0, timeout=10_000)
                assert answer.status == status, f"{url} {headers}: {answer.status}"
                ghost = page.request.get(web_server.url + ghost_url, headers=headers, max_redirects=0)
                _same_answer(alice, f"{url} {headers}", answer, ghost_url, ghost)
                leaks.check(url, answer.text())
    for url in (alice.url(path) for path in RESOURCE_PAGES):  # the pages as the browser shows them
        response = page.goto(url)
        assert response is not None and response.status == 404, url
        expect(page.locator("h1")).to_have_text("Not found")
        leaks.check(url, page.content())
    screenshot(page, "not-found")
    page.goto(alice.url("/train?dataset=ul://{owner}/datasets/{slug}"))
    expect(page.locator("#field-dataset-error")).to_contain_text("not found")
    assert page.locator("#gpu-table").count() == 0  # no estimate: it would tell her image count


def test_bobs_writes_aimed_at_alices_things_change_nothing(page: Any, web_server: WebServer,
                                                           workspaces: tuple[Workspace, Workspace]) -> None:
    alice, bob = workspaces
    leaks = Leaks(alice, bob)
    signed_in(page, bob.user, "/account/keys")
    form = {"csrf_token": token_of(page.content()), "name": "mine now", "description": "mine now"}

    def post(url: str, **fields: str) -> tuple[Any, Any]:
        """The answer, and for a redirect the page it leads to (with its one-time message)."""
        answer = page.request.post(web_server.url + url, form={**form, **fields}, headers=HTML, max_redirects=0)
        location = answer.headers.get("location")
        return answer, page.request.get(web_server.url + location, headers=HTML) if location else None

    for template, status in WRITES.items():
        for url, ghost_url in _variants(template, alice, bob):
            answer, then = post(url)
            assert answer.status == status, f"POST {url}: {answer.status} {answer.text()[:300]}"
            ghost, ghost_then = post(ghost_url)
            _same_answer(alice, f"POST {url}", answer, ghost_url, ghost)
            leaks.check(f"POST {url}", answer.text())
            if then is not None:
                _same_answer(alice, f"POST {url}, then {then.url}", then, ghost_url, ghost_then)
                leaks.check(f"POST {url}, then {then.url}", then.text())
    launch = {"action": "launch", "gpu": "cpu", "epochs": "1", "project": "mine", "name": "mine"}
    for uri, ghost_uri in _variants("ul://{owner}/datasets/{slug}", alice, bob):  # OWN_WRITES' /train
        answer, _ = post("/train", dataset=uri, **launch)
        assert answer.status == 422 and "not found" in answer.text(), f"launch on {uri}: {answer.status}"
        ghost, _ = post("/train", dataset=ghost_uri, **launch)
        _same_answer(alice, f"launch on {uri}", answer, ghost_uri, ghost)
        leaks.check(f"launch on {uri}", answer.text())

    def as_alice(path: str) -> Any:
        response = web_server.api(alice.user, "GET", path)
        assert response.status_code == 200, f"{path}: {response.text}"
        return response.json()

    dataset = as_alice(f"/api/datasets/alice/{alice.dataset}")["dataset"]
    assert [v["version"] for v in dataset["versions"]] == [1]  # not deleted, no version added
    assert alice.trashed_name in str(as_alice("/api/trash"))  # not restored
    assert web_server.api(User("alice", alice.key), "GET", "/api/account/summary").status_code == 200  # not revoked
    model = as_alice(f"/api/models/alice/{alice.project}/{alice.model}/training")
    assert model["job"] is not None and model["job"]["status"] == "running", model  # not cancelled
    assert [m["username"] for m in as_alice(f"/api/teams/{alice.team}/members")["members"]] == ["alice"]
    with web_server.db.session() as session:  # her invitation: still pending
        owner = Principal.of(accounts_service.require_user(session, username="alice"))
        assert [i["id"] for i in team_queries.pending_invitations(session, owner, alice.team)] == [alice.invitation_id]
    names = [d["name"] for d in web_server.api(bob.user, "GET", "/api/datasets/bob").json()["datasets"]]
    assert names == [bob.dataset_name]  # no clone of hers in his workspace
    assert web_server.api(bob.user, "GET", "/api/projects/bob/mine").status_code == 404  # no launch either
    assert [w["id"] for w in as_alice("/api/workflows")["workflows"]] == [alice.workflow_id]  # not deleted
