"""The test session runs in a throwaway workspace (tests/support/workspace.py): whatever a test
writes without naming a workspace, the user's default workspace is left as it was."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from geadmin import audit, db, settings
from tests.support.workspace import REAL_DEFAULT_HOME, SESSION_ROOT_PREFIX


def _state(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return stat.st_size, stat.st_mtime_ns


def test_the_session_workspace_is_a_throwaway_directory_not_the_users() -> None:
    home = settings.home()
    assert SESSION_ROOT_PREFIX in str(home)
    assert home != REAL_DEFAULT_HOME and REAL_DEFAULT_HOME not in home.parents


@pytest.mark.parametrize("unset", [False, True], ids=["GEADMIN_HOME as set", "GEADMIN_HOME unset"])
def test_a_row_written_without_a_workspace_leaves_the_users_default_workspace_untouched(
    unset: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_db = REAL_DEFAULT_HOME / db.DB_FILE
    before = _state(real_db), REAL_DEFAULT_HOME.exists()
    if unset:  # a test (or a child) that clears GEADMIN_HOME falls back to the default: a throwaway too
        monkeypatch.delenv("GEADMIN_HOME")
    entry = audit.record("load", "session_workspace_probe", audit.Result.OK, message="test row")
    assert any(r.id == entry.id for r in audit.query(model="session_workspace_probe"))
    assert SESSION_ROOT_PREFIX in str(db.db_path())
    assert (_state(real_db), REAL_DEFAULT_HOME.exists()) == before
    assert os.environ.get("XDG_DATA_HOME", "").find(SESSION_ROOT_PREFIX) >= 0
