"""The composition root: ``create_app()`` builds the request context, the training runtime, the import queue,
the export queue, the maintenance thread, the inference predictor and the endpoint runtime, mounts every
router and ties the threads to the app's lifespan. Used by ``lanner serve``, tests and benchmarks."""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

from fastapi import FastAPI

from lanner import __version__
from lanner.accounts import security
from lanner.accounts.csrf import CsrfProtection
from lanner.accounts.router import router as accounts_router
from lanner.annotation.router import router as annotation_router
from lanner.assistant.loop import AssistantLoop
from lanner.assistant.router import router as assistant_router
from lanner.autolabel.queue import AutolabelQueue
from lanner.autolabel.router import router as autolabel_router
from lanner.billing.router import router as billing_router
from lanner.config import Settings, get_settings
from lanner.context import AppContext
from lanner.datasets.explore_router import router as explore_router
from lanner.datasets.image_router import router as dataset_images_router
from lanner.datasets.imports.queue import ImportQueue
from lanner.datasets.router import router as datasets_router
from lanner.datasets.trash_router import router as dataset_trash_router
from lanner.datasets.version_router import router as dataset_versions_router
from lanner.db.migrate import ensure_migrated
from lanner.deployments.router import router as deployments_router
from lanner.deployments.runtime import DeploymentRuntime
from lanner.embeddings.queue import EmbeddingQueue
from lanner.embeddings.router import router as embeddings_router
from lanner.exports.queue import ExportQueue
from lanner.exports.router import router as exports_router
from lanner.gpus.catalogue import get_catalogue
from lanner.gpus.pools import load_pools
from lanner.http import body_limit, handlers, proxies
from lanner.http.direct_route import FastAPIWithFastLane
from lanner.http.security_headers import SecurityHeaders
from lanner.inference.predictor import Predictor
from lanner.inference.router import router as inference_router
from lanner.integrations import pixels as bucket_pixels
from lanner.integrations.queue import BucketImports
from lanner.integrations.router import router as integrations_router
from lanner.maintenance.loop import Maintenance
from lanner.operator.router import router as operator_router
from lanner.overview.router import router as overview_router
from lanner.periodic import BackgroundLoop
from lanner.projects.router import router as projects_router
from lanner.review.queue import ReviewQueue
from lanner.review.router import router as review_router
from lanner.storage.router import router as storage_router
from lanner.teams.router import router as teams_router
from lanner.training import views as training_views
from lanner.training.estimate_router import router as estimate_router
from lanner.training.router import router as training_router
from lanner.training.router import webhook_router as training_webhook_router
from lanner.training.runtime import TrainingRuntime
from lanner.uploads.router import router as uploads_router
from lanner.uploads.settle import UploadSettler
from lanner.web import site as web_site
from lanner.web.account_pages import router as account_pages
from lanner.web.annotate_pages import router as annotate_pages
from lanner.web.dataset_pages import router as dataset_pages
from lanner.web.dataset_trash_pages import router as dataset_trash_pages
from lanner.web.deploy_pages import router as deploy_pages
from lanner.web.docs_pages import router as docs_pages
from lanner.web.export_pages import router as export_pages
from lanner.web.invitation_pages import router as invitation_pages
from lanner.web.key_pages import router as key_pages
from lanner.web.map_pages import router as map_pages
from lanner.web.operator_pages import router as operator_pages
from lanner.web.project_pages import router as project_pages
from lanner.web.review_pages import router as review_pages
from lanner.web.router import router as web_router
from lanner.web.selection_pages import router as selection_pages
from lanner.web.similar_strip import router as similar_strip
from lanner.web.team_pages import router as team_pages
from lanner.web.train_pages import router as train_pages
from lanner.web.workflow_pages import router as workflow_pages
from lanner.workflows.capture import Collector
from lanner.workflows.router import router as workflows_router

# Hot paths first: FastAPI tries the included routers in order, each costing a few microseconds to pass.
ROUTERS = (training_webhook_router,  # the trainer's metrics webhook (one route): every epoch of every run
           inference_router,  # shared inference's predict
           deployments_router,  # then the dedicated endpoints' predict
           accounts_router, overview_router, billing_router, projects_router, training_router, estimate_router,
           embeddings_router, datasets_router, integrations_router,
           dataset_images_router, dataset_versions_router, dataset_trash_router, annotation_router, uploads_router,
           exports_router, autolabel_router, review_router, storage_router, assistant_router, teams_router,
           workflows_router, web_router, account_pages, key_pages,
           dataset_trash_pages, similar_strip, map_pages, dataset_pages, annotate_pages, selection_pages,
           review_pages, train_pages,
           deploy_pages,
           export_pages,
           team_pages, invitation_pages,
           docs_pages, explore_router, operator_router, operator_pages, workflow_pages,
           project_pages)  # project pages last: /{owner}/{project} is wide


