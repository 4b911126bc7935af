"""`create_app(settings)`: the one place that wires settings, database, stores, executor, agent and routes."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.openapi.utils import get_openapi

import toolrun
from toolrun.agent import Agent
from toolrun.apps.tasks import GitHubClient, TaskStore, create_demo_model, task_tools
from toolrun.models import Model, infer_model
from toolrun.registry import ToolRegistry
from toolrun.runtime import ToolExecutor
from toolrun.server._audit_sink import SQLAuditSink
from toolrun.server._db import create_engine
from toolrun.server._errors import Problem, install_error_handlers
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
    approval_rules,
    chat,
    confirmations,
    conversations,
    health,
    jobs,
    results,
    tasks,
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
    tasks.router,
    jobs.router,
    ag_ui.router,
    ai_sdk.router,
    results.router,
    web.router,
)
"""Every router of the service, registered in this order. A new resource: `routes/<resource>.py` with a
`router`, and one line here."""

INSTRUCTIONS = (
    "You are a task assistant. You manage the user's tasks with the tools you have: create, update, "
    "query and delete tasks, and manage their attachments. Find a task's id with query_tasks before "
    "changing it. Deleting needs the user's confirmation: the tool asks for it, so do not ask twice. "
    "Answer briefly. Today is {today}."
)


def _model(settings: Settings, model: Model | None) -> tuple[Model, str, bool]:
    if model is not None:
        return model, model.name, False
    if settings.is_demo:
        return create_demo_model(), "demo", True
    built = infer_model(settings.model)
    return built, public_model_name(settings.model), False


def create_app(
    settings: Settings,
    *,
    model: Model | None = None,
    extra_tools: Sequence[Tool] = (),
    github: GitHubClient | None = None,
    observer: Observer | None = None,
) -> FastAPI:
    """The service as an ASGI app. Run `toolrun db upgrade` (or `toolrun.server.migrate.upgrade`) first.

    Args:
        settings: The service's settings (`Settings()` reads the environment).
        model: A model instance instead of `settings.model` (tests, embedding).
        extra_tools: Tools served next to the task tools.
        github: The GitHub client of `refresh_attachment` (default: from the settings).
        observer: Logs and metrics (default: a new one with its own Prometheus registry).
    """
    engine = create_engine(settings.database_url)
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
    gh = github
    if gh is None:
        token = settings.github_token.get_secret_value() if settings.github_token else None
        gh = GitHubClient(settings.github_api, token=token)
    task_store = TaskStore(engine)
    registry = ToolRegistry([*task_tools(task_store, gh), *extra_tools])
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
    chosen, model_name, demo = _model(settings, model)
    instructions = settings.instructions or INSTRUCTIONS.format(today=datetime.now(UTC).date().isoformat())
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
        instructions=None if demo else instructions,
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
        tasks=task_store,
        registry=registry,
        executor=executor,
        agent=agent,
        chat=service,
        observer=obs,
        audit=audit,
        github=gh,
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
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
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
            if github is None:
                await gh.aclose()
            closer = getattr(chosen, "aclose", None)
            if model is None and closer is not None:  # the model client this app made (its connections)
                with contextlib.suppress(Exception):
                    await closer()
            for closer in closers:
                with contextlib.suppress(Exception):
                    await closer.aclose()
            await engine.dispose()

    app = FastAPI(
        title="toolrun",
        version=toolrun.__version__,
        summary="The task assistant: a chat API with tools, streaming and confirmations.",
        lifespan=lifespan,
    )
    app.state.toolrun = state
    app.state.toolrun_jobs = durable.jobs if durable is not None else None
    install_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    app.add_middleware(RequestMiddleware, observer=obs, max_body_bytes=settings.max_body_bytes)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, summary=app.summary, routes=app.routes)
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            problem = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
            components.update(problem.pop("$defs", {}))
            components["Problem"] = problem
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app
