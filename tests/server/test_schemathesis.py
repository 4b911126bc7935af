"""Schemathesis over /openapi.json against a real uvicorn: no 5xx, every response matches its schema
(status code, content type, body), and requests that break the schema are refused. Bounded: a few examples
per operation and mode, so the suite stays fast (`st run URL/openapi.json -c all -n 300` is the long run)."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hypothesis
import pytest
import schemathesis
import uvicorn
from hypothesis import HealthCheck, given
from schemathesis.checks import positive_data_acceptance

from toolrun.server import Settings, create_app
from toolrun.server._db import create_engine
from toolrun.server._users import UserStore
from toolrun.server.migrate import upgrade

from .conftest import sqlite_settings

pytestmark = pytest.mark.slow

MAX_EXAMPLES = 12


def accepted_unless_nul(ctx: Any, response: Any, case: Any) -> bool | None:
    """`positive_data_acceptance`, but for the one rule JSON Schema cannot state of a free-form object: no
    NUL (U+0000) in any key or string at any depth of a client's arguments (PostgreSQL's JSON cannot hold
    one). Such a request is refused with a 422 that names the place; every other valid one is accepted."""
    if response.status_code == 422 and "holds a NUL character" in response.text:
        return None
    return positive_data_acceptance(ctx, response, case)


FREE_FORM_ARGUMENTS = {
    "POST /api/v1/approval-rules",
    "POST /api/v1/confirmations/{confirmation_id}",
    "POST /api/v1/confirmations/{confirmation_id}/stream",
    "POST /api/v1/confirmations/{confirmation_id}/preview",
}


async def _prepare(settings: Settings) -> str:
    await upgrade(settings.database_url)
    engine = create_engine(settings.database_url)
    try:
        _, token = await UserStore(engine).add("fuzzer")
    finally:
        await engine.dispose()
    return token


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, dict[str, Any]]]:
    tmp: Path = tmp_path_factory.mktemp("fuzz")
    settings = sqlite_settings(tmp)
    token = asyncio.run(_prepare(settings))
    app = create_app(settings)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None, access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(500):
        if server.started:
            break
        threading.Event().wait(0.02)
    assert server.started
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}", token, app.openapi()
    server.should_exit = True
    thread.join(timeout=20)


@pytest.mark.timeout(240)
def test_every_operation_answers_by_its_schema(served: tuple[str, str, dict[str, Any]]) -> None:
    url, token, spec = served
    schema = schemathesis.openapi.from_dict(spec)
    headers = {"Authorization": f"Bearer {token}"}
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 14
    failures: list[str] = []
    unbreakable: list[str] = []
    # Both modes: valid requests, and requests that break the schema (which must be refused with a
    # documented 4xx, never accepted: a date filter of `0.5` once was, as a Unix time).
    modes = (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE)
    for operation, mode in itertools.product(operations, modes):

        @given(case=operation.as_strategy(mode, headers=headers))
        @hypothesis.settings(
            max_examples=MAX_EXAMPLES,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            database=None,
            derandomize=True,
        )
        def check(case: Any) -> None:
            if f"{case.method.upper()} {case.path}" in FREE_FORM_ARGUMENTS:
                case.call_and_validate(
                    base_url=url,
                    headers=headers,
                    excluded_checks=[positive_data_acceptance],
                    additional_checks=[accepted_unless_nul],
                )
            else:
                case.call_and_validate(base_url=url, headers=headers)

        try:
            check()
        except hypothesis.errors.Unsatisfiable:
            if mode is not schemathesis.GenerationMode.NEGATIVE:
                raise
            unbreakable.append(f"{operation.method.upper()} {operation.path}")  # no parameter, no body
        except BaseException as exc:
            failures.append(f"{operation.method.upper()} {operation.path} ({mode.value}): {exc}"[:2000])
    assert failures == [], "\n\n".join(failures)
    # Only the operations that take nothing have no wrong request to send; the others all had theirs.
    takes_nothing = {
        f"{method.upper()} {path}"
        for path, item in spec["paths"].items()
        for method, operation in item.items()
        if not operation.get("parameters") and "requestBody" not in operation
    }
    assert sorted(unbreakable) == sorted(takes_nothing)
    assert len(operations) - len(unbreakable) >= 9
