"""Apply a new config.pbtxt to a model without ever taking a serving model down.

1. Refuse before writing anything: another apply of the model is running, the file changed
   since the editor read it (`ConfigConflictError`, with both texts), the text does not
   parse or names another model, the validator finds an error (`ConfigInvalidError`, unless
   `validate=False`), or Triton does not answer / does not know the model.
2. Write an audit row "started" (the file, the previous and the new hash), then write
   atomically, keeping the old content as a revision (`geadmin.repository.store`). If the
   process dies after that row and before step 6, the next start finds the row without an
   outcome, checks and validates what is on disk, and flags it with the revision to roll back
   to (`geadmin.ops.models.reconcile`). An interruption inside this process (an exception that is no
   GeAdminError, e.g. a Streamlit rerun raised from `progress`) is closed the same way, at once.
   Ctrl-C or SIGTERM (a KeyboardInterrupt, `geadmin.interrupts`) takes the way back instead,
   under the lock: the previous file is put back (and loaded again when Triton was asked to
   load the new one), the outcome is audited, `on_cut_short` is told, and the interrupt goes on.
3. Reload through Triton's repository API, explained; Triton keeps the previous version
   serving while it tries the new one (`geadmin.ops.models.apply_reload`). A model that is not
   loaded is only written, unless `load_unloaded`.
4. If Triton rejects it (or does not answer, or the load hangs, or with `smoke=True` a test
   request fails), put the previous file back, byte for byte, read it back to check, and
   return the real reason (`apply_reload` says how). A load still running at the load timeout
   keeps the new file (`unfinished`). After a success, ask Triton what serves and whether its
   live config carries every field of the file. The new config that stays on disk (written,
   applied, unfinished) is kept as a revision.
5. Ask Triton what else changed state (an ensemble that runs the model is reloaded with it,
   and unloaded when it refuses the new config) and report each with Triton's reason
   (`geadmin.diagnose.state_changes`): in the result's `side_effects`, and one audit row each.
6. Audit every attempt, refusals included, with the unified diff (`geadmin.audit`): one
   outcome row after the "started" row of step 2.

The same file applied again while the model is flagged with an apply a dead process cut short
after writing that file is no "unchanged": it finishes that apply (steps 3 to 6, the revision
it replaced as the way back), and its outcome row closes that start
(`geadmin.ops.models.apply_cut_short`).

Test hook: `test_hooks.fault_point` names the steps `apply.started` (the started row is
written, the file is not), `apply.written` (the new file is on disk, Triton not asked yet) and
`apply.loaded` (Triton answered, no outcome row yet); tests/integration/test_cut_short.py
kills the process at each.

`rollback(model, revision)` is an apply of a kept revision, audited as "rollback"; it skips
the validator (that config served before; Triton still checks it, and a rejection restores).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from geadmin import audit, interrupts, test_hooks
from geadmin.access.guard import Authorization, require
from geadmin.access.roles import GuardedAction
from geadmin.audit import Actor, Result
from geadmin.db import WorkspaceDatabaseError
from geadmin.diagnose import explain, state_changes
from geadmin.diagnose.interrupted import Interrupted
from geadmin.domain import Serving
from geadmin.errors import ConfigConflictError, GeAdminError, RepositoryError
from geadmin.ops.models import apply_cut_short, reconcile
from geadmin.ops.models.actions import audit_side_effects, with_side_effects
from geadmin.ops.models.apply_reload import ConfigReload, holds
from geadmin.ops.models.apply_result import AUDIT_RESULTS, ApplyOutcome, ApplyResult
from geadmin.ops.models.explained_load import LoadProgress
from geadmin.repository import locks, revisions, store
from geadmin.repository.code_fields import refuse_code_change
from geadmin.repository.modelconfig import CONFIG_FILE, parse_pbtxt
from geadmin.repository.store import ConfigFile
from geadmin.repository.validate import refuse_invalid
from geadmin.triton.client import TritonClient
from geadmin.triton.logs import LogSource


def apply_config(
    client: TritonClient,
    repository: Path,
    model: str,
    new: str | bytes,
    *,
    expected_sha256: str | None = None,
    base_text: str | None = None,
    auth: Authorization | None = None,
    log: LogSource | None = None,
    load_unloaded: bool = False,
    progress: LoadProgress | None = None,
    home: Path | None = None,
    action: str = "apply",
    note: str = "",
    validate: bool = True,
    smoke: bool = False,
    backends: frozenset[str] | None = None,
    on_cut_short: Callable[[ApplyResult], None] | None = None,
) -> ApplyResult:
    """Apply `new` as `model`'s config.pbtxt (see the module docstring). `expected_sha256`
    is the hash of the file the editor read (None: whatever is on disk now), `base_text` its
    text (for the conflict diff). A model that is not loaded is only written, unless
    `load_unloaded`. Refusals raise (`ConfigConflictError`, `ConfigParseError`,
    `ConfigLockedError`, `ConfigInvalidError`, `TritonError`, ...); everything after the write
    is a result. Validator warnings are returned in `warnings`. `backends`: the server's, when
    known (`geadmin.diagnose.impact.process_backends`), so a backend it lacks is refused.
    `auth` must cover `action` (apply or rollback): NotAuthorizedError before anything is read.
    Cut short by Ctrl-C or SIGTERM, it puts the previous file back and tells `on_cut_short` how
    that went (the face prints it) before the KeyboardInterrupt goes on."""
    actor = require(auth, GuardedAction(action))
    data = new.encode("utf-8") if isinstance(new, str) else new
    job = _Apply(client, Path(repository), model, data, actor, log, progress,
                 home, action, note or action, validate, smoke, backends, auth=auth)
    hold = contextlib.ExitStack()  # from the change done (lock still held) to its outcome row: no Ctrl-C
    with hold:
        try:
            with locks.edit_lock(repository, model, "apply", home=home, wait_s=0):
                try:
                    result = job.run(expected_sha256, base_text, load_unloaded)
                except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM (geadmin.interrupts): back, locked
                    said = job.cut_short(exc)
                    if said is not None and on_cut_short is not None:
                        on_cut_short(said)
                    raise
                hold.enter_context(interrupts.signals_deferred())
        except GeAdminError as exc:
            job.audit(Result.REFUSED, str(exc))
            raise
        except BaseException as exc:  # not ours (a bug, a Streamlit rerun): close the started row now
            job.interrupted(exc)
            raise
        if result.outcome is ApplyOutcome.UNCHANGED:
            return result
        test_hooks.fault_point("apply.loaded")
        message = with_side_effects(result.message, result.side_effects)
        problem = job.audit(AUDIT_RESULTS[result.outcome], message)
        problem = problem or audit_side_effects(client.url, action, model, result.side_effects, job.actor,
                                                home)
    return replace(result, warnings=(*result.warnings, problem)) if problem else result


def rollback(
    client: TritonClient,
    repository: Path,
    model: str,
    revision: int | None = None,
    *,
    expected_sha256: str | None = None,
    auth: Authorization | None = None,
    log: LogSource | None = None,
    progress: LoadProgress | None = None,
    home: Path | None = None,
    on_cut_short: Callable[[ApplyResult], None] | None = None,
) -> ApplyResult:
    """Apply a kept revision (default: the newest one that differs from the file on disk)."""
    require(auth, GuardedAction.ROLLBACK)
    current = store.read_config(repository, model)
    target = revisions.rollback_target(repository, model, revision, current.sha256, home=home)
    result = apply_config(client, repository, model, target.data,
                          expected_sha256=expected_sha256 or current.sha256, auth=auth, log=log,
                          progress=progress, home=home, action="rollback",
                          note=f"rollback to revision {target.number}", validate=False,
                          on_cut_short=on_cut_short)
    if result.outcome is ApplyOutcome.UNCHANGED:
        return replace(result, message=f"{model!r} already has the config of revision {target.number}: "
                       "nothing to roll back", revision=target.number)
    return result


@dataclass
class _Apply:
    client: TritonClient
    repository: Path
    model: str
    data: bytes
    actor: Actor
    log: LogSource | None
    progress: LoadProgress | None
    home: Path | None
    action: str
    note: str
    validate: bool
    smoke: bool
    backends: frozenset[str] | None = None
    diff: str = ""
    findings: tuple[str, ...] = ()  # validator warnings, for the result
    started: reconcile.Started | None = None  # the "started" row, once written
    auth: Authorization | None = None  # the caller's, for the loads this apply makes
    unconfirmed: tuple[str, ...] = ()  # writes that are on disk (read back) but raised after the rename
    way_back: ConfigReload | None = None  # once the started row is written: what puts the previous file back
    loading: bool = False  # Triton was asked to load the new file

    def audit(self, result: Result, message: str) -> str:
        """Append the audit row; "" or why it could not be written (never raises)."""
        if self.note != self.action:
            message = f"{self.note}: {message}"
        if self.started is not None:  # the outcome of this apply's started row, and of no other
            message = reconcile.outcome_message(message, self.started)
        try:
            audit.record(self.action, self.model, result, actor=self.actor, server=self.client.url,
                         message=message, diff=self.diff, home=self.home)
        except WorkspaceDatabaseError as exc:
            return f"the audit row could not be written: {exc}"
        return ""

    def start(self, current: ConfigFile, new_sha: str) -> None:
        """The "started" row (step 2); raises, so nothing is written, when it cannot be kept."""
        headline = f"{self.note}: started, writing {current.path}"
        message = reconcile.started_message(headline, self.repository, current.path, current.sha256, new_sha)
        entry = audit.record(self.action, self.model, Result.STARTED, actor=self.actor,
                             server=self.client.url, message=message, diff=self.diff, home=self.home)
        self.started = reconcile.parse_started(entry)

    def interrupted(self, exc: BaseException) -> Interrupted | None:
        """Close the started row of an apply unwound by an exception that is not ours."""
        started, self.started = self.started, None  # closed once
        if started is None:
            return None
        cause = f"cut short in this process by {type(exc).__name__}"
        with contextlib.suppress(GeAdminError):  # else the next start finds the open row and closes it
            return reconcile.close(started, actor=self.actor, home=self.home, cause=cause)
        return None

    def cut_short(self, exc: KeyboardInterrupt) -> ApplyResult | None:
        """Ctrl-C or SIGTERM once the started row is written: the way back (`ConfigReload.cut_short`),
        audited as this apply's outcome; None before that row. Cut short again on the way back,
        the started row is closed as any other interruption is, and the result says so."""
        if self.started is None or self.way_back is None:
            return None
        why = apply_cut_short.cause(self.model, loading=self.loading)
        try:
            result = self.way_back.cut_short(why, loading=self.loading)
        except BaseException as again:  # a second Ctrl-C: the next start would close it; now is better
            closed = self.interrupted(again)
            state = closed.reason() if closed else "the next geadmin start says what is on disk"
            return ApplyResult(self.model, ApplyOutcome.RESTORE_FAILED, f"{why}, and its way back was cut "
                               f"short too ({type(again).__name__}): {state}", self.diff,
                               self.way_back.current.sha256, self.way_back.new_sha)
        problem = self.audit(AUDIT_RESULTS[result.outcome], result.message)
        self.started = None  # closed
        return replace(result, warnings=(problem,)) if problem else result

    def run(self, expected_sha256: str | None, base_text: str | None, load_unloaded: bool) -> ApplyResult:
        """The steps of the module docstring, and what else changed state after them."""
        snapshot = state_changes.snapshot(self.client, self.log)
        result = self.steps(expected_sha256, base_text, load_unloaded)
        if self.unconfirmed:
            lines = (result.message, *(f"  {u}" for u in self.unconfirmed))
            result = replace(result, message="\n".join(lines))
        if result.outcome in (ApplyOutcome.UNCHANGED, ApplyOutcome.WRITTEN):
            return result
        changed = state_changes.changes(self.client, snapshot, [self.model], self.log)
        return replace(result, side_effects=tuple(changed))

    def steps(self, expected_sha256: str | None, base_text: str | None, load_unloaded: bool) -> ApplyResult:
        store.refuse_oversized(self.model, self.data)  # else it could never be restored or rolled back
        current = store.read_config(self.repository, self.model)
        self.diff = revisions.config_diff(current.data, self.data, self.model)
        self.refuse_unless_safe(current, expected_sha256, base_text)
        new_sha = revisions.sha256_of(self.data)
        unfinished = None
        if self.data == current.data:
            unfinished = apply_cut_short.unfinished(self.repository, self.model, new_sha, home=self.home)
            if unfinished is None:
                return ApplyResult(self.model, ApplyOutcome.UNCHANGED,
                                   f"the config of {self.model!r} is unchanged: "
                                   "nothing to apply", "", current.sha256, new_sha)
            # finish the apply cut short: its diff, the revision it replaced as the way back, its start
            self.diff = unfinished.start.entry.diff
            current = ConfigFile(self.model, current.path, unfinished.previous.data)
        before = explain.watch(self.client, self.model, self.log)
        if unfinished is None:
            self.start(current, new_sha)
        else:
            self.started = unfinished.start
        reload = self.way_back = ConfigReload(
            self.client, self.repository, self.model, self.data, current, new_sha, before, self.diff,
            self.actor.name, self.home, self.log, self.progress, self.auth, self.smoke)
        if unfinished is None:
            test_hooks.fault_point("apply.started")
            self.write(current)
            test_hooks.fault_point("apply.written")
        if before.was_ready is False and not load_unloaded:
            result = self.kept(ApplyResult(
                self.model, ApplyOutcome.WRITTEN, f"wrote the new config of {self.model!r}; the model is not "
                "loaded, so Triton has not checked it: load it (`geadmin models load "
                f"{self.model}`) to find out", self.diff, current.sha256, new_sha,
                serving=Serving.NEVER_LOADED))
        else:
            self.loading = True
            result = reload.run()
            self.unconfirmed += reload.unconfirmed
            # the new file stays on disk (applied, or still loading): kept as a revision; a restore is not
            if result.outcome in (ApplyOutcome.APPLIED, ApplyOutcome.UNFINISHED):
                result = self.kept(result)
        return replace(result, message=f"{result.message}\n{unfinished.note()}") if unfinished else result

    def write(self, current: ConfigFile) -> None:
        """Write the new file. An error raised once it is in place (the directory fsync after the
        rename; checked by reading the file back) does not stop the apply: the new file is on disk,
        so it is loaded (or restored) like any other, and the error is said in the outcome."""
        try:
            store.write_config(self.repository, self.model, self.data, expected_sha256=current.sha256,
                               who=self.actor.name, note=f"before {self.action}", home=self.home)
        except ConfigConflictError:
            raise
        except RepositoryError as exc:
            if not holds(self.repository, self.model, self.data):
                raise
            self.unconfirmed += (f"the new {CONFIG_FILE} is on disk (read back), but: {exc}",)

    def refuse_unless_safe(self, current: ConfigFile, expected_sha256: str | None,
                           base_text: str | None) -> None:
        if expected_sha256 is not None and expected_sha256 != current.sha256:
            raise store.conflict(self.repository, self.model, current.path, expected_sha256, current.data,
                                 self.home, base_text)
        try:
            text = self.data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RepositoryError(f"the new {CONFIG_FILE} of {self.model!r} is not UTF-8 text (byte "
                                  f"{exc.start}): save it as UTF-8 and apply again") from exc
        config = parse_pbtxt(text, f"the new {CONFIG_FILE} of {self.model!r}")
        may_upload_code = self.auth is not None and GuardedAction.UPLOAD_CODE in self.auth.actions
        refuse_code_change(self.model, current.data, config, who=self.actor.name,  # a data file as code
                           may_upload_code=may_upload_code)
        if config.name and config.name != self.model:
            raise RepositoryError(f"the new config says name: {config.name!r}, but the model is "
                                  f"{self.model!r}: Triton would reject it; use name: {self.model!r}")
        if self.validate:
            findings = refuse_invalid(self.model, text, current.path.parent, backends=self.backends)
            self.findings = tuple(f"validator: {f}" for f in findings)
        if not any(entry.name == self.model for entry in self.client.repository_index()):
            raise RepositoryError(
                f"Triton at {self.client.url} does not list {self.model!r}: the repository geadmin "
                f"writes ({self.repository}) may not be the one this Triton serves; pass the right "
                "--repository / GEADMIN_REPOSITORY, or --url for the server that serves it")

    def kept(self, result: ApplyResult) -> ApplyResult:
        """`result` with the new config kept as a revision (a warning if it cannot be)."""
        result = replace(result, warnings=(*self.findings, *result.warnings))
        try:
            revision = revisions.record_revision(self.repository, self.model, self.data, who=self.actor.name,
                                             note=self.note, home=self.home)
        except WorkspaceDatabaseError as exc:
            return replace(result, warnings=(*result.warnings, f"not kept in the config history: {exc}"))
        return replace(result, revision=revision.number)
