"""Apply a tuning run's winner: on the server the run measured, to the file the run started from.

A winner is measured on one server with the config file as it was when the run started; on
another server (staging vs production) or after the file changed, its numbers say nothing,
and applying it would silently revert the edits made since. So `apply_winner` refuses:

- a run without a winner, or for another model;
- a server that is not the one the run measured (`geadmin.domain.same_server`), naming both;
- a run saved before runs recorded their starting file's hash (nothing to check against);

and hands the winner to the config editor's apply with the hash of the file the run started
from as the expected hash: a file changed since is a `ConfigConflictError`, as in the editor,
with the diff of what changed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from geadmin.access.guard import Authorization, require
from geadmin.access.roles import GuardedAction
from geadmin.domain import same_server
from geadmin.errors import ConfigConflictError, TuneRefusedError
from geadmin.ops.models.apply import apply_config
from geadmin.ops.models.apply_result import ApplyResult
from geadmin.triton.client import TritonClient


def winner_refusal(run: dict[str, Any], server: str) -> str:
    """Why run `run`'s winner cannot go to `server` ("" when it can): a page disables its
    button with it, `apply_winner` raises it."""
    if not run.get("best") or not run.get("best_text"):
        return f"tuning run {run.get('id')} has no winner to apply"
    if not same_server(str(run.get("server", "")), server):
        measured = run.get("server") or "an unknown server"
        return (f"tuning run {run.get('id')} measured {measured}, not {server}: its numbers say nothing "
                f"about this server; tune {run.get('model')} here and apply that run")
    if not run.get("live_sha256"):
        return (f"tuning run {run.get('id')} does not record the config file it started from, so edits made "
                "since cannot be told apart: tune again and apply the new run")
    return ""


def apply_winner(client: TritonClient, repository: Path, run: dict[str, Any], *, auth: object,
                 home: Path | None = None) -> ApplyResult:
    """The config editor's apply of `run`'s winner (see the module docstring); refusals raise
    `TuneRefusedError` / `ConfigConflictError` before anything is written."""
    require(auth, GuardedAction.APPLY)
    assert isinstance(auth, Authorization)
    refusal = winner_refusal(run, client.url)
    if refusal:
        raise TuneRefusedError(refusal)
    try:
        return apply_config(client, repository, str(run["model"]), str(run["best_text"]),
                            expected_sha256=str(run["live_sha256"]), auth=auth, smoke=True, home=home,
                            note=f"the winner of tuning run {run['id']}")
    except ConfigConflictError as exc:
        raise ConfigConflictError(
            f"{run['model']}'s config.pbtxt changed since tuning run {run['id']} started (expected sha256 "
            f"{exc.expected_sha256[:12]}, found {exc.found_sha256[:12]}): applying the winner would undo "
            "that change, so nothing was written; tune again, or make the change in the Config editor",
            path=exc.path, expected_sha256=exc.expected_sha256, found_sha256=exc.found_sha256,
            base_text=exc.base_text, disk_text=exc.disk_text, diff_text=exc.diff_text) from exc
