"""The web app: server-rendered pages (Jinja2) that htmx enhances, a little plain JavaScript in static files, and
uPlot for charts. Pages sit above every domain and call the same service functions as the API routes: a page
shows nothing the API would not show the same user.

Modules
    ``templating``     the Jinja environment, ``render``, ``PageUser``, ``redirect`` and ``flash``, filters
    ``site``           what ``create_app`` installs: /static (content-hashed URLs), the sign-in redirect, error pages
    ``live``           Server-Sent Events that follow a service function (``stream``), for live pages
    ``router``         sign in and out, the home dashboard
    ``account_pages``  the account: credit (live), holds, cost per run, spend chart, transactions
    ``key_pages``      API keys: create (shown once), list, revoke
    ``project_pages``  projects, a project's runs (sortable, compare), the live model page (SSE) and its cancel
    ``annotate_pages`` the label editor's frame; ``static/annotate*.js`` (an SVG canvas of its own, see
                       ``vendor/VENDORED.md``) reads and writes labels through the annotation API only
    ``assistant_panel`` the dataset page's labelling-assistant section: its settings form and what it shows (the
                       view ``GET .../assistant`` answers); ``static/dataset-assistant.js`` draws its chart
    ``deploy_pages``   the model page's endpoints: the deployments table (htmx-polled), deploy/stop/start/delete
    ``export_pages``   the model page's Export: a button per format this server builds, the exports list
                       (htmx-polled while one runs) with downloads; ``model_view`` words the page's cards (units,
                       times, weights and checkpoints); Preview is ``static/preview.js`` on shared inference
    ``team_pages``     teams: yours (and creating one), a team's members, roles, budgets, spend, invitation links
                       and leaving, and its activity log (admins); ``invitation_pages`` an invitation link opened
    ``operator_pages`` the operator's GPU pools (``/operator/pools``, server admins only; linked from ``/gpus``):
                       nodes, runs, typical start, cost against credits per day (``static/operator.js``'s chart)
    ``docs_pages``     the API reference (``/docs``): vendored Swagger UI over ``/openapi.json``, started by
                       ``static/api-docs.js``
    ``workspaces``     which workspace ``/datasets`` and ``/projects`` list (``?owner=`` a team of yours) and the
                       switcher between them
    ``paths``          the ``{owner:owner}`` path convertor the ``/{owner}/...`` pages share
    ``templates/``     ``base.html`` (layout, navigation, messages), pages, ``_name.html`` fragments, ``_macros.html``
    ``static/``        ``lanner.css`` (the design system), ``lanner.js`` (CSRF header, errors, copy buttons),
                       ``live.js``, page scripts (``deployments.js``: latency charts and "try it";
                       ``predictions.js``: a predict answer drawn on a canvas, for "try it" and Preview),
                       ``vendor/`` (htmx 2.0.11, uPlot 1.6.32, Swagger UI 5.36.0: pinned, with licences)

Adding a page
    1. A module ``lanner/web/<thing>_pages.py`` (a name ending in ``_pages`` is held to the router rules: it
       imports no other router or page module), with ``router = APIRouter(include_in_schema=False)``; add it to
       ``app.ROUTERS``. Keep it under 400 lines.
    2. A route takes ``user: PageUser`` (a signed-out visitor is sent to ``/login?next=...`` and comes back) and
       ``session: DbSession``, calls domain services with ``user`` as the principal (``get_dataset(session,
       user, ...)``), never queries tables itself, and returns ``render(request, "thing.html", {...},
       user=user, active="datasets")``. ``active`` marks the navigation entry.
    3. A template ``templates/thing.html`` that ``{% extends "base.html" %}``, fills ``title`` and ``content``
       (and ``head`` for page scripts: ``<script src="{{ static_url('thing.js') }}" defer>``), and imports
       ``{% import "_macros.html" as ui with context %}`` for ``ui.field`` (label, hint, error next to the
       field), ``ui.csrf()``, ``ui.badge``, ``ui.pagination``, ``ui.time``. No inline ``<script>``, ``style=``
       or ``on...=`` attributes: the Content-Security-Policy is ``default-src 'self'``. Styles go in
       ``lanner.css`` as classes (cards, tables, buttons, forms, badges, ``.thumb-grid``, ``.chart``).
    4. Forms post normally (``method="post"`` plus ``{{ ui.csrf() }}``) so the page works without JavaScript,
       and add ``hx-post``/``hx-target`` to swap a fragment: put that part of the page in ``_thing.html``,
       ``{% include %}`` it from the page, and pass ``fragment="_thing.html"`` to ``render`` (an htmx request
       gets the fragment, anything else the page). After a successful post, ``redirect(request, url,
       "message")``; for invalid input render the form again with status 422 and ``errors={"field": "..."}``
       (htmx swaps 422 answers; other errors are shown by ``lanner.js`` in the message area).
    5. ``fetch`` writes from page scripts go through ``lanner.fetch`` (it adds the CSRF header); a multipart
       upload must, since only urlencoded form bodies are read for the token (``lanner.accounts.csrf``).
    6. A live part: a route returning ``live.stream(request, lambda session: service_call(session, ...),
       event="name")`` and ``data-live-src``/``data-live-field`` in the template (see ``live``).
    7. Tests: in-process in ``tests/web/test_<thing>_pages.py`` (``tests.web.pages.sign_in``, BeautifulSoup), and
       the browser (``@pytest.mark.browser``, fixtures in ``tests/web/conftest.py``: a real server, Playwright,
       no request to another host, no console error).
"""
