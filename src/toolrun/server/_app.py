"""`create_app(settings, app=app)`: the one place that wires settings, database, stores, executor, agent
and routes around one `App` (the task assistant, `DEFAULT_APP`, when none is given)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.openapi.utils import get_openapi

import toolrun
from toolrun.agent import Agent
from toolrun.models import Model, infer_model
from toolrun.registry import ToolRegistry
from toolrun.runtime import ToolExecutor
from toolrun.server._apps import App, AppResources, app_prompt, check_panel, load_app, resolve_tools
from toolrun.server._audit_sink import SQLAuditSink
from toolrun.server._db import create_engine
from toolrun.server._demo import generic_demo_model
from toolrun.server._errors import PROBLEM_RESPONSES, Problem, install_error_handlers
from toolrun.server._maintenance import Maintenance
from toolrun.server._middleware import RequestMiddleware
from toolrun.server._observe import Observer
from toolrun.server._service import ChatService
from toolrun.server._settings import Settings, public_model_name
from toolrun.server._state import ServerState
from toolrun.server._users import UserStore
from toolrun.server.routes import (
    ag_ui,
    ai_sdk,
    app_face,
    approval_rules,
    chat,
    confirmations,
    conversations,
    health,
    jobs,
    results,
    tools,
    web,
)
from toolrun.store.sql import (
    SQLApprovalRuleStore,
    SQLArtifactStore,
    SQLCache,
    SQLConfirmationStore,
    SQLRateLimitStore,
)
from toolrun.tools import Tool

__all__ = ["ROUTERS", "ServerState", "create_app"]

ROUTERS: tuple[APIRouter, ...] = (
    health.router,
    chat.router,
    confirmations.router,
    approval_rules.router,
    conversations.router,
    tools.router,
    app_face.router,
    jobs.router,
    ag_ui.router,
    ai_sdk.router,
    results.router,
    web.router,
)
"""Every router of the service, registered in this order. A new resource: `routes/<resource>.py` with a
`router`, and one line here. An App's own routers come after these, under `/api/v1`."""


def _model(settings: Settings, model: Model | None, served: App) -> tuple[Model, str, bool]:
    if model is not None:
        return model, model.name, False
    if settings.is_demo:
        demo: Any = served.demo_model
        if demo is None:
            demo = generic_demo_model()
        elif not hasattr(demo, "request"):  # a factory: a model of this app's own
            demo = demo()
        return demo, "demo", True
    built = infer_model(settings.model)
    return built, public_model_name(settings.model), False


