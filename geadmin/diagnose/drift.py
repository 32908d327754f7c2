"""Drift: a model whose config.pbtxt on disk is not the config Triton serves.

It happens when a file is edited by hand, or when a reload failed and the previous version
kept serving (FACTS.md): every view is green, and the next restart — also the supervisor's
automatic one after a crash — loads the file and trips over it. Both sides are compared
through protobuf as `repository.knobs.compare_with_live` does (the fields the file sets, against
Triton's normalized `GET /v2/models/N/config`; fields only Triton has are its defaults).

The extreme case: a model whose directory is gone from the repository while it serves (deleted,
moved, a repository sync). Triton's index lists only what is on disk, so every view loses the
model, while it answers until the next restart or reload, which lose it for good. Its
statistics list every loaded model: one they list and the index does not is `gone`.

A reload still running looks the same from outside (Triton's index says READY while the previous
version serves, FACTS.md): when geadmin's own apply of this file stopped waiting for Triton's load
(its audit row is `unfinished`), the drift names that apply and says to wait, not to reload again.

A drift carries the validator's verdict on the file ("does not parse, line 6: ...") and one fix:
open it in the Config editor, or put the served config back on disk (the file to write is
`served_file`; `geadmin.ops.models.put_back.put_back_served` writes it, atomic, with a revision kept
and an audit row: diagnose only reads).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from tritonclient.grpc import model_config_pb2

from geadmin import audit
from geadmin.db import WorkspaceDatabaseError
from geadmin.errors import ConfigParseError, GeAdminError, RepositoryError, TritonError
from geadmin.repository import locks, revisions, store
from geadmin.repository.knobs import compare_with_live
from geadmin.repository.modelconfig import CONFIG_FILE, to_file_text
from geadmin.repository.rules import Severity
from geadmin.repository.trials import is_trial
from geadmin.repository.validate import validate_model
from geadmin.triton.client import TritonClient

CHANGES = ("apply", "rollback")  # the audit actions that write a config and load it
GONE = "its directory is gone from the repository, so Triton's index no longer lists it"


@dataclass(frozen=True)
class Drift:
    model: str
    differing: tuple[str, ...]  # the fields the file sets differently; () when it does not parse
    on_disk: str  # the validator's verdict on the file
    loads: bool  # False: the validator finds errors, so a reload or restart would fail
    changed_at: datetime | None  # when the file changed (its modification time, UTC)
    unfinished: audit.AuditEntry | None = None  # geadmin's change of this file whose load it stopped awaiting
    gone: bool = False  # no directory in any repository Triton serves: it answers until a restart

    @property
    def reason(self) -> str:
        """The verdict's line."""
        if self.gone:
            return f"model {self.model!r} still serves, but {self.headline}"
        return f"model {self.model!r} serves a config that differs from its file: {self.headline}"

    @property
    def since(self) -> str:
        return f" since {self.changed_at:%H:%M} UTC" if self.changed_at else ""

    @property
    def headline(self) -> str:
        """`on disk: does not parse, line 6: ... — serving the previous config since 11:57 UTC`."""
        fields = f" ({', '.join(self.differing[:4])}{', ...' if len(self.differing) > 4 else ''} differ)" \
            if self.differing else ""
        if self.gone:
            return f"{GONE} — the next restart of Triton, or a reload, loses it"
        if self.unfinished is not None:
            entry = self.unfinished
            return (f"the {entry.action} by {entry.who} at {entry.at:%H:%M} UTC stopped waiting for Triton's "
                    f"load of this file{fields}: still loading, or it failed — serving the previous config")
        return f"on disk: {self.on_disk}{fields} — serving the previous config{self.since}"

    @property
    def fix(self) -> str:
        if self.gone:
            return (f"put its directory back (`geadmin config history {self.model}` has the configs geadmin "
                    f"applied), or unload it if it was meant to go (`geadmin models unload {self.model}`)")
        if self.unfinished is not None:
            return (f"wait: this clears when the load ends; if it stays, the load failed (Triton's log says "
                    f"why): fix the config and apply again, or `geadmin config rollback {self.model}`")
        if not self.loads:
            return ("open it in the Config editor and fix it (or put back the served config): the next "
                    "reload or restart of Triton loads this file and fails")
        return ("apply it (reload the model) if the change is wanted, or put back the served config "
                "if it is not")

    def to_json(self) -> dict[str, object]:
        return {"model": self.model, "differing": list(self.differing), "on_disk": self.on_disk,
                "loads": self.loads, "changed_at": self.changed_at.isoformat() if self.changed_at else None,
                "gone": self.gone,
                "headline": self.headline, "fix": self.fix}


