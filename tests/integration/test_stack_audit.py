"""Where and how `geadmin up` audits: every row in the workspace `--home` names (never the
default one), and every stop with its real origin and result (Ctrl-C, a signal, the Stack page,
a crash and the restart after it)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from geadmin import audit
from tests.support.samples import SAMPLE_MODELS
from tests.support.stack import running_up

pytestmark = pytest.mark.integration


def test_up_with_home_puts_every_row_in_that_workspace_and_ctrl_c_is_recorded(tmp_path: Path) -> None:
    """A user's shell: HOME set, no GEADMIN_HOME, no XDG_DATA_HOME; the workspace only by flag.
    The model-load rows went to ~/.local/share/geadmin, and Ctrl-C wrote no row."""
    user_home = tmp_path / "user"
    user_home.mkdir()
    workspace = tmp_path / "elsewhere"
    env = {k: v for k, v in os.environ.items() if k not in ("GEADMIN_HOME", "XDG_DATA_HOME")}
    env["HOME"] = str(user_home)
    with running_up(workspace, "--no-probes", wait_for="models: ", env=env) as up:
        up.process.send_signal(signal.SIGINT)  # what Ctrl-C in its terminal sends
        up.process.wait(timeout=20)
    assert up.process.returncode == 0, up.collector.text
    rows = audit.query(home=workspace)
    assert {r.model for r in rows if r.action == "load" and r.result == "ok"} == set(SAMPLE_MODELS)
    (stop,) = [r for r in rows if r.action == "stop"]
    assert stop.model == "tritonserver" and stop.result == "ok" and stop.origin == "cli"
    assert stop.message.startswith("stopped by Ctrl-C (SIGINT): `geadmin up` ended; tritonserver stopped "
                                   "as asked after "), stop.message
    assert list(user_home.rglob("geadmin.db*")) == [], "a row went to the default workspace"
    assert not (user_home / ".local" / "share" / "geadmin").exists()
