"""Create a model from a template: its directory, uploaded files, validation, first load.

1. Refuse before writing anything (each refusal is audited as "create" / refused): the checks
   of `geadmin.ops.models.create_plan` (uploaded code, the name, the file paths and sizes, the
   template's knobs, and — when loading — Triton), which yield the plan of files.
2. Build the whole directory in a hidden staging directory of the repository
   (`.geadmin-staging-<name>-<random>/<name>`, every file written atomically), validate it
   there (`validate_model`: any error refuses, naming the findings), then move it into place
   with one rename that never replaces anything (`atomic.rename_noreplace`). Whatever fails on
   the way, the staging directory is removed: a model directory appears whole or not at all.
   Before staging, an audit row "started" (the repository and the model directory) is
   written; if the process dies before step 3, the next start (`geadmin.ops.models.reconcile`)
   removes the staging directory nobody holds and closes that row as `interrupted`, saying
   whether the directory is in place (whole) or absent.
3. Keep the config as the model's first revision (`revisions.record_revision`) and write the
   audit row ("create").
4. Load it through the repository API (`ops.models.actions.run_action`: explained and audited as
   "load" like every load) and report the state Triton gives it — checked, not assumed.

Test hook: `test_hooks.fault_point` names the steps `create.started` (the started row is
written, nothing staged), `create.staged` (the staging directory is full, not renamed) and
`create.renamed` (the directory is in place, no outcome row yet); tests/integration/
test_cut_short.py kills the process at each.
"""

from __future__ import annotations

import contextlib
import enum
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from geadmin import audit, disk, test_hooks
from geadmin.access.guard import Authorization, require
from geadmin.access.roles import GuardedAction
from geadmin.audit import Actor, Result
from geadmin.db import WorkspaceDatabaseError
from geadmin.diagnose.explain import explanation_dict
from geadmin.domain import Explanation, ModelState
from geadmin.errors import (
    AccessDeniedError,
    CreateRefusedError,
    GeAdminError,
    RepositoryError,
    TritonError,
)
from geadmin.ops.models import actions, leftovers, reconcile
from geadmin.ops.models.actions import ModelAction, run_action
from geadmin.ops.models.create_plan import Plan, check_code_upload, check_triton, plan_model
from geadmin.repository import locks, revisions, store, templates
from geadmin.repository.atomic import fsync_directory, rename_noreplace
from geadmin.repository.modelconfig import CONFIG_FILE
from geadmin.repository.paths import DEFAULT_UPLOAD_LIMIT_BYTES
from geadmin.repository.templates import Params
from geadmin.repository.validate import Finding, Severity, validate_model
from geadmin.triton.client import TritonClient
from geadmin.triton.logs import LogSource

STAGING_PREFIX = leftovers.STAGING_PREFIX  # `.geadmin-staging-`: hidden, so no listing offers it
ACTION = "create"


class CreateOutcome(str, enum.Enum):
    LOADED = "loaded"  # created, and Triton reports it READY
    CREATED = "created"  # created; not loaded (asked not to)
    LOAD_FAILED = "load_failed"  # created, but Triton did not load it: `reason` says why

@dataclass(frozen=True)
class CreateResult:
    model: str
    template: str
    outcome: CreateOutcome
    message: str  # what happened, then what to do
    directory: Path
    files: tuple[str, ...]  # every file written, relative to the model directory
    findings: tuple[Finding, ...] = ()  # the validator's warnings and infos (errors refuse)
    revision: int | None = None  # config history number (1), None if it could not be kept
    load_state: ModelState | None = None  # what Triton's index says after the load (None: not asked)
    reason: str = ""  # why the load failed, leading with the most specific cause
    explanation: Explanation | None = None
    error: GeAdminError | None = None
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return self.outcome is not CreateOutcome.LOAD_FAILED

    def record(self) -> dict[str, Any]:
        """For `--json`."""
        return {"model": self.model, "template": self.template, "outcome": self.outcome.value, "ok": self.ok,
                "message": self.message, "directory": str(self.directory), "files": list(self.files),
                "findings": [f.to_dict() for f in self.findings], "revision": self.revision,
                "load_state": self.load_state.value if self.load_state else None, "reason": self.reason,
                "warnings": list(self.warnings),
                "explanation": explanation_dict(self.explanation) if self.explanation else None}


