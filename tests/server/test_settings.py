"""Settings: the secret key is generated once per machine (SQLite) and required on a shared database."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolrun.server import Settings, SettingsError


def test_secret_key_is_generated_once_and_kept_private(tmp_path: Path) -> None:
    s = Settings(_env_file=None, data_dir=tmp_path / "d")  # type: ignore[call-arg]
    key = s.resolved_secret()
    path = tmp_path / "d" / "secret_key"
    assert path.stat().st_mode & 0o777 == 0o600
    assert len(key) >= 32
    assert Settings(_env_file=None, data_dir=tmp_path / "d").resolved_secret() == key  # type: ignore[call-arg]
    assert s.derived_key("a") != s.derived_key("b") and len(s.derived_key("a")) == 32


def test_a_shared_database_needs_an_explicit_key(tmp_path: Path) -> None:
    pg = "postgresql+asyncpg://postgres@127.0.0.1:5432/x"
    with pytest.raises(SettingsError, match="TOOLRUN_SECRET_KEY is required"):
        Settings(_env_file=None, database_url=pg, data_dir=tmp_path).resolved_secret()  # type: ignore[call-arg]
    s = Settings(_env_file=None, database_url=pg, secret_key="k" * 32)  # type: ignore[call-arg]
    assert s.resolved_secret() == b"k" * 32
    with pytest.raises(SettingsError, match="at least 16"):
        Settings(_env_file=None, secret_key="short").resolved_secret()  # type: ignore[call-arg]


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLRUN_MODEL", "openai:gpt-4o-mini")
    monkeypatch.setenv("TOOLRUN_MAX_BODY_BYTES", "2048")
    s = Settings(_env_file=None)  # type: ignore[call-arg]
    assert s.model == "openai:gpt-4o-mini" and not s.is_demo and s.max_body_bytes == 2048
