"""The test session's own workspace: no test writes to the user's.

Imported by tests/conftest.py before any test module: `isolate()` points GEADMIN_HOME and
XDG_DATA_HOME (where the default workspace lives when GEADMIN_HOME is unset) at a throwaway
directory, for this process and every child it starts (`geadmin up`, the dashboard, the
CLI in a subprocess). A test that needs another workspace still sets GEADMIN_HOME itself;
one that unsets it falls back to the throwaway default, never to ~/.local/share/geadmin.

`REAL_DEFAULT_HOME` is where the user's default workspace is, computed from the environment
the session started with: tests/unit/test_session_workspace.py checks it is never touched.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

from geadmin import settings

# The user's workspace as the session's first process saw it, for its children: an xdist
# worker inherits the throwaway GEADMIN_HOME and would otherwise take that for the user's.
ORIGINAL_HOME_VARIABLE = "TESTS_USERS_WORKSPACE"  # no "GEADMIN_" in it: Triton must inherit none


def _user_default_home() -> Path:
    saved = os.environ.get(ORIGINAL_HOME_VARIABLE)
    if saved:
        return Path(saved)
    home = os.environ.get("GEADMIN_HOME")
    return Path(home).expanduser() if home else settings.default_home()


REAL_DEFAULT_HOME = _user_default_home()  # before isolate() changes the environment
SESSION_ROOT_PREFIX = "geadmin-test-session-"


def isolate() -> Path:
    """Give this process (and its children) a throwaway workspace and data home; returns it.
    Idempotent: a second call keeps the first directory."""
    current = os.environ.get("GEADMIN_HOME", "")
    if SESSION_ROOT_PREFIX in current:
        return Path(current)
    os.environ.setdefault(ORIGINAL_HOME_VARIABLE, str(REAL_DEFAULT_HOME))
    root = Path(tempfile.mkdtemp(prefix=SESSION_ROOT_PREFIX))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    os.environ["XDG_DATA_HOME"] = str(root / "xdg-data")
    os.environ["GEADMIN_HOME"] = str(root / "workspace")
    return root / "workspace"
