"""The service's settings: environment variables `TOOLRUN_*` (and a `.env` file), read only at the edge.

`Settings()` reads them; `create_app(settings)` and the CLI are the only places that do.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["DEFAULT_DATABASE_URL", "Settings", "SettingsError", "public_model_name"]

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./toolrun.db"


# The model of an "openai-compatible:URL:MODEL" string (the URL's userinfo removed first: "KEY@host").
_URL_MODEL = re.compile(
    r"^https?://(?:\[[^\]/]+\]|[^/:\[\]@]+)(?::\d+)?(?:/[^:]*)?:(?P<model>[^:].*)$", re.IGNORECASE
)
_USERINFO = re.compile(r"^(https?://)[^/?#]*@", re.IGNORECASE)


def public_model_name(spec: str) -> str:
    """What the service shows of a `TOOLRUN_MODEL` string: the provider and the model's name, never a URL.

    `openai-compatible:http://KEY@gateway:8000/v1:llama3.1` → `openai-compatible:llama3.1`; credentials
    and internal hosts stay on the server (the page, `/api/v1/me`, replies and run events all show this).
    """
    spec = spec.strip()
    provider, sep, rest = spec.partition(":")
    if not sep:
        return spec
    if "://" not in rest:
        return spec
    found = _URL_MODEL.match(_USERINFO.sub(r"\1", rest))
    return f"{provider}:{found['model']}" if found else provider


class SettingsError(RuntimeError):
    """The settings cannot work as given (the message says which and what to do)."""


class Settings(BaseSettings):
    """Everything the service reads from its environment.

    Provider keys (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, `OPENAI_BASE_URL`) are read by the model clients
    themselves, under their usual names.
    """

    model_config = SettingsConfigDict(env_prefix="TOOLRUN_", env_file=".env", extra="ignore")

    database_url: str = DEFAULT_DATABASE_URL
    """SQLAlchemy async URL: `sqlite+aiosqlite:///./toolrun.db` (WAL) or `postgresql+asyncpg://...`."""
    redis_url: str | None = None
    """Optional Redis for rate limits and the result cache shared by several processes."""
    redis_prefix: str = "toolrun:"
    """Prefix of every Redis key (give each deployment, and each test, its own)."""
    model: str = "demo"
    """`demo` (offline, deterministic) or an `infer_model` string: `openai:gpt-4o-mini`, `anthropic:...`."""
    secret_key: SecretStr | None = None
    """Key for argument hashes and signatures. Generated and kept in `data_dir` for one machine when unset
    (SQLite only); several processes on PostgreSQL must share one explicitly."""
    data_dir: Path = Path(".toolrun")
    """Where a generated secret key (and the demo user's sign-in token) are kept, mode 0600."""
    github_api: str = "https://api.github.com"
    """The GitHub REST API used by `refresh_attachment` (tests point it at a fake)."""
    github_token: SecretStr | None = None
    """Optional GitHub token for `refresh_attachment`."""
    max_body_bytes: int = Field(default=1_048_576, ge=1024)
    """Largest request body accepted; larger ones get 413."""
    confirmation_ttl: float = Field(default=600.0, gt=0)
    """Seconds a pending confirmation can be approved."""
    run_timeout: float = Field(default=120.0, gt=0)
    """Seconds one run (a message or a decision) may take."""
    lease_seconds: float = Field(default=15.0, gt=0, le=3600)
    """The lease a working run holds on its conversation, renewed by a heartbeat every third of it: a
    conversation left by a killed process is free again this many seconds after its last heartbeat."""
    metrics_token: SecretStr | None = None
    """Bearer token that `/metrics` requires (`Authorization: Bearer TOKEN`)."""
    metrics_public: bool = False
    """Serve `/metrics` to anyone, without a token (for a port only the scraper can reach)."""
    max_steps: int = Field(default=10, ge=1)
    """Model requests per run."""
    instructions: str | None = None
    """Override the system prompt given to real models."""
    app: str | None = None
    """The App served, as `module:attribute` (`TOOLRUN_APP`); default: the task assistant."""
    log_level: str = "INFO"
    """Level of the JSON logs."""
    mcp_max_sessions_per_user: int = Field(default=16, ge=1)
    """Open MCP sessions (at `/mcp`) one user may hold; one more is refused with 429, for that user only."""
    mcp_session_idle_timeout: float = Field(default=600.0, gt=0)
    """Seconds an MCP session may stay unused before it is closed and its place freed."""
    durable: Literal["off", "dbos"] = "off"
    """`dbos`: every chat run is a DBOS workflow (`toolrun.integrations.dbos`, the `dbos` extra): a run that
    a killed process left is finished by the process restarted, or by another one (docs/durable.md)."""
    durable_database_url: str | None = None
    """DBOS's system database (a sync or async SQLAlchemy URL). Default: SQLite `<data_dir>/dbos.sqlite`
    beside a SQLite service database; the service's own database (schema `dbos`) on PostgreSQL."""
    durable_executor_id: str | None = None
    """This process's DBOS executor id; a process restarted with the same id finishes its runs at launch.
    Default: `local` on SQLite (one host); `<host>-<pid>` on PostgreSQL (each process its own)."""
    max_jobs_per_user: int = Field(default=5, ge=1)
    """With `durable=dbos`: background jobs one user may have running at once."""
    job_threads: int | None = Field(default=None, ge=1)
    """With `durable=dbos`: worker threads for the blocking (`def`) tools of background jobs, a pool of
    their own (default `min(32, cpu_count + 4)`), so jobs never take the threads of chat turns' sync tools;
    a job that finds them all taken waits for one."""
    durable_lease_seconds: float = Field(default=30.0, gt=0)
    """With `durable=dbos`: a process silent this long is taken for dead, and one live process finishes
    its runs."""
    max_runs: int = Field(default=256, ge=1)
    """Chat runs one process works on at once; past that, new messages and decisions get `503` with
    `Retry-After: 1` at once instead of queueing (load shedding; docs/service.md)."""
    token_cache_seconds: float = Field(default=5.0, ge=0)
    """How long a process trusts a checked API token before asking the database again (revocations take
    effect within this many seconds)."""
    purge_interval: float = Field(default=3600.0, ge=0)
    """Seconds between two purges of what has expired in the SQL stores (result cache, refilled rate-limit
    buckets, stored results, old confirmations); 0: never (purge some other way). Every process purges."""
    confirmation_retention: float = Field(default=86400.0, ge=0)
    """Seconds a confirmation (decided or not) is kept past its expiry before a purge deletes it: a decided
    one is what closing a run left by a killed process reads to tell "may have run" from "did not run"."""

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    @property
    def is_demo(self) -> bool:
        return self.model.strip() == "demo"

    def resolved_secret(self, *, create: bool = True) -> bytes:
        """The secret key: the setting, else the key kept in `data_dir` (generated on first use, SQLite only).

        Raises:
            SettingsError: on PostgreSQL without `TOOLRUN_SECRET_KEY` (every process must use the same key).
        """
        if self.secret_key is not None:
            value = self.secret_key.get_secret_value().encode()
            if len(value) < 16:
                raise SettingsError("TOOLRUN_SECRET_KEY must be at least 16 characters.")
            return value
        if not self.is_sqlite:
            raise SettingsError(
                "TOOLRUN_SECRET_KEY is required with a shared database: every server process must use the "
                "same key. Generate one with `python -c 'import secrets; print(secrets.token_urlsafe(32))'`."
            )
        path = self.data_dir / "secret_key"
        if path.exists():
            return path.read_bytes().strip()
        if not create:
            raise SettingsError(f"No secret key yet at {path}; run `toolrun db upgrade` or `toolrun serve`.")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        key = secrets.token_urlsafe(32).encode()
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process made it first: use theirs
            return path.read_bytes().strip()
        try:
            os.write(fd, key + b"\n")
        finally:
            os.close(fd)
        return key

    def derived_key(self, purpose: str) -> bytes:
        """A 32-byte key for one purpose (argument hashes, signatures), derived from the secret key."""
        return hmac.new(self.resolved_secret(), purpose.encode(), hashlib.sha256).digest()
