"""`/api/v1/jobs`: the user's background jobs (calls of `@tool(background=True)` tools in durable runs).

Jobs exist with `TOOLRUN_DURABLE=dbos`; without it the list is empty and every id is unknown. A user sees
and cancels only their own jobs: another user's id answers 404, as an unknown one does.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any, Literal

from fastapi import APIRouter, Path, Query, Request, Response

from toolrun.models._history import clean_text
from toolrun.server._errors import PROBLEM_RESPONSES, not_found
from toolrun.server._job_events import job_events
from toolrun.server.deps import CurrentUser
from toolrun.server.events import JobEvent, RunFinished
from toolrun.server.protocols import ai_sdk
from toolrun.server.protocols.ag_ui import AGUIEncoder
from toolrun.server.protocols.ai_sdk import AISDKEncoder
from toolrun.server.sse import SSE_DOC, FramesResponse, pinged

router = APIRouter(prefix="/api/v1", tags=["jobs"], responses=PROBLEM_RESPONSES)

PING_SECONDS = 15.0
"""A quiet `toolrun` jobs stream sends a `: ping` comment this often, so that proxies keep it open."""

JobId = Path(min_length=1, max_length=64, description="The job's id (`job_...`).")


def _jobs(request: Request) -> Any:
    return getattr(request.app.state, "toolrun_jobs", None)


@router.get("/jobs")
async def list_jobs(request: Request, user: CurrentUser) -> dict[str, Any]:
    """The user's jobs, newest first: status, progress and (once finished) result."""
    jobs = _jobs(request)
    return {"jobs": [] if jobs is None else await jobs.list_jobs(user.user_id)}


@router.get("/jobs/events", responses=SSE_DOC)
async def job_stream(
    request: Request,
    user: CurrentUser,
    protocol: Literal["toolrun", "ag-ui", "ai-sdk"] = Query(
        "toolrun",
        alias="format",
        description="`toolrun` SSE (`job_progress`, `job_finished`), AG-UI, or the AI SDK message stream.",
    ),
    until_idle: bool = Query(False, description="End the stream once none of the user's jobs runs."),
) -> Response:
    """The user's background jobs as they change: first each recent job as it stands, then every change.

    `toolrun`: SSE events `job_progress` (a running job started or reported progress) and `job_finished`
    (it ended; once), data the job as `GET /api/v1/jobs/{id}` shows it. `ag-ui`: one run (thread `jobs`)
    whose `CUSTOM` events carry the same names and data. `ai-sdk`: a UI message stream of `data-job`
    parts, one id per job (a newer state replaces the older one).
    """
    events = job_events(_jobs(request), user.user_id, until_idle=until_idle)
    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    frames: AsyncIterator[str]
    if protocol == "toolrun":
        frames = pinged(_toolrun(events), PING_SECONDS)
    else:
        frames = _frames(events, protocol)
        if protocol == "ai-sdk":
            headers = dict(ai_sdk.HEADERS)
    # the stream follows no run and ends only with `until_idle`: it stops when the client goes away
    return FramesResponse(frames, media_type="text/event-stream", headers=headers, until_disconnect=True)


async def _toolrun(events: AsyncIterator[JobEvent]) -> AsyncIterator[str]:
    n = 0
    async for event in events:
        n += 1
        # compact JSON, one `data:` line (line breaks inside strings are escaped), lone surrogates cleaned
        data = clean_text(json.dumps(event.data(), ensure_ascii=False, separators=(",", ":")))
        yield f"id: jobs:{n}\r\nevent: {event.kind}\r\ndata: {data}\r\n\r\n"


async def _frames(events: AsyncIterator[JobEvent], protocol: str) -> AsyncIterator[str]:
    """One AG-UI run, or one AI SDK message, carrying the job events; finished when the stream ends."""
    run_id = f"jobs_{uuid.uuid4().hex}"
    encoder: AGUIEncoder | AISDKEncoder
    if protocol == "ag-ui":
        encoder = AGUIEncoder(thread_id="jobs", run_id=run_id)
        frames = encoder.run_started()
    else:
        encoder = AISDKEncoder(message_id=run_id)
        frames = encoder.start()
    for frame in frames:
        yield frame
    async for event in events:
        for frame in encoder.feed(event):
            yield frame
    for frame in encoder.feed(RunFinished(run_id=run_id, response={"status": "completed"})):
        yield frame


@router.get("/jobs/{job_id}")
async def get_job(request: Request, user: CurrentUser, job_id: str = JobId) -> dict[str, Any]:
    """One of the user's jobs."""
    jobs = _jobs(request)
    job = None if jobs is None else await jobs.get(job_id, user.user_id)
    if job is None:
        raise not_found("job")
    return dict(job)


@router.delete("/jobs/{job_id}", status_code=202, response_class=Response)
async def cancel_job(request: Request, user: CurrentUser, job_id: str = JobId) -> Response:
    """Cancel one of the user's running jobs: it is `cancelling` until its tool has stopped (an async
    tool within a moment, a blocking one when its thread returns), and keeps its place in the user's
    job limit until then. A finished job stays as it finished. 202 either way for the user's own job."""
    jobs = _jobs(request)
    job = None if jobs is None else await jobs.cancel(job_id, user.user_id)
    if job is None:
        raise not_found("job")
    return Response(status_code=202)