def create_app(
    settings: Settings,
    *,
    app: App | str | None = None,
    model: Model | None = None,
    extra_tools: Sequence[Tool] = (),
    observer: Observer | None = None,
) -> FastAPI:
    """The service of one App as an ASGI app. Run `toolrun db upgrade --app ...` (or
    `toolrun.server.migrate.upgrade(url, app=app)`) first.

    Args:
        settings: The service's settings (`Settings()` reads the environment).
        app: The App served, or its `module:attribute`; default `settings.app`, else the task assistant.
        model: A model instance instead of `settings.model` (tests, embedding).
        extra_tools: Tools served next to the app's.
        observer: Logs and metrics (default: a new one with its own Prometheus registry).

    Raises:
        AppError: the app cannot be loaded or served (its panel tool is missing or not read-only, ...).
    """
    served = load_app(app if app is not None else settings.app)
    engine = create_engine(settings.database_url)
    resources = AppResources(engine=engine, settings=settings)
    hash_key = settings.derived_key("toolrun-arguments")
    obs = observer if observer is not None else Observer()
    closers: list[Any] = []
    confirmations_store = SQLConfirmationStore(engine)
    if settings.redis_url:
        from toolrun.store.redis import create_redis_stores

        redis_stores = create_redis_stores(settings.redis_url, key_prefix=settings.redis_prefix)
        rate_limits: Any = redis_stores.rate_limits
        cache: Any = redis_stores.cache
        closers.append(redis_stores)
    else:
        rate_limits = SQLRateLimitStore(engine)
        cache = SQLCache(engine)
    own_tools, toolsets = resolve_tools(served, resources)
    chosen, model_name, demo = _model(settings, model, served)
    prompt = None if demo else app_prompt(served.instructions, settings.instructions)
    registry = ToolRegistry([*own_tools, *extra_tools, *(prompt.tools if prompt is not None else ())])
    if not toolsets:  # else checked at start, once the toolsets' tools are in
        check_panel(served, registry)
    if obs.tools is None:
        obs.tools = registry  # metric labels: registered tool names only
    audit = SQLAuditSink(engine, on_drop=obs.audit_records_dropped)
    executor = ToolExecutor(
        registry,
        confirmations=confirmations_store,
        rate_limits=rate_limits,
        cache=cache,
        hash_key=hash_key,
        audit=audit,
        audit_logger=None,  # one log line per call comes from the service (with run and conversation ids)
        confirmation_ttl=settings.confirmation_ttl,
        approval_rules=SQLApprovalRuleStore(engine),
        artifacts=SQLArtifactStore(engine),  # shared by every process, kept across restarts
    )
    durable = None
    build_agent: Any = Agent
    if settings.durable == "dbos":  # runs as DBOS workflows (imports dbos only when asked for)
        from toolrun.server._durable import DurableRuntime

        durable = DurableRuntime(settings)
        build_agent = durable.agent
    agent = build_agent(
        chosen,
        registry,
        executor=executor,
        prompt=prompt,
        max_steps=settings.max_steps,
        timeout=settings.run_timeout,
    )
    service = ChatService(
        engine=engine,
        agent=agent,
        confirmations=confirmations_store,
        model_name=model_name,
        demo=demo,
        run_timeout=settings.run_timeout,
        observer=obs,
        max_runs=settings.max_runs,
        lease_seconds=settings.lease_seconds,
    )
    state = ServerState(
        settings=settings,
        engine=engine,
        users=UserStore(engine, cache_seconds=settings.token_cache_seconds),
        app=served,
        resources=resources,
        registry=registry,
        executor=executor,
        agent=agent,
        chat=service,
        observer=obs,
        audit=audit,
        model_name=model_name,
        demo=demo,
        closers=closers,
    )

    if durable is not None:
        durable.bind(service)
    maintenance = Maintenance(
        confirmations=confirmations_store,
        cache=cache,
        rate_limits=rate_limits,
        artifacts=executor.artifacts,
        interval=settings.purge_interval,
        retention=settings.confirmation_retention,
        on_purged=lambda store, rows: obs.purged_rows.labels(store).inc(rows),
    )

    @contextlib.asynccontextmanager
    async def lifespan(fastapi_app: FastAPI) -> AsyncIterator[None]:
        try:
            for toolset in toolsets:  # remote tools (MCPToolset): fetched once, served like the others
                await toolset.register(registry)
            if toolsets:
                check_panel(served, registry)
        except BaseException:
            for toolset in toolsets:
                with contextlib.suppress(Exception):
                    await toolset.aclose()
            raise
        if durable is not None:
            durable.start()
        maintenance.start()
        try:
            yield
        finally:
            await maintenance.stop()
            await service.aclose(grace=settings.run_timeout)
            if durable is not None:
                durable.stop()
            await audit.aclose()
            await executor.aclose()
            for toolset in toolsets:
                with contextlib.suppress(Exception):
                    await toolset.aclose()
            for close in resources.closers:
                with contextlib.suppress(Exception):
                    await close()
            closer = getattr(chosen, "aclose", None)
            if model is None and closer is not None:  # the model client this app made (its connections)
                with contextlib.suppress(Exception):
                    await closer()
            for closer in closers:
                with contextlib.suppress(Exception):
                    await closer.aclose()
            await engine.dispose()

    api = FastAPI(
        title=served.title,
        version=toolrun.__version__,
        summary=f"{served.title}: a chat API with tools, streaming and confirmations (toolrun).",
        lifespan=lifespan,
    )
    api.state.toolrun = state
    api.state.toolrun_jobs = durable.jobs if durable is not None else None
    install_error_handlers(api)
    for router in ROUTERS:
        api.include_router(router)
    for router in served.routers:  # its errors are the service's problem+json too: documented as such
        api.include_router(router, prefix="/api/v1", responses=PROBLEM_RESPONSES)
    api.add_middleware(RequestMiddleware, observer=obs, max_body_bytes=settings.max_body_bytes)

    def openapi() -> dict[str, Any]:
        if api.openapi_schema is None:
            schema = get_openapi(title=api.title, version=api.version, summary=api.summary, routes=api.routes)
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            problem = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
            components.update(problem.pop("$defs", {}))
            components["Problem"] = problem
            api.openapi_schema = schema
        return api.openapi_schema

    api.openapi = openapi  # type: ignore[method-assign]
    return api
