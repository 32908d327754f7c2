"""Drift: a model whose config.pbtxt on disk is not the config Triton serves.

It happens when a file is edited by hand, or when a reload failed and the previous version
kept serving (FACTS.md): every view is green, and the next restart — also the supervisor's
automatic one after a crash — loads the file and trips over it. Both sides are compared
through protobuf as `repository.knobs.compare_with_live` does (the fields the file sets, against
Triton's normalized `GET /v2/models/N/config`; fields only Triton has are its defaults).

A drift carries the validator's verdict on the file ("does not parse, line 6: ...") and one fix:
open it in the Config editor, or put the served config back on disk (`put_back_served`, atomic,
with a revision kept and an audit row).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from tritonclient.grpc import model_config_pb2

from geadmin import audit
from geadmin.access.guard import Authorization, require
from geadmin.access.roles import GuardedAction
from geadmin.errors import ConfigParseError, GeAdminError, RepositoryError, TritonError
from geadmin.repository import revisions, store
from geadmin.repository.knobs import compare_with_live
from geadmin.repository.modelconfig import to_file_text
from geadmin.repository.rules import Severity
from geadmin.repository.trials import is_trial
from geadmin.repository.validate import validate_model
from geadmin.triton.client import TritonClient

PUT_BACK_ACTION = "put-back-served"  # the audit action of `put_back_served`


@dataclass(frozen=True)
class Drift:
    model: str
    differing: tuple[str, ...]  # the fields the file sets differently; () when it does not parse
    on_disk: str  # the validator's verdict on the file
    loads: bool  # False: the validator finds errors, so a reload or restart would fail
    changed_at: datetime | None  # when the file changed (its modification time, UTC)

    @property
    def since(self) -> str:
        return f" since {self.changed_at:%H:%M} UTC" if self.changed_at else ""

    @property
    def headline(self) -> str:
        """`on disk: does not parse, line 6: ... — serving the previous config since 11:57 UTC`."""
        fields = f" ({', '.join(self.differing[:4])}{', ...' if len(self.differing) > 4 else ''} differ)" \
            if self.differing else ""
        return f"on disk: {self.on_disk}{fields} — serving the previous config{self.since}"

    @property
    def fix(self) -> str:
        if not self.loads:
            return ("open it in the Config editor and fix it (or put back the served config): the next "
                    "reload or restart of Triton loads this file and fails")
        return ("apply it (reload the model) if the change is wanted, or put back the served config "
                "if it is not")

    def to_json(self) -> dict[str, object]:
        return {"model": self.model, "differing": list(self.differing), "on_disk": self.on_disk,
                "loads": self.loads, "changed_at": self.changed_at.isoformat() if self.changed_at else None,
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


def drift_of(repository: Path, name: str, served: model_config_pb2.ModelConfig) -> Drift | None:
    """None when the file on disk is what Triton serves (or there is no file to compare)."""
    try:
        current = store.read_config(repository, name)
    except RepositoryError:
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


def find_drift(client: TritonClient, repository: Path | None, names: Sequence[str]) -> list[Drift]:
    """The drifted models among `names` (READY ones: only those serve a config). geadmin's own
    tuning trials serve other configs than their file on purpose: never drift."""
    if repository is None:
        return []
    found = []
    for name in (n for n in names if not is_trial(repository, n)):
        try:
            served = client.model_config(name)
        except TritonError:
            continue  # unloaded meanwhile: its state says so
        drift = drift_of(repository, name, served)
        if drift is not None:
            found.append(drift)
    return found


# -- the fix: put back what serves ------------------------------------------------------
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


def put_back_served(client: TritonClient, repository: Path, name: str, *, auth: Authorization | None = None,
                    home: Path | None = None) -> str:
    """Write the served config to disk (atomic, the drifted file kept as a revision, audited),
    then check that nothing drifts any more. Returns what was done; raises GeAdminError.
    `auth` must cover `rollback` (NotAuthorizedError before anything is read)."""
    actor = require(auth, GuardedAction.ROLLBACK)
    served = client.model_config(name)
    current = store.read_config(repository, name)
    data = served_file(repository, name, served, home)
    diff = revisions.config_diff(current.data, data, name, "on disk", "served")
    try:
        store.write_config(repository, name, data, expected_sha256=current.sha256, who=actor.name,
                           note="drifted from what Triton served", home=home)
    except GeAdminError as exc:
        audit.record(PUT_BACK_ACTION, name, audit.Result.FAILED, actor=actor, server=client.url,
                     message=str(exc), home=home)
        raise
    left = drift_of(repository, name, client.model_config(name))
    message = (f"put the config Triton serves for {name!r} back in {current.path}"
               + (f"; it still differs: {left.headline}" if left else "; disk and Triton agree again"))
    audit.record(PUT_BACK_ACTION, name, audit.Result.OK if left is None else audit.Result.FAILED,
                 actor=actor, server=client.url, message=message, diff=diff, home=home)
    return message