def create_model(
    client: TritonClient | None,
    repository: Path,
    name: str,
    template: str,
    params: Params | None = None,
    files: Mapping[str, bytes] | None = None,
    *,
    auth: Authorization | None = None,
    may_upload_code: bool | None = None,
    load: bool = True,
    limit_bytes: int = DEFAULT_UPLOAD_LIMIT_BYTES,
    log: LogSource | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    home: Path | None = None,
) -> CreateResult:
    """Create model `name` in `repository` from `template` (see the module docstring).
    `files` maps paths inside the model directory (`1/model.om`) to their bytes; they replace
    a template's own file of the same path. Refusals raise (`CreateRefusedError`,
    `RepositoryError`, `TritonError`, `AccessDeniedError`, ...) with nothing written; after
    that, a result. `may_upload_code`: whether the actor holds the `upload_code` permission
    (the dashboard asks the guard); None: whether `auth` holds it. `auth` must cover `create`
    (and `load` to load it): NotAuthorizedError before anything is read or written."""
    actor = require(auth, GuardedAction.CREATE)
    if may_upload_code is None:
        may_upload_code = isinstance(auth, Authorization) and GuardedAction.UPLOAD_CODE in auth.actions
    server = client.url if client is not None else ""
    start: reconcile.Started | None = None  # its outcome rows name it: no other row closes it
    try:
        check_code_upload(files or {}, actor, may_upload_code)
        plan = plan_model(repository, name, template, params or Params(), files or {}, limit_bytes)
        if load:
            check_triton(client, name)
        with locks.edit_lock(plan.root, name, ACTION, home=home, wait_s=0):
            start = reconcile.parse_started(audit.record(
                ACTION, name, Result.STARTED, actor=actor, server=server, home=home,
                message=reconcile.started_message(f"started: creating {plan.destination}", plan.root,
                                                  plan.destination)))
            test_hooks.fault_point("create.started")
            findings = _build(plan)
            test_hooks.fault_point("create.renamed")
            result = _created(plan, findings, actor, server, home, start)  # under the lock: reconcile waits
    except GeAdminError as exc:
        with contextlib.suppress(WorkspaceDatabaseError):  # the refusal itself is what the caller sees
            audit.record(ACTION, name, Result.REFUSED, actor=actor, server=server, home=home,
                         message=str(exc) if start is None else reconcile.outcome_message(str(exc), start))
        raise
    if not load or client is None:
        return result
    return _loaded(client, result, log, progress, auth)


def _build(plan: Plan) -> tuple[Finding, ...]:
    """Stage, validate, rename into place; the staging directory never survives."""
    try:
        staging = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{plan.name}-", dir=plan.root))
    except OSError as exc:
        fix = disk.next_step(exc, plan.root, "check the disk")
        raise RepositoryError(f"cannot create a staging directory in {plan.root}: {exc.strerror or exc}; "
                              f"nothing was created — {fix}") from exc
    staged = staging / plan.name
    try:
        staged.mkdir()
        (staged / templates.VERSION).mkdir()
        for relative, data in plan.files.items():
            # sizes were checked in plan_model (the limit is for uploads, not the template's files)
            store.write_model_file(staging, plan.name, relative, data, limit_bytes=len(data))
        test_hooks.fault_point("create.staged")
        report = validate_model(staged)
        findings = tuple(_relocated(f, staged, plan.destination) for f in report.findings)
        errors = [f for f in findings if f.severity is Severity.ERROR]
        if errors:
            raise CreateRefusedError(_refusal(plan.name, errors), findings)
        rename_noreplace(staged, plan.destination)
    except FileExistsError as exc:
        raise CreateRefusedError(f"refused: {plan.destination} appeared while the model was being "
                                 "prepared; nothing was created — pick another name") from exc
    except OSError as exc:
        fix = disk.next_step(exc, plan.root, "check the disk")
        raise RepositoryError(f"cannot create {plan.destination}: {exc.strerror or exc}; nothing was "
                              f"created — {fix}") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    try:
        fsync_directory(plan.root)
    except OSError as exc:
        raise RepositoryError(f"created {plan.destination}, but the disk did not confirm it "
                              f"({exc.strerror or exc}) — check the disk before relying on it") from exc
    return findings


def _refusal(name: str, errors: list[Finding]) -> str:
    """First line: the cause; then every error with its fix."""
    first = errors[0]
    more = f" (and {len(errors) - 1} more error(s), below)" if len(errors) > 1 else ""
    listed = "\n".join(f"  {f}\n    fix: {f.fix}" for f in errors)
    return (f"refused: {name!r} would not load: {first.message} [{first.rule}]{more}; nothing was "
            f"created\n{listed}")


