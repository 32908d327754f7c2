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


def test_geadmin_stack_lists_the_services_and_restarts_triton_asked_and_audited(tmp_path: Path) -> None:
    """The Stack page's list and restart from a terminal: refused without a terminal and
    --yes (audited, nothing done), done with --yes, and `geadmin up` says who asked."""
    import json

    from tests.support.processes import wait_for
    from tests.support.stack import geadmin

    home = tmp_path / "home"

    def triton() -> dict[str, object]:
        listed = geadmin("stack", "--json", home=home)
        assert listed.returncode == 0, listed.stderr
        document = json.loads(listed.stdout)
        assert document["stack"] == "local" and {s["name"] for s in document["services"]} == {"triton",
                                                                                             "dashboard"}
        return next(s for s in document["services"] if s["name"] == "triton")

    with running_up(home, "--no-probes", wait_for="models: "):
        before = triton()
        assert before["state"] == "running"
        text = geadmin("stack", home=home).stdout
        assert text.startswith("local stack\nSERVICE") and "triton" in text and "dashboard" in text

        refused = geadmin("stack", "restart", "triton", home=home)  # stdin is no terminal here
        assert refused.returncode == 1 and "pass --yes to go ahead. Nothing was done" in refused.stderr
        assert triton()["detail"] == before["detail"]  # the same pid: nothing was done

        done = geadmin("stack", "restart", "triton", "--yes", home=home)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("asked the local stack to restart triton")
        def restarted() -> bool:
            now = triton()
            return now["state"] == "running" and now["detail"] != before["detail"]

        assert wait_for(restarted, 60), "triton was not restarted"
        rows = audit.query(action="restart", model="triton", home=home)
        assert [(r.result, r.origin) for r in rows] == [("ok", "cli"), ("failed", "cli")]
        assert rows[1].message.startswith("refused: standard input is not a terminal")
        said = lambda: [r.message for r in audit.query(action="restart", model="tritonserver", home=home)]  # noqa: E731
        asked = "restart asked with `geadmin stack` by "
        assert wait_for(lambda: any(asked in m for m in said()), 30), said()
