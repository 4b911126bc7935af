"""Reading a GitHub pull request or issue (title, state, updated time) for `refresh_attachment`.

Failures are `ToolError`s the model can act on: 429 (or 403 with an exhausted rate limit) →
`RATE_LIMITED` (retryable, `details["retry_after"]` seconds); 403 → `FORBIDDEN`; 404 → `NOT_FOUND`;
a timeout or an unreachable API → `UPSTREAM_UNAVAILABLE` (retryable). Every request is time-boxed.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

import httpx

from toolrun.results import ToolError

__all__ = ["GitHubClient", "GitHubRef", "parse_github_url"]

_URL = re.compile(
    r"^https://github\.com/(?P<owner>[A-Za-z0-9-]{1,39})/(?P<repo>[A-Za-z0-9._-]{1,100})/"
    r"(?P<kind>pull|issues)/(?P<number>[0-9]{1,9})/?(?:[?#].*)?$"
)


@dataclass(frozen=True, kw_only=True)
class GitHubRef:
    """A pull request or issue named by a github.com URL."""

    owner: str
    repo: str
    kind: str  # "pull" or "issue"
    number: int

    @property
    def api_path(self) -> str:
        segment = "pulls" if self.kind == "pull" else "issues"
        return f"/repos/{self.owner}/{self.repo}/{segment}/{self.number}"


def parse_github_url(url: str) -> GitHubRef | None:
    """The pull request or issue a URL names, or None for any other URL."""
    m = _URL.match(url.strip())
    if m is None:
        return None
    kind = "pull" if m["kind"] == "pull" else "issue"
    return GitHubRef(owner=m["owner"], repo=m["repo"], kind=kind, number=int(m["number"]))


class GitHubClient:
    """A small client for the GitHub REST API (or a fake of it, in tests).

    Args:
        api_url: The API's base URL (`TOOLRUN_GITHUB_API`, default `https://api.github.com`).
        token: An optional token (higher rate limits, private repositories).
        timeout: Seconds for the whole request.
        transport: An httpx transport (tests).
    """

    def __init__(
        self,
        api_url: str = "https://api.github.com",
        *,
        token: str | None = None,
        timeout: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self.timeout = timeout
        headers = {"Accept": "application/vnd.github+json", "User-Agent": "toolrun-tasks"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._client = httpx.AsyncClient(
            base_url=self.api_url, headers=headers, timeout=timeout, transport=transport
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def fetch(self, ref: GitHubRef) -> dict[str, Any]:
        """`{"title", "state", "updated_at"}` of the pull request or issue; raises `ToolError`."""
        try:
            response = await self._client.get(ref.api_path)
        except httpx.TimeoutException:
            raise ToolError(
                "UPSTREAM_UNAVAILABLE",
                f"GitHub did not answer within {self.timeout:g} seconds.",
                retryable=True,
                recover_action="Try refreshing again in a minute.",
            ) from None
        except httpx.HTTPError:
            raise ToolError(
                "UPSTREAM_UNAVAILABLE",
                "GitHub could not be reached.",
                retryable=True,
                recover_action="Try refreshing again later.",
            ) from None
        status = response.status_code
        remaining = response.headers.get("x-ratelimit-remaining")
        if status == 429 or (status == 403 and remaining == "0"):
            retry_after = _retry_after(response)
            raise ToolError(
                "RATE_LIMITED",
                f"GitHub's rate limit is exhausted; retry in about {retry_after} seconds.",
                retryable=True,
                recover_action=f"Wait {retry_after} seconds, then call refresh_attachment again.",
                details={"retry_after": retry_after},
            )
        if status == 403:
            raise ToolError(
                "FORBIDDEN",
                "GitHub refused access to this pull request or issue.",
                recover_action="Tell the user the repository is private or the token lacks access.",
            )
        if status == 404:
            raise ToolError(
                "NOT_FOUND",
                "GitHub has no such pull request or issue (or it is private).",
                recover_action="Check the URL with the user.",
            )
        if status >= 400:
            raise ToolError(
                "UPSTREAM_UNAVAILABLE",
                f"GitHub answered with HTTP {status}.",
                retryable=status >= 500,
                recover_action="Try again later.",
            )
        try:
            data = response.json()
        except ValueError:
            raise ToolError(
                "UPSTREAM_UNAVAILABLE", "GitHub sent a reply that is not JSON.", retryable=True
            ) from None
        if not isinstance(data, dict):
            raise ToolError("UPSTREAM_UNAVAILABLE", "GitHub sent an unexpected reply.", retryable=True)
        state = data.get("state")
        if ref.kind == "pull" and data.get("merged_at"):
            state = "merged"
        title = data.get("title")
        updated = data.get("updated_at")
        return {
            "title": title if isinstance(title, str) else None,
            "state": state if isinstance(state, str) else None,
            "updated_at": updated if isinstance(updated, str) else None,
        }


def _retry_after(response: httpx.Response) -> int:
    header = response.headers.get("retry-after")
    if header is not None and header.strip().isdigit():
        return max(1, int(header.strip()))
    reset = response.headers.get("x-ratelimit-reset")
    if reset is not None and reset.strip().isdigit():
        return max(1, int(reset.strip()) - int(time.time()))
    return 60
