"""Plan a config change before asking: what an apply or a rollback of one model would do.

One function for both faces, `geadmin config apply|rollback` and the Config editor:

1. the new file: the text given (apply), or the kept revision a rollback applies (the one
   named, else the newest that differs from the file on disk: `geadmin.repository.revisions.rollback_target`);
2. the validator's findings on it, with the server's backends when known and the model's last
   good config for suggestions (`validate=False` skips them, as `--no-validate` and every
   rollback do: that config served before);
3. when it parses and differs from the file on disk, its impact: what it does to the loaded
   ensembles that run the model (`geadmin.diagnose.impact.predict`, never raises: a Triton
   that does not answer is a `problem` in it);
4. the question to ask when it takes one of them down, and `decline`: a change that was not
   confirmed is a refusal, audited as one (`refused`, with why) whichever face declined it,
   as `geadmin.ops.models.apply` audits every refusal of its own. So is a change refused while
   it is planned (no such revision, a config that is a link, a file too large), when the
   plan is made for a change someone asked for (`auth` given).

A config the validator rejects is not asked about: the apply refuses it (audited), with why.
The change itself is `geadmin.ops.models.apply.apply_config` / `rollback`; `ChangePlan.expected_sha256`
and `revision` pin it to what was planned, so what was confirmed is what is applied.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from geadmin import audit
from geadmin.access.guard import Authorization, require
from geadmin.access.roles import GuardedAction
from geadmin.audit import Result
from geadmin.diagnose import impact
from geadmin.diagnose.impact import Impact
from geadmin.errors import ConfigParseError, GeAdminError
from geadmin.ops.models.actions import audit_refusal
from geadmin.repository import revisions, store
from geadmin.repository.modelconfig import parse_pbtxt
from geadmin.repository.rules import Severity
from geadmin.repository.validate import Finding, validate_text
from geadmin.triton.client import TritonClient

APPLY, ROLLBACK = "apply", "rollback"
MIN_HASH_PREFIX = 8  # `--expect-hash` may be a prefix this long (history prints 12 characters)


class CheckedChange:
    """A config change the validator and the impact prediction have read (a plan, a preview):
    its blocking findings and the ensembles it takes down, for the dataclasses below it."""

    findings: Sequence[Finding]
    impact: Impact | None

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.ERROR]

    @property
    def taken_down(self) -> list[str]:
        return self.impact.taken_down if self.impact is not None else []


@dataclass(frozen=True)
class ChangePlan(CheckedChange):
    """What an apply or a rollback of `model` would do, before anyone is asked."""

    action: str  # APPLY or ROLLBACK
    model: str
    server: str  # the URL of the server it changes
    data: bytes  # the new file
    current_sha256: str  # the file on disk when planned
    revision: int | None = None  # a rollback: the kept revision it applies
    findings: tuple[Finding, ...] = ()  # the validator's, every severity
    impact: Impact | None = None  # None: does not parse (the apply says why), or is the file on disk

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")

    @property
    def needs_consent(self) -> bool:
        """It takes down an ensemble that runs the model, and the validator lets it through
        (a config it rejects is refused by the apply, not asked about)."""
        return bool(self.taken_down) and not self.errors

    @property
    def question(self) -> str:
        """What both faces ask before a change that takes an ensemble down (and the editor
        before every rollback)."""
        down = ", ".join(self.taken_down)
        if self.action == ROLLBACK:
            return f"Roll {self.model} back to revision {self.revision}?" + (
                f" It takes down {down}." if down else "")
        return f"Apply the new config of {self.model} although it takes down {down}?"

    def declined(self) -> str:
        """The refusal of a change someone did not confirm."""
        down = ", ".join(self.taken_down)
        what = f"the {self.action} of {self.model}" + (
            f" to revision {self.revision}" if self.revision is not None else "")
        return (f"not confirmed: {down} would go down" if down else f"not confirmed: {what}") + \
            ". Nothing was done"


def plan_change(
    client: TritonClient,
    repository: Path,
    model: str,
    *,
    new: str | bytes | None = None,
    revision: int | None = None,
    validate: bool = True,
    backends: frozenset[str] | None = None,
    home: Path | None = None,
    auth: Authorization | None = None,
) -> ChangePlan:
    """The plan of an apply of `new`, or (`new` None) of a rollback to `revision` (None: the
    newest kept revision that differs from disk). Raises RepositoryError when the model has no
    config (or one that is a link), the file is too large, or there is no revision to roll back to.

    `auth`: the change was asked for (a command, a button): such a refusal is audited as the
    apply audits its own, one `refused` row by whoever asked, before it is raised (`auth` must
    cover the action: NotAuthorizedError before anything is read). Without it (the editor
    drawing the plan as the operator types) planning reads only."""
    actor = require(auth, GuardedAction(ROLLBACK if new is None else APPLY)) if auth is not None else None
    try:
        return _plan(client, repository, model, new, revision, validate, backends, home)
    except GeAdminError as exc:
        if actor is not None:
            with contextlib.suppress(GeAdminError):  # the refusal is raised whether or not its row is kept
                audit.record(ROLLBACK if new is None else APPLY, model, Result.REFUSED, actor=actor,
                             server=client.url, message=str(exc), home=home)
        raise


def _plan(client: TritonClient, repository: Path, model: str, new: str | bytes | None, revision: int | None,
          validate: bool, backends: frozenset[str] | None, home: Path | None) -> ChangePlan:
    current = store.read_config(repository, model)
    if new is None:
        target = revisions.rollback_target(repository, model, revision, current.sha256, home=home)
        action, data, revision, validate = ROLLBACK, target.data, target.number, False
    else:
        action, data = APPLY, new.encode("utf-8") if isinstance(new, str) else new
        store.refuse_oversized(model, data)  # before it is decoded or validated
    plan = ChangePlan(action, model, client.url, data, current.sha256, revision)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return plan  # the apply refuses it, with why
    findings: tuple[Finding, ...] = ()
    if validate:
        findings = tuple(validate_text(text, repository / model, backends=backends,
                                       previous=revisions.last_good_config(repository, model, home=home)))
    try:
        config = parse_pbtxt(text)
    except ConfigParseError:
        config = None
    if config is None or data == current.data:  # does not parse (the apply says why) | changes nothing
        return ChangePlan(action, model, client.url, data, current.sha256, revision, findings)
    found = impact.predict(client, action, [model], repository=repository, new_configs={model: config})
    return ChangePlan(action, model, client.url, data, current.sha256, revision, findings, found)


def decline(plan: ChangePlan, auth: Authorization | None, reason: str = "") -> str:
    """Record that `plan` was not carried out because nobody confirmed it (`reason`, else
    `plan.declined()`): one `refused` audit row. Returns the refusal, with a note when the row
    could not be written. `auth` must cover the plan's action."""
    actor = require(auth, GuardedAction(plan.action))
    refusal = reason or plan.declined()
    problem = audit_refusal(plan.server, plan.action, [plan.model], refusal, actor)
    return f"{refusal} (the audit row was not written: {problem})" if problem else refusal


def expected_hash(plan: ChangePlan, given: str | None) -> str:
    """The hash the change must find on disk: `given` (a full hash, or a prefix of at least
    MIN_HASH_PREFIX characters of the planned file's), else the planned file's."""
    if not given:
        return plan.current_sha256
    prefix = given.lower()
    if len(prefix) >= MIN_HASH_PREFIX and plan.current_sha256.startswith(prefix):
        return plan.current_sha256
    return given
