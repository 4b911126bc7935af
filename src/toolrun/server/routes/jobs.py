"""`/api/v1/jobs`: the user's background jobs (calls of `@tool(background=True)` tools in durable runs).

Jobs exist with `TOOLRUN_DURABLE=dbos`; without it the list is empty and every id is unknown. A user sees
and cancels only their own jobs: another user's id answers 404, as an unknown one does.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Path, Request, Response

from toolrun.server._errors import PROBLEM_RESPONSES, not_found
from toolrun.server.deps import CurrentUser

router = APIRouter(prefix="/api/v1", tags=["jobs"], responses=PROBLEM_RESPONSES)

JobId = Path(min_length=1, max_length=64, description="The job's id (`job_...`).")


def _jobs(request: Request) -> Any:
    return getattr(request.app.state, "toolrun_jobs", None)


@router.get("/jobs")
async def list_jobs(request: Request, user: CurrentUser) -> dict[str, Any]:
    """The user's jobs, newest first: status, progress and (once finished) result."""
    jobs = _jobs(request)
    return {"jobs": [] if jobs is None else await jobs.list_jobs(user.user_id)}


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
    """Cancel one of the user's running jobs (its tool stops within a moment); a finished job stays as
    it is. 202 either way for the user's own job."""
    jobs = _jobs(request)
    job = None if jobs is None else await jobs.cancel(job_id, user.user_id)
    if job is None:
        raise not_found("job")
    return Response(status_code=202)