def _relocated(finding: Finding, staged: Path, destination: Path) -> Finding:
    """A finding as it will read once the directory is in place (no staging paths)."""
    def moved(text: str) -> str:
        return text.replace(str(staged), str(destination))
    return replace(finding, message=moved(finding.message), fix=moved(finding.fix), file=moved(finding.file))



def _created(plan: Plan, findings: tuple[Finding, ...], actor: Actor, server: str,
             home: Path | None, start: reconcile.Started | None) -> CreateResult:
    """The directory is in place: keep revision 1 and the audit row (a warning if either fails)."""
    config = plan.files[CONFIG_FILE]
    warnings: list[str] = []
    revision = None
    try:
        revision = revisions.record_revision(plan.root, plan.name, config, who=actor.name,
                                         note=f"created from template {plan.template}", home=home).number
    except WorkspaceDatabaseError as exc:
        warnings.append(f"not kept in the config history: {exc}")
    files = tuple(plan.files)
    message = _created_text(plan.name, plan.template, plan.destination, files)
    try:
        audit.record(ACTION, plan.name, Result.OK, actor=actor, server=server,
                     message=message if start is None else reconcile.outcome_message(message, start),
                     diff=revisions.config_diff(b"", config, plan.name, "absent", "created"), home=home)
    except WorkspaceDatabaseError as exc:
        warnings.append(f"the audit row could not be written: {exc}")
    return CreateResult(plan.name, plan.template, CreateOutcome.CREATED,
                        f"{message}; not loaded: `geadmin models load {plan.name}` loads it",
                        plan.destination, files, findings, revision, warnings=tuple(warnings))


def _created_text(name: str, template: str, directory: Path, files: tuple[str, ...]) -> str:
    return f"created {name!r} from template {template} in {directory} ({', '.join(files)})"


def _loaded(client: TritonClient, created: CreateResult, log: LogSource | None,
            progress: Callable[[int, int, str], None] | None, auth: Authorization | None) -> CreateResult:
    """Load the new model, explained; then ask Triton what state it is in."""
    base = _created_text(created.model, created.template, created.directory, created.files)
    (result,) = run_action(client, ModelAction.LOAD, [created.model], log=log,
                           repository=created.directory.parent, progress=progress, auth=auth)
    state, problem = _state(client, created.model)
    warnings = (*created.warnings, *((problem,) if problem else ()))
    if result.ok and state is ModelState.READY:
        return replace(created, outcome=CreateOutcome.LOADED, message=f"{base}; loaded: READY",
                       load_state=state, warnings=warnings)
    reason = result.explanation.reason if result.explanation else result.message
    if result.ok:  # Triton accepted the load, but the index does not say READY
        seen = state.value if state else "unknown"
        reason = f"Triton accepted the load, but reports {created.model!r} as {seen}"
    error = result.error or RepositoryError(reason)
    return replace(created, outcome=CreateOutcome.LOAD_FAILED, load_state=state, reason=reason,
                   explanation=result.explanation, error=error, warnings=warnings,
                   message=f"{base}; the load failed: {result.message if not result.ok else reason}\n"
                   f"  next step: {actions.next_step(error)}")


def _state(client: TritonClient, name: str) -> tuple[ModelState | None, str]:
    try:
        states = [e.state for e in client.repository_index() if e.name == name]
    except TritonError as exc:
        return None, f"could not read the state of {name!r} back: {exc}"
    if not states:
        return None, (f"Triton at {client.url} does not list {name!r}: the repository geadmin wrote may not "
                      "be the one this Triton serves (--repository / GEADMIN_REPOSITORY)")
    return (ModelState.READY if ModelState.READY in states else states[-1]), ""


def next_step(error: GeAdminError) -> str:
    """What to do about a refused (or failed) create, for the page and the CLI."""
    if isinstance(error, CreateRefusedError) and error.findings:
        return "fix the findings above (the knobs, or the uploaded model file) and create the model again"
    if isinstance(error, RepositoryError):
        return "fix the name, the file names or the knobs as the message says, and create the model again"
    if isinstance(error, AccessDeniedError):
        return "leave out the code files (the python template writes its own model.py), or ask an admin"
    return actions.next_step(error)