def file_verdict(directory: Path) -> tuple[str, bool]:
    """The validator's verdict on a model directory's config: (one line, no errors)."""
    errors = [f for f in validate_model(directory).findings if f.severity is Severity.ERROR]
    if not errors:
        return "valid, but not what Triton serves (not reloaded since it changed)", True
    first = errors[0]
    message = first.message
    if first.line:
        message = (f"does not parse, line {first.line}: {message.removeprefix('does not parse: ')}"
                   if message.startswith("does not parse") else f"{message} (line {first.line})")
    more = f" (and {len(errors) - 1} more error(s))" if len(errors) > 1 else ""
    return f"{message}{more}", False


def _changed_at(path: Path) -> datetime | None:
    try:
        return datetime.fromtimestamp(path.stat().st_mtime, timezone.utc)
    except OSError:
        return None


def unfinished_change(url: str, name: str, changed_at: datetime | None,
                      home: Path | None) -> audit.AuditEntry | None:
    """geadmin's newest change of `name` on `url`, when it wrote the file on disk (nothing
    changed it after) and stopped waiting for its load; None otherwise or without an audit."""
    try:
        rows = audit.query(model=name, limit=20, home=home)
    except WorkspaceDatabaseError:
        return None
    newest = next((r for r in rows if r.action in CHANGES and r.server == url
                   and r.result != audit.Result.STARTED.value), None)
    if newest is None or newest.result != audit.Result.UNFINISHED.value:
        return None
    written_after = changed_at is not None and changed_at > newest.at  # edited by hand since
    return None if written_after else newest


def drift_of(repository: Path, name: str, served: model_config_pb2.ModelConfig) -> Drift | None:
    """None when the file on disk is what Triton serves, or there is no model directory here
    (another repository); a directory whose config.pbtxt is gone is drift."""
    try:
        current = store.read_config(repository, name)
    except RepositoryError:
        directory = repository / name
        if directory.is_dir() and not (directory / CONFIG_FILE).exists():  # deleted while it serves
            on_disk, loads = file_verdict(directory)
            return Drift(name, (), on_disk, loads, _changed_at(directory))
        return None  # no model directory here (another repository), or unreadable: not drift
    try:
        comparison = compare_with_live(current.text, served)
    except ConfigParseError:
        differing: tuple[str, ...] = ()
    else:
        if comparison.same:
            return None
        differing = comparison.differing
    on_disk, loads = file_verdict(current.path.parent)
    return Drift(name, differing, on_disk, loads, _changed_at(current.path))


def find_drift(client: TritonClient, repository: Path | None, names: Sequence[str], *,
               listed: Collection[str] | None = None, home: Path | None = None) -> list[Drift]:
    """The drifted models among `names` (READY ones: only those serve a config), and with
    `listed` (every name Triton's index lists) the loaded models it does not list: `gone`.
    geadmin's own tuning trials serve other configs than their file on purpose, and a model an
    apply is changing right now leads with its file until the apply ends: never drift.
    `home`: the workspace whose audit names an apply still loading."""
    found = gone_from_repository(client, listed) if listed is not None else []
    if repository is None:
        return found
    for name in (n for n in names if not is_trial(repository, n)):
        if locks.apply_running(repository, name, home):
            continue  # mid-apply the file leads what serves: the apply checks it and settles it
        try:
            served = client.model_config(name)
        except TritonError:
            continue  # unloaded meanwhile: its state says so
        drift = drift_of(repository, name, served)
        if drift is not None:
            pending = unfinished_change(client.url, name, drift.changed_at, home)
            found.append(replace(drift, unfinished=pending))
    return found


def gone_from_repository(client: TritonClient, listed: Collection[str]) -> list[Drift]:
    """The models Triton has loaded (its statistics) that its index does not list (`listed`)."""
    try:
        loaded = {item.name for item in client.model_statistics()}
    except TritonError:
        return []
    return [Drift(name, (), GONE, False, None, gone=True) for name in sorted(loaded - set(listed))]


# -- the fix: what to put back ------------------------------------------------------------
def served_file(repository: Path, name: str, served: model_config_pb2.ModelConfig,
                home: Path | None = None) -> bytes:
    """The file to put back: the newest kept revision that is what Triton serves (its exact
    bytes, comments included); else the served config written out (Triton's normalized form)."""
    try:
        kept = revisions.history(repository, name, home=home)
    except GeAdminError:
        kept = []
    for revision in kept:
        try:
            if compare_with_live(revision.text, served).same:
                return revision.data
        except ConfigParseError:
            continue
    return to_file_text(served).encode()