def create_app(settings: Settings | None = None, *, migrate: bool = True, freeze_gc: bool = False,
               prepare_estimates: bool = False) -> FastAPI:
    settings = settings or get_settings()
    ctx = AppContext.from_settings(settings)
    ctx.pixel_locators.append(partial(bucket_pixels.locate, settings=settings))  # bucket datasets' images
    ctx.signer.elsewhere = partial(bucket_pixels.held_elsewhere, ctx.db)  # and their links lead there
    if migrate:
        ensure_migrated(ctx.db)  # Alembic only when a migration is due: one SELECT on a database at head
    catalogue = get_catalogue(settings)  # a bad LANNER_GPU_CATALOGUE stops the server at start, not at first use
    load_pools(settings.pools)  # so does a bad LANNER_POOLS (PoolsError, naming the pool and field)
    security.warm_up()  # an unknown username costs one hash from the first sign-in on
    training = TrainingRuntime(ctx, prepare_estimates=prepare_estimates)
    imports = ImportQueue(ctx)
    bucket_imports = BucketImports(ctx)
    exports = ExportQueue(ctx)
    autolabel = AutolabelQueue(ctx)
    embeddings = EmbeddingQueue(ctx)
    review = ReviewQueue(ctx)
    maintenance = Maintenance(ctx)
    upload_settler = UploadSettler(ctx)
    inference = Predictor.from_settings(settings)  # loads nothing until the first predict
    deployments = DeploymentRuntime(ctx)
    assistant = AssistantLoop(ctx, executor=lambda: training.executor, predictor=inference)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        training.start()
        imports.start()
        bucket_imports.start()
        exports.start()
        autolabel.start()
        embeddings.start()
        review.start()
        maintenance.start()
        upload_settler.start()
        deployments.start()
        assistant.start()
        if freeze_gc:
            # Everything built so far lives as long as the server: out of the collector's sight, a full
            # collection walks only what requests create. Walking all of it took ~100 ms every few seconds
            # under webhook load, the whole p99 (docs/benchmarks.md "Webhook ingest").
            gc.collect()
            gc.freeze()
        yield
        assistant.stop()
        deployments.stop()
        await deployments.forwarder.close()
        upload_settler.stop()
        maintenance.stop()
        autolabel.stop()
        embeddings.stop()
        review.stop()
        exports.stop()
        bucket_imports.stop()
        imports.stop()
        training.stop()
        inference.close()
        ctx.db.dispose()

    app = FastAPIWithFastLane(
        title="Lanner",
        version=__version__,
        description="Self-hosted computer-vision platform, wire-compatible with the Ultralytics Platform API.",
        lifespan=lifespan,
        docs_url=None,  # /docs is lanner.web.docs_pages: Swagger UI vendored, nothing from a CDN
        redoc_url=None,  # ReDoc would load from a CDN too; one reference is enough
    )
    app.state.lanner = ctx
    app.state.training = training
    app.state.imports = imports
    app.state.bucket_imports = bucket_imports
    app.state.exports = exports
    app.state.autolabel = autolabel
    app.state.embeddings = embeddings
    app.state.review = review
    app.state.maintenance = maintenance
    app.state.upload_settler = upload_settler
    app.state.inference = inference
    app.state.deployments = deployments
    app.state.assistant = assistant
    app.state.workflows = Collector(ctx)  # the collect template: uncertain predictions into a dataset
    app.state.model_hooks = training_views.model_hooks(catalogue)  # what projects show of training
    handlers.install(app)
    web_site.install(app)  # static files, the sign-in redirect, errors as pages for browsers
    app.add_middleware(CsrfProtection, secret=ctx.signer.derive_key("csrf"),
                       secure=settings.public_url.startswith("https"))
    app.add_middleware(SecurityHeaders, media_origin=ctx.blobs.link_origin())
    body_limit.install(app, max_bytes=settings.max_body_bytes, overrides=(body_limit.Override(
        settings.inference_paths, settings.inference_max_bytes, "LANNER_INFERENCE_MAX_BYTES"), body_limit.Override(
        settings.endpoint_paths, settings.inference_max_bytes, "LANNER_INFERENCE_MAX_BYTES")))
    proxies.install(app, settings.trusted_proxy_list)  # in front of everything: the address every limit counts
    for router in ROUTERS:
        app.include_router(router)
        app.fast_lane.add(router.routes)  # API clients reach the metrics webhook without the middlewares

    @app.get("/api/health", tags=["meta"])
    def health() -> dict[str, str]:
        return {"status": "ok", "version": __version__}

    logging.getLogger("lanner").setLevel(logging.INFO)
    return app


def background_loops(app: FastAPI) -> dict[str, BackgroundLoop]:
    """Every background loop of ``app`` by name, as they are now (``TrainingRuntime.use_executor`` replaces the
    supervisor): where a status view, or a lease among several server processes, reads their heartbeats."""
    state = app.state
    loops = (state.training.supervisor, state.imports, state.bucket_imports, state.exports, state.autolabel,
             state.embeddings, state.review, state.maintenance, state.upload_settler, state.deployments.supervisor,
             state.deployments.requests, state.assistant)
    return {loop.name: loop for loop in loops}


def create_served_app() -> FastAPI:
    """The factory ``lanner serve`` hands to uvicorn: serve has migrated once already, before any worker. Only
    a served process freezes its start-up objects for the collector and prepares the first estimate in the
    background (a test process builds many apps)."""
    return create_app(migrate=False, freeze_gc=True, prepare_estimates=True)
